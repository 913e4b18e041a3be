"""The run page's damage and calibration views as pure frames and Plotly figures (no Streamlit, no store).

- Damage on a common scale: every cell's accuracy against its SSIM (how much of the image the corruption
  left), per model and corruption, so cells of different corruptions compare by the damage they did, not
  by their severity numbers; the severity number is the toggle's other axis.
- Reliability diagrams: per model, the clean pass beside its worst corrupted cell (lowest balanced
  accuracy), from the 15 confidence bins each stored unit holds (``unit_sums.CalibrationCounts``).
- Composed cells with their steps, from the run's plan.
"""

from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go

from domainbench.records.config import DomainConfig
from domainbench.metrics.aggregate import CellSummary
from domainbench.metrics.damage_report import INFINITE
from domainbench.records.report import RunReport
from domainbench.records.unit_sums import N_BINS

#: x axes of the accuracy chart: the damage scale or the severity number
X_AXES = {"ssim": "damage: SSIM against the clean images (1 = untouched)", "severity": "severity number"}
DAMAGE_COLUMNS = ["model", "corruption", "severity", "ssim", "psnr_db", "accuracy", "ece", "nll"]


def damage_frame(report: RunReport) -> pd.DataFrame:
    """One row per model × corrupted cell: SSIM, PSNR (inf for identical pixels), balanced accuracy, ECE, NLL."""
    rows = []
    for m, c in report.all_cells():
        if c.severity == 0:
            continue
        d, cal = c.damage, c.calibration
        identical = d is not None and d.n > 0 and d.mse_sum == 0
        rows.append({"model": m.model, "corruption": c.corruption, "severity": c.severity,
                     "ssim": None if d is None else d.ssim,
                     "psnr_db": math.inf if identical else (None if d is None else d.psnr_db),
                     "accuracy": c.accuracy, "ece": None if cal is None else cal.ece, "nll": None if cal is None else cal.nll})
    return pd.DataFrame(rows, columns=DAMAGE_COLUMNS)


def psnr_label(value: float | None) -> str:
    """A PSNR for a table or a hover: ∞ for identical pixels, empty where not measured."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return INFINITE if math.isinf(value) else f"{value:.1f}"


def accuracy_vs_damage(frame: pd.DataFrame, x: str = "ssim", colors: dict[str, str] | None = None) -> go.Figure:
    """Balanced accuracy (%) against SSIM or the severity number: one line per model × corruption, points ordered
    along the x axis; composed cells are single points."""
    if x not in X_AXES:
        raise ValueError(f"x must be one of {', '.join(X_AXES)}, got {x!r}")
    fig = go.Figure()
    data = frame.dropna(subset=["accuracy"] + (["ssim"] if x == "ssim" else []))
    if data.empty:
        fig.add_annotation(text="no labelled cell with measured damage", showarrow=False, x=0.5, y=0.5,
                           xref="paper", yref="paper")
        return fig
    dash = ["solid", "dot", "dash", "longdash", "dashdot", "longdashdot"]
    corruptions = sorted(data["corruption"].unique())
    for (model, corruption), part in data.groupby(["model", "corruption"], sort=True):
        part = part.sort_values(x)
        fig.add_trace(go.Scatter(
            x=part[x], y=100 * part["accuracy"], mode="lines+markers", name=f"{model} · {corruption}",
            legendgroup=model, line={"color": (colors or {}).get(model), "dash": dash[corruptions.index(corruption) % len(dash)]},
            customdata=list(zip(part["severity"], part["ssim"].fillna(float("nan")), map(psnr_label, part["psnr_db"]), strict=True)),
            hovertemplate=(f"{model}<br>{corruption} severity %{{customdata[0]}}<br>SSIM %{{customdata[1]:.3f}}, "
                           "PSNR %{customdata[2]} dB<br>accuracy %{y:.1f} %<extra></extra>")))
    fig.update_layout(xaxis_title=X_AXES[x], yaxis_title="balanced accuracy (%)", height=520,
                      legend={"title": "model · corruption"})
    if x == "ssim":
        fig.update_xaxes(autorange="reversed")  # more damage to the right, as severity grows
    return fig


def worst_cell(report: RunReport, model: str) -> CellSummary | None:
    """The model's corrupted cell with the lowest balanced accuracy (ties: the first by name), with calibration bins."""
    cells = [c for c in report.model(model).cells if c.accuracy is not None and c.calibration is not None
             and c.calibration.n]
    return min(cells, key=lambda c: (c.accuracy, c.corruption, c.severity)) if cells else None


def reliability_frame(report: RunReport, model: str) -> pd.DataFrame:
    """The model's clean pass and worst cell, per confidence bin: its range, images, accuracy and mean confidence
    (None in an empty bin), and the cell's ECE."""
    m = report.model(model)
    cells = [(c, "clean") for c in [m.clean] if c is not None and c.calibration is not None and c.calibration.n]
    worst = worst_cell(report, model)
    if worst is not None:
        cells.append((worst, f"worst: {worst.corruption} s{worst.severity}"))
    rows = []
    for c, label in cells:
        assert c.calibration is not None
        for b, (_, acc, conf, count) in enumerate(c.calibration.bins()):
            rows.append({"cell": label, "bin": b, "low": b / N_BINS, "high": (b + 1) / N_BINS, "images": count,
                         "accuracy": acc, "confidence": conf, "ece": c.calibration.ece})
    return pd.DataFrame(rows, columns=["cell", "bin", "low", "high", "images", "accuracy", "confidence", "ece"])


def reliability_diagram(frame: pd.DataFrame, model: str) -> go.Figure:
    """Accuracy per confidence bin (bars) against the diagonal of perfect calibration, clean beside the worst cell;
    each bar's hover holds its images and mean confidence."""
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=[0, 1], y=[0, 1], mode="lines", name="perfectly calibrated",
                             line={"color": "grey", "dash": "dash"}, hoverinfo="skip"))
    for label, part in frame.groupby("cell", sort=False):
        filled = part.dropna(subset=["accuracy"])
        ece = part["ece"].iloc[0]
        fig.add_trace(go.Bar(
            x=(filled["low"] + filled["high"]) / 2, y=filled["accuracy"], width=1 / N_BINS * 0.45,
            offset=0 if label != "clean" else -1 / N_BINS * 0.45, name=f"{label} (ECE {ece:.3f})",
            customdata=list(zip(filled["images"], filled["confidence"], filled["low"], filled["high"], strict=True)),
            hovertemplate=("confidence %{customdata[2]:.2f}–%{customdata[3]:.2f}: %{customdata[0]} images, "
                           "mean confidence %{customdata[1]:.3f}, accuracy %{y:.3f}<extra>" + label + "</extra>")))
    fig.update_layout(title=f"reliability: {model}", xaxis={"title": "top-1 confidence", "range": [0, 1]},
                      yaxis={"title": "accuracy in the bin", "range": [0, 1]}, barmode="overlay", height=420)
    return fig


def composed_frame(report: RunReport, domain: DomainConfig | None) -> pd.DataFrame:
    """The run's composed cells with their steps in order, SSIM, PSNR and each model's balanced accuracy."""
    if domain is None or not domain.compositions:
        return pd.DataFrame(columns=["cell", "steps", "reason", "ssim", "psnr dB"])
    damage = damage_frame(report)
    rows = []
    for comp in domain.compositions:
        mine = damage[damage["corruption"] == comp.cell_name]
        row = {"cell": comp.cell_name, "steps": " → ".join(f"{c} s{s}" for c, s in comp.pairs), "reason": comp.reason,
               "ssim": mine["ssim"].iloc[0] if len(mine) and pd.notna(mine["ssim"].iloc[0]) else None,
               "psnr dB": psnr_label(mine["psnr_db"].iloc[0]) if len(mine) else ""}
        for _, r in mine.iterrows():
            row[f"{r['model']} acc %"] = None if pd.isna(r["accuracy"]) else 100 * r["accuracy"]
        rows.append(row)
    return pd.DataFrame(rows)

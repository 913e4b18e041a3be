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
from collections.abc import Mapping

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from domainbench.frontend.figures import _error_bars, _panel_titles, bin_interval, model_colors
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


#: the damage chart's top margin (px): its two-line title, a row of models (two rows of long names) and the
#: first row of panel titles
DAMAGE_TOP = 150


def accuracy_vs_damage(frame: pd.DataFrame, x: str = "ssim", colors: dict[str, str] | None = None,
                       bands: Mapping[tuple[str, str, int], tuple[float, float] | None] | None = None,
                       chance: float | None = None, clean: Mapping[str, float | None] | None = None,
                       columns: int = 3) -> go.Figure:
    """Balanced accuracy (%) against SSIM or the severity number: one panel per corruption, one line per model in
    its own colour (``figures.model_colors``), points ordered along the x axis; composed cells are single points.

    ``bands``: (model, corruption, severity) -> the cell's 95 % interval (fractions; the clean pass under
    ("clean", 0)), drawn as error bars. ``chance``: balanced accuracy of guessing (1 / classes), a dotted line.
    ``clean``: each model's clean accuracy, the start of its lines (SSIM 1, severity 0). On the SSIM axis every
    panel has the same scale, so cells of different corruptions compare by the damage they did."""
    if x not in X_AXES:
        raise ValueError(f"x must be one of {', '.join(X_AXES)}, got {x!r}")
    data = frame.dropna(subset=["accuracy"] + (["ssim"] if x == "ssim" else []))
    if data.empty:
        fig = go.Figure()
        fig.add_annotation(text="no labelled cell with measured damage", showarrow=False, x=0.5, y=0.5,
                           xref="paper", yref="paper")
        return fig
    names = sorted(data["corruption"].unique())
    models = list(dict.fromkeys(frame["model"]))
    colors = {**model_colors(models), **(colors or {})}
    cols = max(1, min(columns, len(names)))
    rows = math.ceil(len(names) / cols)
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=names, shared_yaxes=True, horizontal_spacing=0.04,
                        vertical_spacing=min(0.3 / max(rows - 1, 1), 0.12) if rows > 1 else 0.1)
    start = 1.0 if x == "ssim" else 0
    for i, corruption in enumerate(names):
        r, c = divmod(i, cols)
        for model in models:
            # along the damage: SSIM falling, severity rising, so a line drawn from the clean pass never doubles back
            part = data[(data["model"] == model) & (data["corruption"] == corruption)].sort_values(
                x, ascending=x != "ssim")
            if part.empty:
                continue
            xs, ys = part[x].astype(float).tolist(), (100 * part["accuracy"].astype(float)).tolist()
            keys = [(corruption, int(s)) for s in part["severity"]]
            hover = [[int(s), "" if v != v else f"{v:.3f}", psnr_label(p)]
                     for s, v, p in zip(part["severity"], part["ssim"].astype(float), part["psnr_db"], strict=True)]
            base = (clean or {}).get(model)
            if base is not None:  # the line starts at the clean pass: no damage, severity 0
                xs, ys = [start, *xs], [100 * base, *ys]
                keys, hover = [("clean", 0), *keys], [[0, "1.000", psnr_label(math.inf)], *hover]
            ivs = [(bands or {}).get((model, *k)) for k in keys]
            err = _error_bars([None if iv is None else iv[0] for iv in ivs], [None if iv is None else iv[1] for iv in ivs],
                              ys)
            fig.add_trace(go.Scatter(
                x=xs, y=ys, mode="lines+markers", name=model, legendgroup=model, showlegend=i == 0,
                meta=corruption, line={"color": colors[model]}, marker={"color": colors[model]}, error_y=err,
                customdata=[[*h, "" if iv is None else f" (95 % interval {100 * iv[0]:.1f}–{100 * iv[1]:.1f} %)"]
                            for h, iv in zip(hover, ivs, strict=True)],
                hovertemplate=(f"{model}<br>{corruption} severity %{{customdata[0]}}<br>SSIM %{{customdata[1]}}, "
                               "PSNR %{customdata[2]} dB<br>accuracy %{y:.1f} %%{customdata[3]}<extra></extra>")),
                row=r + 1, col=c + 1)
    if chance:
        fig.add_hline(y=100.0 * chance, line_dash="dot", line_color="#777", row="all", col="all",
                      annotation_text=f"chance ({100 * chance:.0f} %)", annotation_position="bottom right")
    for col in range(cols):  # one short axis title under the lowest panel of each column
        last = max(i for i in range(len(names)) if i % cols == col)
        # short: three panels across a 1,024 px window leave some 160 px each (the subtitle says what SSIM is)
        fig.update_xaxes(title_text="SSIM" if x == "ssim" else "severity", row=last // cols + 1, col=col + 1)
    if x == "ssim":
        # more damage to the right, as severity grows; one scale for every panel, so damage compares across them
        low = float(data["ssim"].min())
        fig.update_xaxes(range=[1.0 + 0.03 * (1.0 - low) + 0.01, low - 0.05 * (1.0 - low) - 0.01])
    else:
        top = int(data["severity"].max())
        fig.update_xaxes(tickmode="array", tickvals=list(range(top + 1)), range=[-0.4, top + 0.4])
    fig.update_yaxes(range=[0, 100], matches="y")
    fig.update_yaxes(title_text="balanced accuracy (%)", col=1)
    _panel_titles(fig, names)
    bars = any(t.error_y.array is not None for t in fig.data)
    height = 240 * rows + 80 + DAMAGE_TOP
    fig.update_layout(title=f"balanced accuracy vs {'damage (SSIM)' if x == 'ssim' else 'severity'}, one panel per "
                            "corruption<br><sup>" + X_AXES[x] + ("; bars: 95 % intervals" if bars else "")
                            + (f"; dotted: chance ({100 * chance:.0f} %)" if chance else "") + "</sup>",
                      height=height, margin={"t": DAMAGE_TOP}, showlegend=True,
                      title_y=1 - 30 / height, title_yanchor="top",
                      # the models, a colour each, in a row between the title and the panels' titles: beside the panels
                      # the legend squeezed three panels into 100 px each at 1,024 px
                      legend={"title": {"text": "model"}, "orientation": "h", "yref": "container", "yanchor": "bottom",
                              "y": (height - DAMAGE_TOP + 26) / height, "x": 0})
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
        # each bin's accuracy is a share of its images: the proportion interval every share gets
        ivs = [bin_interval(float(a), int(n)) for a, n in zip(filled["accuracy"], filled["images"], strict=True)]
        fig.add_trace(go.Bar(
            x=(filled["low"] + filled["high"]) / 2, y=filled["accuracy"], width=1 / N_BINS * 0.45,
            error_y=_error_bars([None if iv is None else iv[0] for iv in ivs], [None if iv is None else iv[1] for iv in ivs],
                                filled["accuracy"].astype(float).tolist(), scale=1.0),
            offset=0 if label != "clean" else -1 / N_BINS * 0.45, name=f"{label} (ECE {ece:.3f})",
            customdata=list(zip(filled["images"], filled["confidence"], filled["low"], filled["high"], strict=True)),
            hovertemplate=("confidence %{customdata[2]:.2f}–%{customdata[3]:.2f}: %{customdata[0]} images, "
                           "mean confidence %{customdata[1]:.3f}, accuracy %{y:.3f}<extra>" + label + "</extra>")))
    fig.update_layout(title=f"reliability: {model}<br><sup>bars: 95 % intervals of each bin's accuracy</sup>", xaxis={"title": "top-1 confidence", "range": [0, 1]},
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

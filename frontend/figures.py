"""Pure Plotly figure builders: a run's report (``domainbench.records.report.RunReport``) or frames in, ``go.Figure`` out.

No Streamlit and no store access here, so each builder is tested on small hand-made reports.
A model keeps the same colour in every figure of a page (:func:`model_colors`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.colors import qualitative
from plotly.subplots import make_subplots

from domainbench.metrics.aggregate import CellSummary, ModelSummary
from domainbench.metrics.registry import metric, metrics_of
from domainbench.records.report import RunReport, StabilityMean, ThreatCell
from domainbench.stats import interval_text

SAFE_COLOR = "#2ca02c"
UNSAFE_COLOR = "#d62728"
#: chart axis labels: a cell's balanced accuracy and flip probability (percent), the stability metrics
METRIC_LABELS = {
    **{m.field: f"{m.display} (%)" for m in map(metric, ("balanced_accuracy", "label_flip_probability"))},
    **{m.name: m.display for m in metrics_of("image")},
}
def _axis_title(name: str, unit: str, chars: int = 40) -> str:
    """"name (unit)", the unit on a second line when the whole is longer than ``chars``: a y axis title longer than
    its plot ran over the chart's title ("DivergenceRadius R_dr (distance of L2-normalised embeddings)")."""
    return f"{name} ({unit})" if len(name) + len(unit) + 3 <= chars else f"{name}<br>({unit})"


#: the stability metrics' axis titles, with their unit (the registry's)
STABILITY_AXES = {m.name: _axis_title(m.display, '(1 − cosine) / 2' if m.unit == 'cosine'
                                       else 'distance of L2-normalised embeddings')
                  for m in metrics_of("image")}


#: 20 distinct colours; a model's colour follows from its name, so it is the same on every page and chart
PALETTE = list(dict.fromkeys(qualitative.Plotly + qualitative.D3))
#: (low, high) of a rate as a fraction, per (model, corruption, severity); the clean pass is ("clean", 0)
CellBands = dict[tuple[str, str, int], "tuple[float, float] | None"]


def model_colors(models: Sequence[str]) -> dict[str, str]:
    """Each model's colour, a function of its name (its hash picks the colour), not of its place in a list: a model
    keeps its colour across pages and charts whichever other models are shown. Models whose names hash to the
    same colour in one chart take the next free ones, in name order."""
    import zlib

    out: dict[str, str] = {}
    used: set[int] = set()
    for m in sorted(set(models)):
        i = zlib.crc32(m.encode()) % len(PALETTE)
        while i in used and len(used) < len(PALETTE):
            i = (i + 1) % len(PALETTE)
        used.add(i)
        out[m] = PALETTE[i]
    return {m: out[m] for m in models}


def _error_bars(lows: Sequence[float | None], highs: Sequence[float | None], values: Sequence[float],
                scale: float = 100.0) -> dict[str, Any] | None:
    """Plotly ``error_y`` of intervals (fractions) around values (already scaled); None when no value has one."""
    if all(lo is None for lo in lows):
        return None
    plus = [0.0 if hi is None else max(0.0, scale * hi - v) for v, hi in zip(values, highs, strict=True)]
    minus = [0.0 if lo is None else max(0.0, v - scale * lo) for v, lo in zip(values, lows, strict=True)]
    return {"type": "data", "symmetric": False, "array": plus, "arrayminus": minus, "visible": True, "thickness": 1.2}


def cell_label(corruption: str, severity: int) -> str:
    if corruption.startswith("shift:"):  # the user's own images: one cell, marked real wherever it is listed
        return f"{corruption} (real)"
    return f"{corruption} s{severity}"


def _empty(title: str, message: str) -> go.Figure:
    fig = go.Figure()
    fig.update_layout(title=title, xaxis={"visible": False}, yaxis={"visible": False})
    fig.add_annotation(text=message, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
    return fig


#: characters of a panel title at three panels across a 1,024 px window (about 300 px each); longer names (a
#: composition's steps) are shortened, the full name on hover
PANEL_TITLE_CHARS = 34
#: characters of a heatmap's column label before it is shortened (the full name in the cell's hover)
COLUMN_LABEL_CHARS = 24


def short_label(text: str, n: int) -> str:
    """``text`` in at most ``n`` characters: its head, "…" and its tail (a composition's or domain's end tells it apart)."""
    text = " ".join(str(text).split())
    if len(text) <= n:
        return text
    tail = (n - 1) // 3
    return text[: n - 1 - tail].rstrip() + "…" + text[len(text) - tail:].lstrip()


def _panel_titles(fig: go.Figure, names: Sequence[str]) -> None:
    """Subplot titles shortened to a panel's width, each hovering to the full name (neighbours never overprint)."""
    for annotation, name in zip(fig.layout.annotations, names, strict=False):
        annotation.update(text=short_label(name, PANEL_TITLE_CHARS), hovertext=name)


def severity_lines(report: RunReport, metric: str = "accuracy", columns: int = 3, bands: CellBands | None = None) -> go.Figure:
    """Metric vs severity, one panel per corruption, one line per model; severity 0 is clean.

    ``metric`` is ``accuracy`` (balanced accuracy) or ``lfp``; values are percentages.
    Cells whose value is not applicable (unlabelled data) are left out, never drawn as 0.
    ``bands``: each cell's 95 % interval (fractions), drawn as error bars.
    """
    if metric not in ("accuracy", "lfp"):
        raise ValueError(f"metric must be 'accuracy' or 'lfp', got {metric!r}")
    names = report.corruption_names()
    models = report.models
    label = METRIC_LABELS[metric]
    if not names:
        return _empty(f"{label} vs severity", "no corrupted cells yet")
    cols = max(1, min(columns, len(names)))
    rows = math.ceil(len(names) / cols)
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=names, shared_yaxes=True,
                        vertical_spacing=min(0.3 / max(rows - 1, 1), 0.12) if rows > 1 else 0.1,
                        horizontal_spacing=0.04)
    colors = model_colors(report.model_names)
    n_traces = 0
    for i, name in enumerate(names):
        r, c = divmod(i, cols)
        for m in models:
            pts = _severity_points(m, name, metric)
            if not pts:
                continue
            ivs = [(bands or {}).get((m.model, name if s else "clean", s)) for s, _ in pts]
            err = _error_bars([None if iv is None else iv[0] for iv in ivs], [None if iv is None else iv[1] for iv in ivs],
                              [p[1] for p in pts])
            fig.add_trace(
                go.Scatter(
                    x=[p[0] for p in pts], y=[p[1] for p in pts], mode="lines+markers", name=m.model,
                    legendgroup=m.model, showlegend=i == 0, line={"color": colors[m.model]}, error_y=err,
                    customdata=[["" if iv is None else f" (95 % interval {100 * iv[0]:.1f}–{100 * iv[1]:.1f} %)"]
                                for iv in ivs],
                    hovertemplate=f"{m.model}<br>{name} severity %{{x}}<br>{label.replace(' (%)', '')} %{{y:.1f}} %%{{customdata[0]}}"
                                  "<extra></extra>",
                ),
                row=r + 1, col=c + 1,
            )
            n_traces += 1
    if n_traces == 0:
        return _empty(f"{label} vs severity", "not applicable: the dataset is unlabelled" if metric == "accuracy" else "no values")
    for i, name in enumerate(names):
        _mark_unsafe(fig, report, name, row=i // cols + 1, col=i % cols + 1)
    n_classes = len(report.classification.classes)
    if metric == "accuracy" and n_classes:
        # balanced accuracy of guessing: 1 / classes; the full 0-100 range keeps the drop in proportion
        fig.add_hline(y=100.0 / n_classes, line_dash="dot", line_color="#777", row="all", col="all",
                      annotation_text=f"chance ({100.0 / n_classes:.0f} %)", annotation_position="bottom right")
        fig.update_yaxes(range=[0, 100])
    # the run's severities and no others: a band over the top severity reaches past it, and Plotly's own ticks
    # then added a severity that does not exist
    top = max((c.severity for m in models for c in m.cells if c.corruption in names), default=5)
    fig.update_xaxes(title_text="severity", tickmode="array", tickvals=list(range(top + 1)), range=[-0.4, top + 0.5])
    fig.update_yaxes(matches="y")  # one scale for every panel, so corruptions compare at a glance
    fig.update_yaxes(title_text=label, col=1)
    _panel_titles(fig, names)
    fig.update_layout(title=f"{label} vs severity (0 = clean)" + ("; bars: 95 % intervals" if bands else ""),
                      height=260 * rows + 80, margin={"t": 80}, legend={"title": {"text": "model"}}, showlegend=True)
    return fig


def unsafe_severities(report: RunReport, corruption: str, safety: str = "unsafe") -> list[int]:
    """Severities of ``corruption`` whose PD verdict is ``safety`` (the report's, as every tab reads it)."""
    return sorted(t.severity for t in report.threat if t.corruption == corruption and t.safety == safety)


def _mark_unsafe(fig: go.Figure, report: RunReport, corruption: str, row: int, col: int) -> None:
    # a shaded band over the unsafe severities (red) and the borderline ones (amber): an error there may be a
    # changed true label, not the model's fault; the same verdicts as the PD-threat tab and `show`
    for safety, color in (("unsafe", UNSAFE_COLOR), ("borderline", BORDERLINE_COLOR)):
        severities = unsafe_severities(report, corruption, safety)
        for k, (lo, hi) in enumerate(_runs(severities)):
            fig.add_vrect(x0=lo - 0.5, x1=hi + 0.5, row=row, col=col, fillcolor=color, opacity=0.12, line_width=0,
                          annotation_text=f"PD-{safety}" if k == 0 else None, annotation_position="top left",
                          annotation_font_color=color)


def _runs(values: list[int]) -> list[tuple[int, int]]:
    """Sorted integers as (first, last) of each run of consecutive ones: [1, 2, 4] -> [(1, 2), (4, 4)]."""
    out: list[tuple[int, int]] = []
    for v in values:
        if out and v == out[-1][1] + 1:
            out[-1] = (out[-1][0], v)
        else:
            out.append((v, v))
    return out


def _severity_points(model: ModelSummary, corruption: str, metric: str) -> list[tuple[int, float]]:
    """(severity, metric in %) of one model under one corruption, the clean pass at severity 0.

    A value that does not apply (accuracy of unlabelled data) is left out, never drawn as 0.
    """
    cells: list[CellSummary] = sorted((x for x in model.cells if x.corruption == corruption), key=lambda x: x.severity)
    if model.clean is not None:  # the clean pass is stored with severity 0
        cells.insert(0, model.clean)
    values = [(x.severity, getattr(x, metric)) for x in cells]
    return [(s, 100.0 * v) for s, v in values if v is not None]


#: the most (corruption, severity) columns the label-flip heatmap draws: at a 1,400 px window the chart is about 940 px
#: wide, of which a model's name (about 175 px) and the colour bar (about 80 px) leave some 680 px to the cells, and a
#: cell's text "12 (9–16)" needs about 60 px at Plotly's 12 px font: 11 columns. With more, the same numbers are a
#: sortable table (:func:`lfp_table`), one row per cell (51 columns were unreadable, issue 37 defect 9)
LFP_HEATMAP_MAX_COLUMNS = 11


def lfp_cells(report: RunReport) -> list[tuple[str, int]]:
    """The report's corrupted (corruption, severity) cells in the flip heatmap's order."""
    return sorted({(c.corruption, c.severity) for m in report.models for c in m.cells})


def lfp_table(report: RunReport, bands: CellBands | None = None) -> pd.DataFrame:
    """The label-flip heatmap's numbers as a table, one row per (corruption, severity) cell: per model its flip
    probability in % (a number, so the table sorts by it; NaN where the model has no such cell) and, with ``bands``,
    its 95 % interval's ends in % as text ("9.1–16.2")."""
    keys = lfp_cells(report)
    out = pd.DataFrame({"cell": [cell_label(*k) for k in keys], "corruption": [k[0] for k in keys],
                        "severity": [k[1] for k in keys]})
    for m in report.models:
        by = {(c.corruption, c.severity): c.lfp for c in m.cells}
        values = [by.get(k) for k in keys]
        out[f"{m.model} LFP %"] = [np.nan if v is None else 100.0 * v for v in values]
        if bands:
            ivs = [bands.get((m.model, *k)) for k in keys]
            out[f"{m.model} 95 % CI"] = ["" if v is None or iv is None else f"{100 * iv[0]:.1f}–{100 * iv[1]:.1f}"
                                         for v, iv in zip(values, ivs, strict=True)]
    return out


def lfp_heatmap(report: RunReport, bands: CellBands | None = None) -> go.Figure:
    """Label flip probability, models × (corruption, severity) cells; missing cells stay blank. ``bands``: each
    cell's 95 % interval (fractions), in the cell's text (``12 (9–16)``) and its hover."""
    models = report.models
    keys = lfp_cells(report)
    if not keys:
        return _empty("label flip probability", "no corrupted cells yet")
    z: list[list[float | None]] = []
    for m in models:
        by = {(c.corruption, c.severity): c.lfp for c in m.cells}
        z.append([None if by.get(k) is None else 100.0 * by[k] for k in keys])
    ivs = [[(bands or {}).get((m.model, *k)) for k in keys] for m in models]
    text = [["" if v is None else interval_text(v / 100, iv, percent=True, digits=0, unit=False)
             for v, iv in zip(row, ivrow, strict=True)] for row, ivrow in zip(z, ivs, strict=True)]
    hover = [["" if iv is None else f" (95 % interval {100 * iv[0]:.1f}–{100 * iv[1]:.1f} %)" for iv in ivrow] for ivrow in ivs]
    fig = go.Figure(
        go.Heatmap(
            z=z, x=[cell_label(*k) for k in keys], y=report.model_names, text=text, customdata=hover,
            texttemplate="%{text}", colorscale="Reds", zmin=0, zmax=100,
            colorbar={"title": "LFP %"}, hovertemplate="%{y}<br>%{x}<br>LFP %{z:.1f} %%{customdata}<extra></extra>",
        )
    )
    fig.update_layout(title="label flip probability (%): share of predictions that change under the corruption",
                      xaxis_title="corruption, severity", yaxis_title="model",
                      # every cell's label (Plotly thins category ticks that would crowd): dtick 1, tilted to fit
                      xaxis={"dtick": 1, "tickangle": -45, "automargin": True},
                      yaxis={"autorange": "reversed", "dtick": 1, "automargin": True},
                      height=max(300, 200 + 40 * len(models)))
    return fig


BORDERLINE_COLOR = "#e6a700"


def threat_class(t: ThreatCell) -> str:
    """The cell's verdict, "safe", "borderline" or "unsafe": the report's (``metrics.threat.pd_safety``), read
    here so that no tab decides it again."""
    return t.safety


def threat_chart(report: RunReport) -> go.Figure:
    """Per corruption cell, the share of its images whose PD threat is above 1, with its 95 % interval
    (Clopper–Pearson), coloured by the cell's verdict: green safe, amber borderline, red unsafe.

    The verdict is read off this chart: safe when the interval lies below the dashed cut, unsafe when
    it lies above it. The mean threat is in each bar's hover.
    """
    from domainbench.metrics.threat import UNSAFE_SHARE_CUT

    cells: list[ThreatCell] = sorted(
        (t for t in report.threat if t.frac_unsafe_images is not None), key=lambda t: (t.corruption, t.severity)
    )
    if not cells:
        return _empty("PD threat", "the PD threat was not measured for this run")
    fig = go.Figure()
    for name, color in (("safe", SAFE_COLOR), ("borderline", BORDERLINE_COLOR), ("unsafe", UNSAFE_COLOR)):
        part = [t for t in cells if t.safety == name]
        if not part:
            continue
        share = [100.0 * float(t.frac_unsafe_images or 0.0) for t in part]
        fig.add_trace(
            go.Bar(
                x=[cell_label(t.corruption, t.severity) for t in part], y=share,
                error_y=_error_bars([t.frac_unsafe_ci_low for t in part], [t.frac_unsafe_ci_high for t in part], share),
                name=name, marker_color=color,
                customdata=[[interval_text(None if t.frac_unsafe_images is None else float(t.frac_unsafe_images),
                                           _ends(t.frac_unsafe_ci_low, t.frac_unsafe_ci_high), percent=True),
                             t.n, "—" if t.mean_threat is None else f"{t.mean_threat:.3f}"] for t in part],
                hovertemplate="%{x}<br>images above threat 1: %{customdata[0]} of %{customdata[1]} (95 % interval)"
                              "<br>mean threat %{customdata[2]}<extra>" + name + "</extra>",
            )
        )
    order = [cell_label(t.corruption, t.severity) for t in cells]
    fig.add_hline(y=100.0 * UNSAFE_SHARE_CUT, line_dash="dash", line_color="#555",
                  annotation_text=f"cut ({100 * UNSAFE_SHARE_CUT:g} %)", annotation_position="top left")
    # the tilted cell labels take their own room below the plot (automargin), which no longer squeezes the bars to a
    # strip: the figure grows by the longest label; the legend sits above the plot, where nothing cuts it
    labels = 7 * max(map(len, order)) * 0.8
    # two lines: a Plotly title never wraps, and one line ran past a 1,024 px window's chart
    fig.update_layout(title="PD threat per corruption cell<br><sup>share of images possibly moved to another class "
                            "(lower = more label-preserving)</sup>",
                      xaxis_title="corruption, severity", yaxis_title="images with PD threat above 1 (%)",
                      barmode="overlay", showlegend=True, height=int(THREAT_PLOT_HEIGHT + 120 + labels),
                      legend={"title": {"text": "cell"}, "orientation": "h", "yanchor": "bottom", "y": 1.02, "x": 0},
                      margin={"t": 110},
                      xaxis={"categoryorder": "array", "categoryarray": order, "tickangle": -45, "automargin": True},
                      yaxis={"range": [0, 100]})
    return fig


#: the PD-threat chart's plot area (px), whatever the number and length of the cells' labels below it
THREAT_PLOT_HEIGHT = 300


def _ends(low: float | None, high: float | None) -> tuple[float, float] | None:
    return None if low is None or high is None else (low, high)


def stability_distribution(frame: pd.DataFrame, metric: str = "divergence_radius", kind: str = "box") -> go.Figure:
    """Per-image stability values: a box (or violin) per corruption and model."""
    if metric not in METRIC_LABELS or metric in ("accuracy", "lfp"):
        raise ValueError(f"metric must be divergence_radius, cosine or euclidean, got {metric!r}")
    if kind not in ("box", "violin"):
        raise ValueError(f"kind must be 'box' or 'violin', got {kind!r}")
    data = frame.dropna(subset=[metric]) if len(frame) else frame
    if len(data) == 0:
        return _empty("embedding stability", "stability was not measured for this run")
    models = list(dict.fromkeys(data["model"]))
    colors = model_colors(models)
    fig = go.Figure()
    for m in models:
        part = data[data["model"] == m]
        common = {"x": part["corruption"].tolist(), "y": part[metric].astype(float).tolist(), "name": m,
                  "marker_color": colors[m], "legendgroup": m}
        if kind == "box":
            fig.add_trace(go.Box(**common, boxmean=True))
        else:
            fig.add_trace(go.Violin(**common, box_visible=True, meanline_visible=True, points=False))
    fig.update_layout(title=f"{METRIC_LABELS[metric]} per image (higher = less stable embedding)",
                      xaxis_title="corruption", yaxis_title=STABILITY_AXES[metric],
                      boxmode="group", violinmode="group", showlegend=True, legend={"title": {"text": "model"}})
    return fig


def stability_means(means: Sequence[StabilityMean], metric: str = "divergence_radius",
                    bounds: Mapping[tuple[str, str], tuple[float, float] | None] | None = None) -> go.Figure:
    """Average robustness value per model × corruption as grouped bars (stability paper, Figure 4); ``bounds``:
    (model, corruption) -> the mean's 95 % interval (``data.stability_mean_bounds``), drawn as error bars."""
    if metric not in METRIC_LABELS or metric in ("accuracy", "lfp"):
        raise ValueError(f"metric must be divergence_radius, cosine or euclidean, got {metric!r}")
    rows = [r for r in means if getattr(r, metric) is not None]
    if not rows:
        return _empty("mean embedding stability", "stability was not measured for this run")
    models = list(dict.fromkeys(r.model for r in rows))
    names = sorted({r.corruption for r in rows})
    colors = model_colors(models)
    fig = go.Figure()
    for m in models:
        by = {r.corruption: getattr(r, metric) for r in rows if r.model == m}
        ys = [by.get(c) for c in names]
        ivs = [(bounds or {}).get((m, c)) for c in names]
        err = _error_bars([None if iv is None else iv[0] for iv in ivs], [None if iv is None else iv[1] for iv in ivs],
                          [0.0 if y is None else y for y in ys], scale=1.0)
        fig.add_trace(go.Bar(x=names, y=ys, name=m, marker_color=colors[m], error_y=err,
                             customdata=["" if iv is None else f" (95 % interval {iv[0]:.4f}–{iv[1]:.4f})" for iv in ivs],
                             hovertemplate=f"{m}<br>%{{x}}<br>mean %{{y:.4f}}%{{customdata}}<extra></extra>"))
    bars = any(t.error_y.array is not None for t in fig.data)
    fig.update_layout(title=f"average {METRIC_LABELS[metric]} per model and corruption (higher = less stable)"
                            + ("<br><sup>bars: 95 % intervals, bootstrap over the images</sup>" if bars else ""),
                      barmode="group", xaxis_title="corruption", yaxis_title=f"mean {STABILITY_AXES[metric]}",
                      showlegend=True, legend={"title": {"text": "model"}})
    return fig


def confusion_heatmap(matrix: np.ndarray | Sequence[Sequence[int]], classes: Sequence[str], title: str = "",
                      normalize: bool = False) -> go.Figure:
    """Rows are true classes, columns predictions; ``normalize`` shows each row as shares of its class."""
    cm = np.asarray(matrix, dtype=float)
    if cm.ndim != 2 or cm.shape[0] != cm.shape[1] or cm.shape[0] != len(classes):
        raise ValueError(f"confusion matrix of shape {cm.shape} does not match {len(classes)} classes")
    counts = cm.astype(np.int64)
    if normalize:
        totals = cm.sum(axis=1, keepdims=True)
        cm = np.divide(cm, totals, out=np.zeros_like(cm), where=totals > 0)
    text = [[f"{v:.0%}" if normalize else f"{int(v)}" for v in row] for row in cm]
    fig = go.Figure(
        go.Heatmap(z=cm.tolist(), x=list(classes), y=list(classes), text=text, texttemplate="%{text}",
                   customdata=counts.tolist(), colorscale="Blues", zmin=0,
                   colorbar={"title": "share of the class" if normalize else "images"},
                   zmax=1 if normalize else None,
                   hovertemplate="true %{y}<br>predicted %{x}<br>%{customdata} images<extra></extra>")
    )
    fig.update_layout(title=title or "confusion matrix", xaxis_title="predicted class", yaxis_title="true class",
                      yaxis={"autorange": "reversed"}, height=220 + 28 * len(classes))
    return fig


def compare_bars(frame: pd.DataFrame, metric: str, label: str | None = None, chance: float | None = None) -> go.Figure:
    """Grouped bars: one group per domain (run), one bar per model; missing values are left out. Error bars where
    ``frame`` has ``{metric}_lo`` / ``{metric}_hi``; a rate (accuracy) is drawn in % with a dotted line at ``chance``
    (a fraction: 1 / classes)."""
    label = label or metric
    data = frame.dropna(subset=[metric]) if len(frame) else frame
    if len(data) == 0:
        return _empty(f"{label} per domain", f"{label} is not available for the chosen runs")
    # the summary's field -> its declaration: a rate is drawn in %, a ratio to the baseline against its line at 1
    declared = next((m for m in metrics_of("model") if m.field == metric), None)
    scale = 100.0 if declared is not None and declared.percent else 1.0
    ratio = declared is not None and declared.unit == "ratio"
    # a model with no value in any domain gets no (empty) legend entry
    fig = _grouped_bars(frame, data, "domain", metric, label, scale, baseline=ratio, skip_empty=True,
                        title=f"{label} per model and domain", xaxis_title="domain (run)",
                        bounds=(f"{metric}_lo", f"{metric}_hi"))
    if scale == 100.0 and chance:
        fig.add_hline(y=100.0 * chance, line_dash="dot", line_color="#777", annotation_text=f"chance ({100 * chance:.0f} %)",
                      annotation_position="bottom right")
        fig.update_yaxes(range=[0, 100])
    return fig


def _grouped_bars(frame: pd.DataFrame, data: pd.DataFrame, x: str, metric: str, label: str, scale: float, baseline: bool,
                  skip_empty: bool, bounds: tuple[str, str] | None = None, **layout: Any) -> go.Figure:
    """One bar group per value of column ``x`` (in ``frame``'s order), one bar per model (``data``:
    ``frame`` without the undefined values), in % when ``scale`` is 100; ``baseline`` draws the
    dashed line at 1 of the baseline-relative metrics; ``bounds``: the columns of each value's interval."""
    models = list(dict.fromkeys(frame["model"]))
    colors = model_colors(models)
    fig = go.Figure()
    for m in models:
        part = data[data["model"] == m]
        if skip_empty and len(part) == 0:
            continue
        ys = (part[metric].astype(float) * scale).tolist()
        err = None
        if bounds and bounds[0] in part.columns:
            def col(c: str) -> list[float | None]:
                return [None if v != v else float(v) for v in part[c].astype(float)]
            err = _error_bars(col(bounds[0]), col(bounds[1]), ys, scale)
        value = "%{y:.1f} %" if scale == 100.0 else "%{y:.3f}"
        fig.add_trace(go.Bar(x=part[x].tolist(), y=ys, name=m, marker_color=colors[m], error_y=err,
                             hovertemplate=f"{m}<br>%{{x}}<br>{label} {value}<extra></extra>"))
    fig.update_layout(barmode="group", yaxis_title=f"{label}{' (%)' if scale == 100.0 else ''}",
                      xaxis={"categoryorder": "array", "categoryarray": list(dict.fromkeys(frame[x]))}, **layout)
    if baseline:
        fig.add_hline(y=1.0, line_dash="dash", line_color="#555", annotation_text="baseline = 1")
    return fig


def selection_heatmap(freq: pd.DataFrame, highlight: str | None = None) -> go.Figure:
    """Selection frequency of each catalogue corruption (rows) per domain (columns), in %."""
    if freq.empty:
        return _empty("corruption selection frequency", "no planned domains yet")
    z = (freq.to_numpy(dtype=float) * 100.0).tolist()
    text = [[f"{v:.0f}" for v in row] for row in z]
    fig = go.Figure(
        go.Heatmap(z=z, x=list(freq.columns), y=list(freq.index), text=text, texttemplate="%{text}",
                   colorscale="Blues", zmin=0, zmax=100, colorbar={"title": "selected %"},
                   hovertemplate="%{y}<br>%{x}<br>selected in %{z:.0f}% of samples<extra></extra>")
    )
    fig.update_layout(title="how often the planner chose each corruption (majority vote over samples)",
                      xaxis_title="domain", yaxis_title="corruption", height=max(320, 24 * len(freq) + 160),
                      yaxis={"autorange": "reversed"})
    if highlight is not None and highlight in freq.columns:
        i = list(freq.columns).index(highlight)
        fig.add_vrect(x0=i - 0.5, x1=i + 0.5, line_width=2, line_color="#ff7f0e", fillcolor="rgba(0,0,0,0)")
    return fig


def per_corruption_bars(frame: pd.DataFrame, metric: str, label: str | None = None, chance: float | None = None) -> go.Figure:
    """One bar group per corruption, one bar per model (``data.per_corruption_frame``).

    CE / rCE / FR are relative to the baseline (a dashed line at 1); accuracy is drawn in %, with a dotted line at
    ``chance`` (a fraction). Error bars where ``frame`` has ``{metric}_lo`` / ``{metric}_hi`` (``data.corruption_bounds``).
    Undefined values are left out, never drawn as 0.
    """
    if metric not in ("ce", "rce", "fr", "accuracy"):
        raise ValueError(f"metric must be ce, rce, fr or accuracy, got {metric!r}")
    label = label or metric
    data = frame.dropna(subset=[metric]) if len(frame) else frame
    if len(data) == 0:
        return _empty(f"{label} per corruption", f"{label} is not defined for this run")
    scale = 100.0 if metric == "accuracy" else 1.0
    better = "higher is better" if metric == "accuracy" else "ratio to the baseline, lower is better"
    fig = _grouped_bars(frame, data, "corruption", metric, label, scale, baseline=metric != "accuracy", skip_empty=False,
                        title=f"{label} per corruption ({better})", xaxis_title="corruption",
                        legend={"title": {"text": "model"}}, showlegend=True,
                        bounds=(f"{metric}_lo", f"{metric}_hi"))
    if metric == "accuracy" and chance:
        fig.add_hline(y=100.0 * chance, line_dash="dot", line_color="#777", annotation_text=f"chance ({100 * chance:.0f} %)",
                      annotation_position="bottom right")
        fig.update_yaxes(range=[0, 100])
    return fig


def bin_fit(part: pd.DataFrame) -> tuple[float, float] | None:
    """(slope, intercept) in % of the straight line through exactly the points drawn (bin mean radius,
    bin accuracy in %); None with fewer than two distinct radii. The report's regression is fitted on
    held-out images and is listed in the table below the chart, not drawn over these points."""
    x = part["mean_radius"].to_numpy(dtype=float)
    y = 100.0 * part["accuracy"].to_numpy(dtype=float)
    ok = np.isfinite(x) & np.isfinite(y)
    if len(np.unique(x[ok])) < 2:
        return None
    slope, icpt = np.linalg.lstsq(np.stack([x[ok], np.ones(ok.sum())], axis=1), y[ok], rcond=None)[0]
    return float(slope), float(icpt)


def bin_interval(accuracy: float, count: int, confidence: float = 0.95) -> tuple[float, float] | None:
    """95 % interval of a bin's accuracy: the proportion interval every share of images gets (continuity-corrected
    Wilson, ``stats.proportion_interval``) over its images. Each image's accuracy is a share in [0, 1] whose
    variance is at most p(1 − p), so the binomial interval does not understate the spread."""
    from domainbench.stats.intervals import proportion_interval

    if count <= 0 or accuracy != accuracy:
        return None
    return proportion_interval(int(round(accuracy * count)), int(count), confidence)


def accuracy_vs_radius(bins: pd.DataFrame, summary: pd.DataFrame, columns: int = 3, chance: float | None = None) -> go.Figure:
    """Accuracy under perturbation per DivergenceRadius quantile bin, one panel per corruption,
    one line per model, with the fitted regression dashed (``data.link_bins_frame`` /
    ``data.link_summary_frame``, the report's ``stability_link``). Accuracies in %."""
    if bins.empty:
        return _empty("accuracy vs DivergenceRadius", "no stability link: stability was not measured on labelled images")
    names = sorted(set(bins["corruption"]))
    cols = max(1, min(columns, len(names)))
    rows = math.ceil(len(names) / cols)
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=names, shared_yaxes=True, horizontal_spacing=0.05,
                        vertical_spacing=min(0.3 / max(rows - 1, 1), 0.12) if rows > 1 else 0.1)
    colors = model_colors(list(dict.fromkeys(bins["model"])))
    for i, name in enumerate(names):
        r, c = divmod(i, cols)
        for m, part in bins[bins["corruption"] == name].groupby("model", sort=False):
            part = part.sort_values("mean_radius")
            ys = (100.0 * part["accuracy"]).tolist()
            ivs = [bin_interval(float(a), int(n)) for a, n in zip(part["accuracy"], part["count"], strict=True)]
            fig.add_trace(go.Scatter(
                x=part["mean_radius"].tolist(), y=ys, mode="lines+markers", name=m,
                error_y=_error_bars([None if v is None else v[0] for v in ivs], [None if v is None else v[1] for v in ivs], ys),
                legendgroup=m, showlegend=i == 0, line={"color": colors[m]}, customdata=part["count"].tolist(),
                hovertemplate=f"{m}<br>{name}<br>mean radius %{{x:.4f}}<br>accuracy %{{y:.1f}}% of %{{customdata}} images<extra></extra>",
            ), row=r + 1, col=c + 1)
            fit = bin_fit(part)
            if fit is not None:
                slope, icpt = fit
                x0, x1 = float(part["mean_radius"].min()), float(part["mean_radius"].max())
                fig.add_trace(go.Scatter(
                    x=[x0, x1], y=[icpt + slope * x0, icpt + slope * x1], mode="lines",
                    name=f"{m} fit", legendgroup=m, showlegend=False, line={"color": colors[m], "dash": "dash"},
                    hovertemplate=f"{m}: least-squares line of the plotted points, slope {slope:.1f} % per unit radius"
                                  "<extra></extra>",
                ), row=r + 1, col=c + 1)
    if chance:
        fig.add_hline(y=100.0 * chance, line_dash="dot", line_color="#777", row="all", col="all",
                      annotation_text=f"chance ({100 * chance:.0f} %)", annotation_position="bottom right")
    # a short axis title under each panel of the bottom row (a long one overprinted its neighbours); the full
    # meaning is in the figure's title
    for c in range(cols):  # the lowest panel of each column
        last = max(i for i in range(len(names)) if i % cols == c)
        fig.update_xaxes(title_text="radius R_dr", row=last // cols + 1, col=c + 1)
    fig.update_yaxes(title_text="accuracy (%)", col=1, range=[0, 100])
    _panel_titles(fig, names)
    # short lines: a Plotly title never wraps, and one line ran past the chart at 1,024 and 1,400 px
    fig.update_layout(title="accuracy under perturbation vs DivergenceRadius R_dr<br><sup>R_dr: the distance between "
                            "normalised embeddings; images in quantile bins</sup><br><sup>bars: 95 % intervals; dashed: "
                            "least-squares line of the plotted bins</sup>", height=280 * rows + 110, margin={"t": 120},
                      legend={"title": {"text": "model"}}, showlegend=True)
    return fig


def metric_heatmap(matrix: pd.DataFrame, label: str, lower_is_better: bool, percent: bool = False,
                   runs_per_column: dict[str, int] | None = None, x_title: str = "domain",
                   center: float | None = None, bounds: tuple[pd.DataFrame, pd.DataFrame] | None = None) -> go.Figure:
    """Models (rows) × columns (domains or families): one value per cell, the better end green.

    A missing value (model not evaluated there, or undefined) stays blank, never 0. ``center``
    (1.0 for a ratio to the baseline) is the neutral colour: the baseline itself is neither red nor green.
    ``bounds``: (low, high) matrices shaped like ``matrix``, each value's 95 % interval (NaN: none), written
    in each cell as "value (low–high)" and in its hover.
    """
    if matrix.empty or matrix.notna().sum().sum() == 0:
        return _empty(f"{label} per model and {x_title}", f"{label} is not available for the chosen runs")
    scale = 100.0 if percent else 1.0
    z = matrix.to_numpy(dtype=float) * scale
    digits = 1 if percent else 3
    low, high = ((b.reindex(index=matrix.index, columns=matrix.columns).to_numpy(dtype=float) * scale for b in bounds)
                 if bounds is not None else (np.full_like(z, np.nan), np.full_like(z, np.nan)))
    # each value with its interval's two ends (``interval_text``, as every table writes them), on the unscaled numbers
    ends = [[None if np.isnan(lo) or np.isnan(hi) else (lo / scale, hi / scale) for lo, hi in zip(lrow, hrow, strict=True)]
            for lrow, hrow in zip(low, high, strict=True)]
    text = [["" if np.isnan(v) else interval_text(v / scale, iv, percent, unit=False)
             for v, iv in zip(row, ivrow, strict=True)] for row, ivrow in zip(z, ends, strict=True)]
    unit = " %" if percent else ""
    # the hover follows the value it states: only the interval's ends (low–high)
    hover = [["" if np.isnan(lo) else f" (95 % interval {lo:.{digits}f}–{hi:.{digits}f}{unit})"
              for lo, hi in zip(lrow, hrow, strict=True)] for lrow, hrow in zip(low, high, strict=True)]
    runs = runs_per_column or {}
    suffix = [f" ({runs[c]} runs)" if runs.get(c, 1) > 1 else "" for c in matrix.columns]
    full = [f"{c}{n}" for c, n in zip(matrix.columns, suffix, strict=True)]
    # a long domain text was cut at the figure's edge: each column's label shortened (kept apart from its
    # neighbours, its run count whole), the full text in the cell's hover
    x = _unique([short_label(str(c), COLUMN_LABEL_CHARS) + n for c, n in zip(matrix.columns, suffix, strict=True)])
    fig = go.Figure(go.Heatmap(
        z=[[None if np.isnan(v) else float(v) for v in row] for row in z], x=x, y=list(matrix.index), text=text,
        customdata=[[[h, name] for h, name in zip(row, full, strict=True)] for row in hover], texttemplate="%{text}",
        colorscale="RdYlGn_r" if lower_is_better else "RdYlGn", zmid=center,
        # few ticks, the title beside the bar: on a short figure (two models) its default ticks overprinted each other
        colorbar={"title": {"text": label + unit, "side": "right"}, "nticks": 5, "thickness": 14},
        hovertemplate="%{y}<br>%{customdata[1]}<br>" + label + f" %{{z:.{digits}f}}{unit}%{{customdata[0]}}<extra></extra>",
    ))
    fig.update_layout(title=f"{label} per model and {x_title} ({'lower' if lower_is_better else 'higher'} is better)"
                            + ("; value (95 % interval)" if bounds is not None and not np.isnan(low).all() else ""),
                      xaxis_title=x_title, yaxis_title="model",
                      xaxis={"automargin": True, "tickangle": -30 if len(x) > 3 else 0},
                      yaxis={"autorange": "reversed", "automargin": True},
                      height=max(360, 200 + 36 * len(matrix.index)))
    return fig


def _unique(labels: list[str]) -> list[str]:
    """Labels made distinct (two shortened alike get " (2)", …): a heatmap merges equal column labels."""
    seen: dict[str, int] = {}
    out = []
    for label in labels:
        seen[label] = seen.get(label, 0) + 1
        out.append(label if seen[label] == 1 else f"{label} ({seen[label]})")
    return out


def rank_change(ranking: pd.DataFrame, groups: Mapping[str, str] | None = None) -> go.Figure:
    """Slope chart: each model's rank on clean images (left) and under corruption (right); with the ranking's
    ``clean rank low/high`` and ``corrupted rank low/high`` columns, each rank's 95 % interval as an error bar.
    ``groups``: model -> its tied-group letters (``metrics.letters``), written beside its corrupted rank and its
    name, so ranks the data cannot tell apart are read as one group, not as an order."""
    data = ranking.dropna(subset=["clean rank", "corrupted rank"]) if len(ranking) else ranking
    if len(data) == 0:
        return _empty("rank change clean → corrupted", "no model has both accuracies")
    colors = model_colors(list(ranking["model"]))
    bounded = all(f"{side} rank {end}" in data.columns for side in ("clean", "corrupted") for end in ("low", "high"))
    fig = go.Figure()
    for _, row in data.iterrows():
        m, ranks = row["model"], [int(row["clean rank"]), int(row["corrupted rank"])]
        ivs = [(row[f"{side} rank low"], row[f"{side} rank high"]) if bounded else (np.nan, np.nan)
               for side in ("clean", "corrupted")]
        ivs = [None if np.isnan(lo) else (float(lo), float(hi)) for lo, hi in ivs]
        err = _error_bars([None if iv is None else iv[0] for iv in ivs], [None if iv is None else iv[1] for iv in ivs],
                          ranks, scale=1.0)
        letters = (groups or {}).get(m, "")
        fig.add_trace(go.Scatter(x=[0, 1], y=ranks, mode="lines+markers+text",
                                 name=f"{m} ({letters})" if letters else m,
                                 text=[f"{ranks[0]}", f"{ranks[1]} {letters}" if letters else f"{ranks[1]}"],
                                 textposition=["middle left", "middle right"],
                                 line={"color": colors[m]}, error_y=err,
                                 customdata=["" if iv is None else f" (95 % interval {iv[0]:.0f}–{iv[1]:.0f})"
                                             for iv in ivs],
                                 hovertemplate=f"{m}<br>rank %{{y}}%{{customdata}}<extra></extra>"))
    # numeric x with room on both sides, so the rank labels are never cut; the model names are in the legend
    bars = any(t.error_y.array is not None for t in fig.data)
    title = "rank by accuracy: clean → corrupted (1 = best" + ("; bars: 95 % intervals of the rank" if bars else "")
    if groups:
        title += "; letters: tied groups, models sharing a letter are not significantly different"
    fig.update_layout(title=title + ")",
                      xaxis={"tickvals": [0, 1], "ticktext": ["clean", "corrupted"], "range": [-0.3, 1.3],
                             "title": "accuracy on"},
                      yaxis={"autorange": "reversed", "dtick": 1, "title": "rank (1 = best)"},
                      height=max(300, 140 + 30 * len(data)), showlegend=True,
                      legend={"title": {"text": "model"}})
    return fig

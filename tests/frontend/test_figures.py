"""Figure builders on small hand-made reports: traces, axes and the plotted values."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

from domainbench.metrics.aggregate import CellSummary, ModelSummary, RunSummary
from domainbench.records.report import RunReport, StabilityMean, ThreatCell, Versions
from domainbench.frontend import figures


def cell(corruption: str, severity: int, accuracy: float | None, lfp: float) -> CellSummary:
    return CellSummary(corruption=corruption, severity=severity, n=10, n_unreadable=0, flips=int(lfp * 10), lfp=lfp,
                       accuracy=accuracy, confusion=None, in_common=True)


def model(name: str, labelled: bool, clean: CellSummary, cells: list[CellSummary]) -> ModelSummary:
    """Only what the figures read; the aggregates are left undefined."""
    return ModelSummary(model=name, is_baseline=name == "A", labeled=labelled, clean_accuracy=clean.accuracy,
                        clean=clean, cells=cells, mean_corrupted_accuracy=None, mce=None, rce=None, mfr=None,
                        pearson_acc_lfp=None, ce_per_corruption={}, rce_per_corruption={}, fr_per_corruption={},
                        notes=[])


def threat_cell(corruption: str, severity: int, above: int, n: int = 40) -> ThreatCell:
    """A cell with ``above`` of ``n`` images above threat 1, its verdict and interval as the report derives them."""
    from domainbench.metrics.threat import pd_safety, share_interval

    low, high = share_interval(above, n)
    return ThreatCell(corruption=corruption, severity=severity, n=n, mean_threat=0.3 + above / n, std_threat=0.1,
                      frac_unsafe_images=above / n, frac_unsafe_ci_low=low, frac_unsafe_ci_high=high,
                      max_threat=2.0, safety=pd_safety(above, n))


def summary(labelled: bool = True) -> RunReport:
    acc = (lambda v: v) if labelled else (lambda v: None)
    models = []
    for name, clean, drop in (("A", 0.9, 0.1), ("B", 0.8, 0.2)):
        cells = [cell("noise", s, acc(clean - drop * s), drop * s) for s in (1, 2, 3)]
        # B lacks blur severity 2: a missing cell must stay missing, not become 0
        cells += [cell("blur", s, acc(clean - drop), drop) for s in (1, 2) if not (name == "B" and s == 2)]
        models.append(model(name, labelled, cell("clean", 0, acc(clean), 0.0), cells))
    classification = RunSummary(baseline="A", classes=["x", "y"], run_ids=["r"], common_cells=[], dropped_cells={},
                                models=models)
    return RunReport(
        run_id="r", baseline="A", seed=0, classification=classification,
        # images above threat 1, of 40: noise 0 / 30 / 36 (safe, unsafe, unsafe), blur s2 4 (borderline)
        threat=[threat_cell(c, s, above) for c, s, above in (("noise", 1, 0), ("noise", 2, 30), ("noise", 3, 36),
                                                              ("blur", 2, 4))],
        different_class_threat=2.5,
        versions=Versions(domainbench="test"),
    )


def test_severity_lines_one_trace_per_model_and_corruption_with_clean_at_zero() -> None:
    fig = figures.severity_lines(summary())
    assert len(fig.data) == 4  # 2 models × 2 corruptions
    by = {(t.name, t.xaxis): t for t in fig.data}
    # panels are sorted by corruption name: blur is x, noise is x2
    noise_b = by[("B", "x2")]
    assert list(noise_b.x) == [0, 1, 2, 3]
    assert np.allclose(noise_b.y, [80.0, 60.0, 40.0, 20.0])
    assert list(by[("B", "x")].x) == [0, 1]  # the missing blur s2 is left out
    assert sum(bool(t.showlegend) for t in fig.data) == 2  # one legend entry per model
    assert fig.layout.xaxis.title.text == "severity"
    assert fig.layout.yaxis.title.text == "balanced accuracy (%)"
    assert [a.text for a in fig.layout.annotations][:2] == ["blur", "noise"]  # panel titles, then the unsafe band
    # a model keeps its colour in every panel
    assert by[("A", "x")].line.color == by[("A", "x2")].line.color != by[("B", "x")].line.color


def test_severity_lines_unlabelled_draws_no_accuracy_but_lfp_works() -> None:
    s = summary(labelled=False)
    acc = figures.severity_lines(s, "accuracy")
    assert len(acc.data) == 0
    assert "unlabelled" in acc.layout.annotations[0].text
    lfp = figures.severity_lines(s, "lfp")
    assert len(lfp.data) == 4
    a_noise = next(t for t in lfp.data if t.name == "A" and t.xaxis == "x2")
    assert np.allclose(a_noise.y, [0.0, 10.0, 20.0, 30.0])
    with pytest.raises(ValueError, match="metric"):
        figures.severity_lines(s, "mce")


def test_lfp_heatmap_values_and_blank_missing_cell() -> None:
    fig = figures.lfp_heatmap(summary())
    assert len(fig.data) == 1
    hm = fig.data[0]
    assert list(hm.y) == ["A", "B"]
    assert list(hm.x) == ["blur s1", "blur s2", "noise s1", "noise s2", "noise s3"]
    z = np.array(hm.z, dtype=float)
    assert np.allclose(z[0], [10, 10, 10, 20, 30])
    assert np.isnan(z[1, 1]) and np.allclose(z[1, [0, 2, 3, 4]], [20, 20, 40, 60])
    assert fig.layout.xaxis.title.text == "corruption, severity"


def test_threat_chart_plots_the_share_above_1_with_its_exact_interval_coloured_by_the_verdict() -> None:
    from scipy.stats import binomtest

    fig = figures.threat_chart(summary())
    assert [t.name for t in fig.data] == ["safe", "borderline", "unsafe"]
    safe, borderline, unsafe = fig.data
    assert list(safe.x) == ["noise s1"] and np.allclose(safe.y, [0.0])
    assert list(borderline.x) == ["blur s2"] and np.allclose(borderline.y, [10.0])
    assert list(unsafe.x) == ["noise s2", "noise s3"] and np.allclose(unsafe.y, [75.0, 90.0])
    assert (safe.marker.color, borderline.marker.color, unsafe.marker.color) == (
        figures.SAFE_COLOR, figures.BORDERLINE_COLOR, figures.UNSAFE_COLOR)
    # the error bars are the Clopper–Pearson 95 % interval (scipy's exact binomial interval)
    for bar, counts in ((safe, [0]), (borderline, [4]), (unsafe, [30, 36])):
        for i, k in enumerate(counts):
            ref = binomtest(k, 40).proportion_ci(0.95, method="exact")
            assert bar.y[i] + bar.error_y.array[i] == pytest.approx(100 * ref.high)
            assert bar.y[i] - bar.error_y.arrayminus[i] == pytest.approx(100 * ref.low, abs=1e-9)
    assert [s.y0 for s in fig.layout.shapes] == [10.0]  # the cut
    assert fig.layout.yaxis.title.text == "images with PD threat above 1 (%)"


def test_threat_chart_without_threat_is_an_explained_empty_figure() -> None:
    fig = figures.threat_chart(summary().model_copy(update={"threat": []}))
    assert len(fig.data) == 0 and "not measured" in fig.layout.annotations[0].text


def stab_frame() -> pd.DataFrame:
    rows = [{"model": m, "corruption": c, "divergence_radius": v, "cosine": v * v, "euclidean": v}
            for m, base in (("A", 0.1), ("B", 0.3)) for c in ("blur", "noise") for v in (base, base + 0.1)]
    return pd.DataFrame(rows)


@pytest.mark.parametrize("kind,cls", [("box", go.Box), ("violin", go.Violin)])
def test_stability_distribution_one_trace_per_model(kind: str, cls: type) -> None:
    frame = stab_frame()
    fig = figures.stability_distribution(frame, "cosine", kind)
    assert [type(t) for t in fig.data] == [cls, cls]
    b = fig.data[1]
    assert b.name == "B"
    assert list(b.x) == ["blur", "blur", "noise", "noise"]
    assert np.allclose(b.y, frame[frame.model == "B"]["cosine"])
    assert fig.layout.yaxis.title.text == "cosine radius R_cs ((1 − cosine) / 2)"  # with its unit
    with pytest.raises(ValueError, match="metric"):
        figures.stability_distribution(frame, "accuracy")
    with pytest.raises(ValueError, match="kind"):
        figures.stability_distribution(frame, "cosine", "strip")


def test_stability_means_grouped_bars_equal_frame_means() -> None:
    frame = stab_frame()
    rows = frame.groupby(["model", "corruption"], as_index=False)["divergence_radius"].mean().to_dict("records")
    means = [StabilityMean(n_images=2, cosine=None, euclidean=None, **r) for r in rows]
    fig = figures.stability_means(means)
    assert fig.layout.barmode == "group" and len(fig.data) == 2
    assert np.allclose(fig.data[0].y, [0.15, 0.15]) and np.allclose(fig.data[1].y, [0.35, 0.35])
    assert fig.layout.xaxis.title.text == "corruption"
    with pytest.raises(ValueError, match="metric"):
        figures.stability_means(means, "accuracy")


def test_confusion_heatmap_counts_and_row_shares() -> None:
    cm = [[3, 1], [0, 4]]
    fig = figures.confusion_heatmap(cm, ["cat", "dog"])
    assert np.array_equal(np.array(fig.data[0].z), cm)
    assert fig.layout.xaxis.title.text == "predicted class" and fig.layout.yaxis.title.text == "true class"
    norm = np.array(figures.confusion_heatmap(cm, ["cat", "dog"], normalize=True).data[0].z)
    assert np.allclose(norm, [[0.75, 0.25], [0.0, 1.0]])
    assert np.allclose(norm.sum(axis=1), 1.0)
    with pytest.raises(ValueError, match="classes"):
        figures.confusion_heatmap(cm, ["cat"])


def test_compare_bars_group_models_by_domain() -> None:
    frame = pd.DataFrame([
        {"domain": "night", "model": "A", "mce": 1.0, "acc": 0.9},
        {"domain": "night", "model": "B", "mce": 1.4, "acc": 0.7},
        {"domain": "xray", "model": "A", "mce": 1.0, "acc": 0.8},
        {"domain": "xray", "model": "B", "mce": None, "acc": 0.6},
    ])
    fig = figures.compare_bars(frame, "mce", "mCE")
    assert fig.layout.barmode == "group" and [t.name for t in fig.data] == ["A", "B"]
    assert list(fig.data[1].x) == ["night"] and np.allclose(fig.data[1].y, [1.4])  # undefined mCE left out
    assert fig.layout.yaxis.title.text == "mCE"
    acc = figures.compare_bars(frame, "acc", "clean accuracy")
    assert np.allclose(acc.data[0].y, [90.0, 80.0]) and acc.layout.yaxis.title.text == "clean accuracy (%)"


def test_selection_heatmap_percentages_and_highlight() -> None:
    freq = pd.DataFrame({"night": [1.0, 0.3], "xray": [0.5, 0.0]}, index=["noise", "rain"])
    fig = figures.selection_heatmap(freq, highlight="xray")
    hm = fig.data[0]
    assert list(hm.x) == ["night", "xray"] and list(hm.y) == ["noise", "rain"]
    assert np.allclose(hm.z, [[100, 50], [30, 0]])
    assert len(fig.layout.shapes) == 1 and fig.layout.shapes[0].x0 == 0.5
    assert len(figures.selection_heatmap(pd.DataFrame()).data) == 0


def test_severity_lines_shade_the_unsafe_severities_of_each_corruption() -> None:
    fig = figures.severity_lines(summary())
    # noise s2 and s3 are unsafe: one red band over them, in the noise panel; blur s2 borderline: an amber one
    bands = [s for s in fig.layout.shapes if s.type == "rect"]
    assert len(bands) == 2
    red = next(b for b in bands if b.fillcolor == figures.UNSAFE_COLOR)
    amber = next(b for b in bands if b.fillcolor == figures.BORDERLINE_COLOR)
    assert (red.x0, red.x1) == (1.5, 3.5) and red.xref == "x2" and red.fillcolor == figures.UNSAFE_COLOR
    assert (amber.x0, amber.x1) == (1.5, 2.5) and amber.xref == "x" and amber.fillcolor == figures.BORDERLINE_COLOR
    assert figures.unsafe_severities(summary(), "noise") == [2, 3]
    assert figures.unsafe_severities(summary(), "blur") == []
    assert figures.unsafe_severities(summary(), "blur", "borderline") == [2]
    assert {"PD-unsafe", "PD-borderline"} <= {a.text for a in fig.layout.annotations}
    no_threat = figures.severity_lines(summary().model_copy(update={"threat": []}))
    assert not [s for s in no_threat.layout.shapes if s.type == "rect"]


def per_corruption() -> pd.DataFrame:
    return pd.DataFrame([
        {"model": "A", "corruption": "noise", "ce": 1.0, "rce": 1.0, "fr": 1.0, "accuracy": 0.7},
        {"model": "A", "corruption": "blur", "ce": 1.0, "rce": None, "fr": 1.0, "accuracy": 0.8},
        {"model": "B", "corruption": "noise", "ce": 1.5, "rce": 2.0, "fr": 1.25, "accuracy": 0.4},
        {"model": "B", "corruption": "blur", "ce": 0.5, "rce": None, "fr": 0.75, "accuracy": 0.65},
    ])


def test_per_corruption_bars_one_bar_per_model_and_corruption() -> None:
    fig = figures.per_corruption_bars(per_corruption(), "ce", "CE")
    assert [t.name for t in fig.data] == ["A", "B"] and fig.layout.barmode == "group"
    assert list(fig.data[1].x) == ["noise", "blur"] and np.allclose(fig.data[1].y, [1.5, 0.5])
    assert [s.y0 for s in fig.layout.shapes] == [1.0]  # the baseline line
    rce = figures.per_corruption_bars(per_corruption(), "rce", "rCE")
    assert list(rce.data[1].x) == ["noise"] and np.allclose(rce.data[1].y, [2.0])  # undefined rCE left out
    acc = figures.per_corruption_bars(per_corruption(), "accuracy", "accuracy")
    assert np.allclose(acc.data[0].y, [70.0, 80.0]) and acc.layout.yaxis.title.text == "accuracy (%)"
    assert not acc.layout.shapes
    with pytest.raises(ValueError, match="metric"):
        figures.per_corruption_bars(per_corruption(), "mce")
    empty = figures.per_corruption_bars(per_corruption().assign(rce=None), "rce", "rCE")
    assert len(empty.data) == 0 and "not defined" in empty.layout.annotations[0].text


def test_accuracy_vs_radius_bins_and_the_fitted_line() -> None:
    bins = pd.DataFrame([
        {"model": m, "corruption": "noise", "bin": i, "bin_lo": lo, "bin_hi": lo + 0.1, "mean_radius": lo + 0.05,
         "accuracy": acc, "count": 4}
        for m, accs in (("A", (0.9, 0.5)), ("B", (0.8, 0.2))) for i, (lo, acc) in enumerate(zip((0.0, 0.1), accs))
    ])
    summary_frame = pd.DataFrame([{"model": "A", "corruption": "noise", "slope": -4.0, "intercept": 1.0},
                                  {"model": "B", "corruption": "noise", "slope": None, "intercept": None}])
    fig = figures.accuracy_vs_radius(bins, summary_frame)
    # every model's line is fitted on its plotted points (not the report's held-out regression)
    assert [t.name for t in fig.data] == ["A", "A fit", "B", "B fit"]
    a, fit, _, fit_b = fig.data
    assert np.allclose(a.x, [0.05, 0.15]) and np.allclose(a.y, [90.0, 50.0])
    assert np.allclose(fit.x, [0.05, 0.15]) and np.allclose(fit.y, [90.0, 50.0]) and fit.line.dash == "dash"
    assert np.allclose(fit_b.y, [80.0, 20.0])
    # the axis is named briefly (a panel's width), what the radius is in the title
    assert fig.layout.xaxis.title.text == "radius R_dr" and "R_dr: the distance between normalised embeddings" in fig.layout.title.text
    empty = figures.accuracy_vs_radius(bins.iloc[0:0], summary_frame)
    assert len(empty.data) == 0 and "stability" in empty.layout.annotations[0].text


def test_metric_heatmap_values_blanks_and_direction() -> None:
    matrix = pd.DataFrame({"night": [0.9, 0.7], "xray": [0.8, float("nan")]}, index=["A", "B"])
    fig = figures.metric_heatmap(matrix, "clean accuracy", lower_is_better=False, percent=True,
                                 runs_per_column={"night": 3, "xray": 1})
    hm = fig.data[0]
    assert list(hm.x) == ["night (3 runs)", "xray"] and list(hm.y) == ["A", "B"]
    assert np.allclose(hm.z[0], [90.0, 80.0]) and hm.z[1][0] == pytest.approx(70.0) and hm.z[1][1] is None
    assert hm.text[1][1] == "" and hm.text[0][0] == "90.0"
    assert "higher is better" in fig.layout.title.text
    low = figures.metric_heatmap(matrix, "mCE", lower_is_better=True)
    assert "lower is better" in low.layout.title.text and np.allclose(low.data[0].z[0], [0.9, 0.8])
    assert len(figures.metric_heatmap(pd.DataFrame(), "mCE", True).data) == 0


def test_rank_change_slope_per_model() -> None:
    ranking = pd.DataFrame({"model": ["A", "B", "C"], "clean rank": [1, 2, 3], "corrupted rank": [3, 1, 2]})
    fig = figures.rank_change(ranking)
    assert [t.name for t in fig.data] == ["A", "B", "C"]
    assert list(fig.data[0].x) == [0, 1] and list(fig.data[0].y) == [1, 3]
    assert list(fig.layout.xaxis.ticktext) == ["clean", "corrupted"]
    assert fig.layout.yaxis.autorange == "reversed"  # rank 1 on top
    # a legend names the models, and the axis leaves room left and right for the rank labels (never cut)
    assert fig.layout.showlegend is True and fig.layout.legend.title.text == "model"
    assert fig.layout.xaxis.range[0] < 0 and fig.layout.xaxis.range[1] > 1


def test_metric_heatmap_writes_each_interval_in_its_cell_and_hover() -> None:
    matrix = pd.DataFrame({"night": [0.9, 0.7], "xray": [0.8, float("nan")]}, index=["A", "B"])
    low = pd.DataFrame({"night": [0.87, float("nan")], "xray": [0.75, float("nan")]}, index=["A", "B"])
    high = pd.DataFrame({"night": [0.92, float("nan")], "xray": [0.84, float("nan")]}, index=["A", "B"])
    hm = figures.metric_heatmap(matrix, "clean accuracy", False, percent=True, bounds=(low, high)).data[0]
    assert list(hm.text[0]) == ["90.0 (87.0–92.0)", "80.0 (75.0–84.0)"] and list(hm.text[1]) == ["70.0", ""]
    # the hover: the column's full label, then the interval
    assert list(hm.customdata[0][0]) == [" (95 % interval 87.0–92.0 %)", "night"] and hm.customdata[1][0][0] == ""
    assert "%{customdata[0]}" in hm.hovertemplate and "%{customdata[1]}" in hm.hovertemplate
    ratio = figures.metric_heatmap(matrix, "mCE", True, bounds=(low, high)).data[0]
    assert ratio.text[0][0] == "0.900 (0.870–0.920)" and ratio.customdata[0][0][0] == " (95 % interval 0.870–0.920)"


def test_rank_change_draws_each_ranks_interval_as_an_error_bar() -> None:
    ranking = pd.DataFrame({"model": ["A", "B"], "clean rank": [1, 2], "corrupted rank": [2, 1],
                            "clean rank low": [1.0, 1.0], "clean rank high": [2.0, 2.0],
                            "corrupted rank low": [1.0, float("nan")], "corrupted rank high": [2.0, float("nan")]})
    fig = figures.rank_change(ranking)
    a, b = fig.data
    assert list(a.error_y.array) == [1.0, 0.0] and list(a.error_y.arrayminus) == [0.0, 1.0]
    assert list(b.error_y.arrayminus) == [1.0, 0.0] and a.customdata[0] == " (95 % interval 1–2)" and b.customdata[1] == ""
    assert "95 % intervals of the rank" in fig.layout.title.text
    plain = figures.rank_change(ranking[["model", "clean rank", "corrupted rank"]])
    assert plain.data[0].error_y.array is None and "intervals" not in plain.layout.title.text


def test_radius_fit_is_the_least_squares_line_of_the_plotted_points() -> None:
    import numpy as np
    import pandas as pd

    from domainbench.frontend.figures import accuracy_vs_radius, bin_fit

    bins = pd.DataFrame({"model": ["m"] * 4, "corruption": ["fog"] * 4, "bin": range(4),
                         "bin_lo": [0.0, 0.1, 0.2, 0.3], "bin_hi": [0.1, 0.2, 0.3, 0.4],
                         "mean_radius": [0.05, 0.16, 0.24, 0.37], "accuracy": [0.95, 0.88, 0.90, 0.61],
                         "count": [16, 16, 16, 16]})
    # a held-out regression far from these points must not be what is drawn
    summary = pd.DataFrame({"model": ["m"], "corruption": ["fog"], "slope": [-1.611], "intercept": [1.029]})
    slope, icpt = np.polyfit(bins["mean_radius"], 100 * bins["accuracy"], 1)
    assert bin_fit(bins) == pytest.approx((slope, icpt))
    fig = accuracy_vs_radius(bins, summary)
    line = next(t for t in fig.data if t.name == "m fit")
    xs = np.array(line.x)
    assert np.allclose(line.y, icpt + slope * xs)
    assert xs.min() == 0.05 and xs.max() == 0.37  # spans the plotted points, nothing beyond
    # the line passes through the points' centroid, as a least-squares line does
    mid = bins["mean_radius"].mean()
    assert icpt + slope * mid == pytest.approx(100 * bins["accuracy"].mean())
    assert bin_fit(bins.iloc[:1]) is None


def test_every_figure_reads_the_report_s_one_pd_verdict() -> None:
    # the defect: the accuracy tab shaded a cell "unsafe" that the PD-threat tab called "borderline"
    report = summary()
    for t in report.threat:
        assert figures.threat_class(t) == t.safety
    chart = {x: trace.name for trace in figures.threat_chart(report).data for x in trace.x}
    shaded = {f"{c} s{s}": kind for kind in ("unsafe", "borderline") for c in ("noise", "blur")
              for s in figures.unsafe_severities(report, c, kind)}
    assert shaded == {k: v for k, v in chart.items() if v != "safe"}


def test_accuracy_plot_has_a_chance_line_and_the_full_percent_range() -> None:
    report = summary()
    fig = figures.severity_lines(report, "accuracy")
    chance = [s for s in fig.layout.shapes if s.type == "line" and s.line.dash == "dot"]
    assert chance and all(s.y0 == s.y1 == pytest.approx(100 / len(report.classification.classes)) for s in chance)
    assert tuple(fig.layout.yaxis.range) == (0, 100)
    assert not [s for s in figures.severity_lines(report, "lfp").layout.shapes if s.type == "line"]

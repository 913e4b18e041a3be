"""Issue 37's run-page charts (defect 9 and Deliver item 5): a label-flip heatmap with more columns than read at
1,400 px becomes a sortable table, the stability means carry bootstrap intervals, the Damage & calibration chart
reads (one line per model, a panel per corruption, error bars, a chance line), and every accuracy chart has its
intervals and its chance line."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from test_app import run_page
from test_damage_calibration_ui import values

import fe_synthetic as syn
from domainbench.frontend import data, figures
from domainbench.query import report as report_of
from domainbench.store import Store

#: three corruptions at five severities: 15 cells, more than the heatmap draws readably
MANY = {"gaussian_noise": [1, 2, 3, 4, 5], "brightness": [1, 2, 3, 4, 5], "contrast": [1, 2, 3, 4, 5]}


def specs(at) -> list[dict]:  # noqa: ANN001 - an AppTest
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def test_9_a_flip_heatmap_of_many_cells_becomes_a_sortable_table_of_the_flip_rates(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(syn, "CORRUPTIONS", MANY)
    syn.populate(store, run_id="r-many", per_image=True)
    at = run_page("r-many", "Label flips")
    assert not any(t["type"] == "heatmap" for s in specs(at) for t in s["data"]), "15 columns drawn as a heatmap"
    assert len(MANY) * 5 > figures.LFP_HEATMAP_MAX_COLUMNS
    table = next(d for d in at.dataframe if "embedded:good LFP %" in d.value.columns)
    frame = table.value
    assert len(frame) == 15 and list(table.proto.column_order)[:2] == ["corruption", "severity"]
    report = report_of(store, "r-many")
    for m in report.model_names:
        for _, row in frame.iterrows():
            cell = report.cell(m, row["corruption"], int(row["severity"]))
            # the numbers as a number (the table sorts by them), equal to the report's
            assert row[f"{m} LFP %"] == pytest.approx(100 * cell.lfp)
            lo, hi = (float(x) for x in row[f"{m} 95 % CI"].split("–"))
            assert lo <= round(100 * cell.lfp, 1) <= hi and hi > lo
    assert frame["embedded:weak LFP %"].dtype.kind == "f"


def test_9_a_few_flip_cells_stay_a_heatmap(store: Store) -> None:
    syn.populate(store, run_id="r-few", per_image=True)  # 5 cells
    at = run_page("r-few", "Label flips")
    heat = [t for s in specs(at) for t in s["data"] if t["type"] == "heatmap"]
    assert len(heat) == 1 and len(heat[0]["x"]) == 5
    assert not any("embedded:good LFP %" in d.value.columns for d in at.dataframe)


def test_lfp_table_equals_the_heatmap_and_leaves_a_missing_cell_blank() -> None:
    from test_figures import summary

    report = summary()
    heat = figures.lfp_heatmap(report).data[0]
    table = figures.lfp_table(report, {("A", "noise", 2): (0.1, 0.3)})
    assert table["cell"].tolist() == list(heat.x)
    for i, m in enumerate(report.model_names):
        assert np.allclose(table[f"{m} LFP %"].to_numpy(), np.array(heat.z[i], dtype=float), equal_nan=True)
    assert table["A 95 % CI"].tolist() == ["", "", "", "10.0–30.0", ""]
    assert "A 95 % CI" not in figures.lfp_table(report).columns


def test_stability_mean_bounds_are_the_percentile_bootstrap_of_the_mean_over_images() -> None:
    from scipy.stats import bootstrap

    rng = np.random.default_rng(3)
    frame = pd.DataFrame({"model": ["A"] * 40 + ["B"] * 40 + ["A"], "corruption": ["fog"] * 80 + ["snow"],
                          "divergence_radius": np.r_[rng.gamma(2.0, 0.05, 80), 0.3]})
    bounds = data.stability_mean_bounds(frame, "divergence_radius", resamples=20_000)
    assert bounds[("A", "snow")] is None  # one image: nothing to resample
    for m in ("A", "B"):
        x = frame[(frame.model == m) & (frame.corruption == "fog")]["divergence_radius"].to_numpy()
        # an independent bootstrap (scipy's, its own random draws): the same ends up to the resampling noise
        ref = bootstrap((x,), np.mean, method="percentile", n_resamples=20_000, random_state=1).confidence_interval
        lo, hi = bounds[(m, "fog")]
        width = ref.high - ref.low
        assert lo == pytest.approx(ref.low, abs=0.03 * width) and hi == pytest.approx(ref.high, abs=0.03 * width)
        assert lo < x.mean() < hi


def test_9_the_stability_means_have_error_bars_from_the_images(store: Store) -> None:
    syn.populate(store, run_id="r-stab")
    at = run_page("r-stab", "Stability")
    means = next(s for s in specs(at) if s["layout"]["title"]["text"].startswith("average"))
    frame = data.stability_frame(store, "r-stab")
    bounds = data.stability_mean_bounds(frame, "divergence_radius")
    for trace in means["data"]:
        ys = values(trace["y"])
        plus, minus = values(trace["error_y"]["array"]), values(trace["error_y"]["arrayminus"])
        for c, y, p, mi in zip(trace["x"], ys, plus, minus, strict=True):
            part = frame[(frame.model == trace["name"]) & (frame.corruption == c)]["divergence_radius"]
            assert y == pytest.approx(part.mean())
            lo, hi = bounds[(trace["name"], c)]
            assert y + p == pytest.approx(hi) and y - mi == pytest.approx(lo) and p > 0 and mi > 0
    assert "95 % intervals" in means["layout"]["title"]["text"]


def test_9_eleven_corruptions_of_two_models_read_as_eleven_panels_and_a_two_model_legend() -> None:
    from domainbench.frontend import damage_calibration as dc

    names = [f"corruption_{i:02d}" for i in range(11)]
    rows = [{"model": m, "corruption": c, "severity": s, "ssim": 1 - 0.1 * s - 0.01 * i, "psnr_db": 20.0,
             "accuracy": 0.8 - 0.1 * s - (0.1 if m == "B" else 0), "ece": None, "nll": None}
            for m in ("A", "B") for i, c in enumerate(names) for s in (1, 3)]
    frame = pd.DataFrame(rows, columns=dc.DAMAGE_COLUMNS)
    fig = dc.accuracy_vs_damage(frame, "ssim", chance=0.1, clean={"A": 0.9, "B": 0.85})
    assert len(fig.data) == 22 and [t.name for t in fig.data if t.showlegend] == ["A", "B"]
    assert {t.line.color for t in fig.data if t.name == "A"} != {t.line.color for t in fig.data if t.name == "B"}
    assert len({t.xaxis for t in fig.data}) == 11  # a panel per corruption
    assert all(ax.range[0] == fig.layout.xaxis.range[0] for ax in (fig.layout[k] for k in fig.layout
                                                                    if k.startswith("xaxis")))  # one damage scale
    a = next(t for t in fig.data if t.name == "A" and t.meta == "corruption_00")
    assert list(a.x) == [1.0, 0.9, 0.7] and np.allclose(a.y, [90, 70, 50])  # from the clean pass, then by damage
    assert a.error_y.array is None  # no intervals given: no bars made up
    chance = [s for s in fig.layout.shapes if s.y0 == s.y1]
    assert len(chance) == 11 and all(s.y0 == pytest.approx(10.0) for s in chance)


def _chance_lines(fig) -> list[float]:  # noqa: ANN001 - a plotly figure
    return [s.y0 for s in fig.layout.shapes if s.type == "line" and s.y0 == s.y1 and s.line.dash == "dot"]


def test_deliver_5_every_accuracy_chart_has_error_bars_and_a_chance_line() -> None:
    """Each accuracy chart of figures.py (and the cost chart beside it), built with intervals and 1 / classes: its
    traces carry the intervals as error bars and a dotted line marks chance, in the chart's own units."""
    from test_figures import per_corruption, summary

    from domainbench.frontend import cost_view
    from domainbench.metrics.cost import ModelCost

    report = summary()
    third = 1 / 3
    # accuracy against severity
    sev = figures.severity_lines(report, "accuracy", bands={("A", "noise", 1): (0.5, 0.9), ("A", "clean", 0): (0.8, 0.95)})
    n = len(report.classification.classes)
    assert _chance_lines(sev) and all(y == pytest.approx(100 / n) for y in _chance_lines(sev))
    assert any(t.error_y.array is not None for t in sev.data)
    # accuracy per corruption
    frame = per_corruption().assign(accuracy_lo=lambda f: f["accuracy"] - 0.05, accuracy_hi=lambda f: f["accuracy"] + 0.1)
    per = figures.per_corruption_bars(frame, "accuracy", "accuracy", chance=third)
    assert _chance_lines(per) == [pytest.approx(100 * third)]
    assert np.allclose(per.data[0].error_y.array, [10.0, 10.0]) and np.allclose(per.data[0].error_y.arrayminus, [5.0, 5.0])
    # accuracy per model and domain (Compare's bars)
    dom = pd.DataFrame([{"domain": "night", "model": "A", "acc": 0.9, "acc_lo": 0.85, "acc_hi": 0.93},
                        {"domain": "xray", "model": "A", "acc": 0.6, "acc_lo": 0.5, "acc_hi": 0.7}])
    bars = figures.compare_bars(dom, "acc", "clean accuracy", chance=0.1)
    assert _chance_lines(bars) == [pytest.approx(10.0)] and tuple(bars.layout.yaxis.range) == (0, 100)
    assert np.allclose(bars.data[0].error_y.array, [3.0, 10.0]) and np.allclose(bars.data[0].error_y.arrayminus, [5.0, 10.0])
    # accuracy against images/s (the cost chart)
    cost = cost_view.pareto_figure([ModelCost(model="A", images=10, seconds=1.0, images_per_second=10.0,
                                              corrupted_accuracy=0.7, pareto=True)], {"A": (0.6, 0.75)}, chance=0.1)
    assert _chance_lines(cost) == [pytest.approx(10.0)]
    assert np.allclose(cost.data[0].error_y.array, [5.0]) and np.allclose(cost.data[0].error_y.arrayminus, [10.0])


def test_16_a_flips_severity_picker_offers_its_one_level(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """Defect 16: a flip's picker offered levels 2–5 beside its planned 1, though a flip's five levels are the same
    image (``CorruptionSpec.ordinal``): picking them evaluated copies of cell 1. It offers 1 alone now, a flip added
    by hand starts at 1, and its preview is one picture."""
    from test_new_domain import fake_plan, page

    from domainbench import corruptions
    from domainbench.records.config import CorruptionChoice

    assert not corruptions.get("horizontal_flip").ordinal and corruptions.get("brightness").ordinal

    def with_flip(text: str, **kw):  # noqa: ANN003, ANN202
        cfg = fake_plan(text, **kw)
        return cfg.model_copy(update={"corruptions": [*cfg.corruptions, CorruptionChoice(
            name="horizontal_flip", severities=[1], reason="mirrored selfies")]})

    monkeypatch.setattr(data, "plan_domain", with_flip)
    at = page()
    at.text_area(key="domain-text").set_value("front selfie camera, mirrored")
    next(b for b in at.button if b.label == "Plan").click().run()
    assert not at.exception
    flip = at.button_group(key="sev-horizontal_flip")
    assert [o.content for o in flip.proto.options] == ["1"] and flip.value == [1]
    assert [o.content for o in at.button_group(key="sev-brightness").proto.options] == ["1", "2", "3", "4", "5"]
    # added by hand: one level, not five copies
    at.selectbox(key="add-corruption").set_value("vertical_flip")
    next(b for b in at.button if b.label == "Add corruption").click().run()
    assert at.button_group(key="sev-vertical_flip").value == [1]
    assert [o.content for o in at.button_group(key="sev-vertical_flip").proto.options] == ["1"]
    # its preview: one picture, said to have no scale
    preview = next(m.value for m in at.markdown if "horizontal_flip" in str(m.value) and "evaluated" in str(m.value))
    assert "one level, no severity scale" in preview


def test_15_the_domains_plan_fits_1024_px_with_its_count_and_names(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """At 1,024 px the Domains table's "name (severities)" list was cut mid-name and pushed the run count off the
    table: it shows the count and the names, shortened to its column; the CSV keeps every severity."""
    from test_app import app

    from domainbench.frontend.views import runs as runs_view  # noqa: F401 - the page's constants

    eight = {n: [1, 2, 3, 4, 5] for n in ("gaussian_noise", "shot_noise", "impulse_noise", "defocus_blur",
                                         "motion_blur", "brightness", "contrast", "jpeg_compression")}
    monkeypatch.setattr(syn, "CORRUPTIONS", eight)
    syn.populate(store, run_id="r-eight")
    at = app()
    table = next(d for d in at.dataframe if "corruptions" in d.value.columns)
    shown = table.value["corruptions"].iloc[0]
    assert shown.startswith("8: gaussian_noise") and "…" in shown and shown.endswith("jpeg_compression"[-8:])
    assert len(shown) <= 3 + 26  # about 205 px: the column's width at 1,024 px
    assert table.value["corruptions (severities)"].iloc[0].startswith("gaussian_noise (1,2,3,4,5), shot_noise")
    assert list(table.proto.column_order)[:2] == ["domain", "runs"]  # the count of runs before the long text


def _walk(node):  # noqa: ANN001, ANN202 - an AppTest node: it and its children in the page's order
    yield node
    for child in getattr(node, "children", {}).values():
        yield from _walk(child)


def test_the_run_pages_header_is_one_row_and_the_settings_fold_under_the_summary(store: Store) -> None:
    """At 1,400 x 900 the page title, a full-width baseline selector and the Delete button on rows of their own, and
    the settings' expander, pushed the summary below the first screen (the browser test measures it)."""
    syn.populate(store, run_id="r-head")
    at = run_page("r-head")
    assert not at.title, [t.value for t in at.title]  # the run's own heading names it (the sidebar, the page)
    # the way back, the baseline and the actions share the first row
    row = [getattr(e, "label", None) for e in _walk(at.main.children[0])]
    assert ["All runs", "baseline for mCE / rCE / mFR", "Delete…"] == [x for x in row if x], row
    assert at.selectbox(key="baseline-r-head").proto.help.startswith("The model the ratios are relative to")
    # nothing lost: the settings are there, after the summary table
    order = list(_walk(at.main))
    summary = next(i for i, e in enumerate(order) if type(e).__name__ == "Dataframe" and "mCE" in e.value.columns)
    settings = next(i for i, e in enumerate(order) if getattr(e, "label", "") == "corruptions of this domain and run "
                                                                                   "configuration")
    assert summary < settings

"""One unit per quantity and an interval beside every rate (issue 27, items 1, 2, 4, 5, 8): no "None" in any
table, rates in %, ratios said to be ratios, error bars from the statistics' own intervals, a chance line
where accuracy is drawn, progress in units, a readable configuration table, cards that are not cut."""

from __future__ import annotations

import json
from pathlib import Path

import fe_synthetic as syn
import numpy as np
import pandas as pd
import pytest
from test_app import DONE, LIVE, app, run_page, texts

from domainbench import query
from domainbench.frontend import data, figures, progress, verdict
from domainbench.frontend.exports import MISSING
from domainbench.frontend.views.runs import card_value
from domainbench.metrics.registry import metric
from domainbench.stats import percentile_interval
from tests.oracles.score_interval import wilson_cc_by_root
from domainbench.store import Store


def spec(chart) -> dict:  # noqa: ANN001 - an AppTest plotly element
    return json.loads(chart.proto.spec)


def test_no_table_shows_none_for_an_undefined_value(store: Store) -> None:
    syn.populate(store, run_id="r-unlabelled", labelled=False)
    at = run_page("r-unlabelled")
    summary = next(d for d in at.dataframe if "mCE" in d.value.columns)
    assert summary.value["clean acc %"].isna().all()  # undefined, not 0 ...
    # ... and every table draws an undefined value as the caption's mark, not Streamlit's default "None"
    assert at.dataframe and all(d.proto.placeholder == MISSING for d in at.dataframe)
    assert f"{MISSING} = not applicable" in texts(at.caption)
    for tab in ("Per corruption", "Accuracy vs radius", "Export"):
        assert all(d.proto.placeholder == MISSING for d in run_page("r-unlabelled", tab).dataframe), tab
    assert verdict.pm(None, None, True) == MISSING


def test_per_corruption_accuracy_is_a_percentage_with_its_interval(real_store: Store, real_run: tuple[Path, str]) -> None:
    run_id = real_run[1]
    at = run_page(run_id, "Per corruption")
    table = next(d for d in at.dataframe if "rCE" in d.value.columns and "corruption" in d.value.columns)
    shown = table.value.set_index(["model", "corruption"])
    assert "accuracy" not in shown.columns and "accuracy %" in shown.columns
    report = real_store.get_report(run_id)
    draws = query.run_draws(real_store, report)  # the run's numbers under each resample of its intervals
    for m in report.models:
        for name in report.corruption_names():
            cells = [c for c in m.cells if c.corruption == name]
            acc = np.mean([c.accuracy for c in cells])
            assert shown.loc[(m.model, name), "accuracy %"] == pytest.approx(100 * acc)
            # the ends of the percentile interval of the severities' mean, resample by resample
            iv = percentile_interval(draws.corruptions[m.model][name]["accuracy"])
            assert shown.loc[(m.model, name), "accuracy (95 % CI)"] == verdict.pm(acc, iv, True)
            assert shown.loc[(m.model, name), "accuracy (95 % CI)"] == f"{100 * acc:.1f} % ({100 * iv[0]:.1f}–{100 * iv[1]:.1f})"
            # and every ratio with its own interval, under the same resamples
            # (under the names every other table gives them: CE, rCE, FR)
            for ratio, head, value in (("ce", "CE", m.ce_per_corruption), ("rce", "rCE", m.rce_per_corruption),
                                       ("fr", "FR", m.fr_per_corruption)):
                if value.get(name) is None:
                    assert shown.loc[(m.model, name), f"{head} (95 % CI)"] == MISSING
                else:
                    iv = percentile_interval(draws.corruptions[m.model][name][ratio])
                    assert shown.loc[(m.model, name), f"{head} (95 % CI)"] == verdict.pm(value[name], iv, False)
    config = json.loads(table.proto.columns)
    # the registry's help on the per-corruption ratio, which says it is a ratio and that lower is better
    assert config["CE"]["help"] == metric("ce_per_corruption").help
    assert "ratio to the baseline" in config["CE"]["help"] and config["CE"]["help"].endswith("Lower is better.")
    assert config["rCE (95 % CI)"]["help"].startswith(metric("rce_per_corruption").help)
    # each value is shown once: with its interval
    order = list(table.proto.column_order)
    assert {"accuracy (95 % CI)", "CE (95 % CI)", "rCE (95 % CI)", "FR (95 % CI)"} <= set(order)
    assert not {"accuracy %", "CE", "rCE", "FR", "ce", "rce", "fr"} & set(order)


def test_per_corruption_chart_draws_each_metrics_interval(real_store: Store, real_run: tuple[Path, str]) -> None:
    run_id = real_run[1]
    report = real_store.get_report(run_id)
    draws = query.run_draws(real_store, report)
    for label, key in (("CE", "ce"), ("FR", "fr")):
        at = run_page(run_id, "Per corruption")
        at.radio(key=f"percorr-{run_id}").set_value(key).run()
        fig = spec(at.get("plotly_chart")[0])
        checked = 0
        for trace in fig["data"]:
            m = report.model(trace["name"])
            for x, y, up, down in zip(trace["x"], trace["y"], trace["error_y"]["array"], trace["error_y"]["arrayminus"],
                                      strict=True):
                lo, hi = percentile_interval(draws.corruptions[m.model][x][key])
                assert (y + up, y - down) == pytest.approx((hi, lo)), (label, m.model, x)
                checked += 1
        assert checked, label


def test_accuracy_chart_has_the_cells_intervals_and_a_chance_line(real_store: Store, real_run: tuple[Path, str]) -> None:
    run_id = real_run[1]
    fig = spec(run_page(run_id).get("plotly_chart")[0])
    report = real_store.get_report(run_id)
    ri = query.intervals(real_store, report)
    first = report.corruption_names()[0]
    for trace in (t for t in fig["data"] if t.get("showlegend") is not False):
        model = trace["name"]
        for x, y, up, down in zip(trace["x"], trace["y"], trace["error_y"]["array"], trace["error_y"]["arrayminus"],
                                  strict=True):
            lo, hi = ri.cell(model, first if x else "clean", x).balanced_accuracy
            assert (y + up, y - down) == pytest.approx((100 * hi, 100 * lo))
    shapes = fig["layout"]["shapes"]
    chance = 100 / len(report.classification.classes)
    assert any(s.get("y0") == pytest.approx(chance) and s.get("line", {}).get("dash") == "dot" for s in shapes)
    assert all(fig["layout"][k]["range"] == [0, 100] for k in fig["layout"] if k.startswith("yaxis"))


def test_error_bars_are_the_intervals_around_the_values() -> None:
    err = figures._error_bars([0.5, None], [0.7, None], [60.0, 80.0])
    assert err["array"] == pytest.approx([10.0, 0.0]) and err["arrayminus"] == pytest.approx([10.0, 0.0])
    assert figures._error_bars([None], [None], [1.0]) is None
    # a bin's interval is every proportion's: the continuity-corrected Wilson (by hand, 8 of 10: each end is the
    # plain Wilson end of 7.5 and 8.5 successes)
    assert figures.bin_interval(0.8, 10) == pytest.approx(wilson_cc_by_root(8, 10), abs=1e-9)
    lo, hi = figures.bin_interval(0.8, 10)
    z = 1.959963984540054

    def plain(p: float, end: int) -> float:
        return ((p + z * z / 20) + end * z * np.sqrt(p * (1 - p) / 10 + z * z / 400)) / (1 + z * z / 10)

    assert (lo, hi) == pytest.approx((plain(0.75, -1), plain(0.85, 1)))
    assert (round(lo, 4), round(hi, 4)) == (0.4422, 0.9646)


def test_per_corruption_bars_and_radius_chart_draw_intervals_and_chance() -> None:
    frame = pd.DataFrame([{"model": "A", "corruption": "noise", "ce": 1.0, "rce": 1.0, "fr": 1.0, "accuracy": 0.6,
                           "accuracy_lo": 0.5, "accuracy_hi": 0.7}])
    fig = figures.per_corruption_bars(frame, "accuracy", "balanced accuracy", chance=0.25)
    assert list(fig.data[0].error_y.array) == pytest.approx([10.0]) and fig.layout.yaxis.title.text.endswith("(%)")
    assert any(s.y0 == pytest.approx(25.0) for s in fig.layout.shapes) and fig.layout.showlegend
    ce = figures.per_corruption_bars(frame, "ce", "CE")
    assert "lower is better" in ce.layout.title.text and ce.data[0].error_y.array is None
    bins = pd.DataFrame([{"model": "A", "corruption": "noise", "bin": i, "bin_lo": 0, "bin_hi": 1, "mean_radius": r,
                          "accuracy": a, "count": 10} for i, (r, a) in enumerate([(0.1, 0.9), (0.2, 0.5)])])
    fig = figures.accuracy_vs_radius(bins, pd.DataFrame(), chance=0.1)
    line = fig.data[0]
    lo, hi = wilson_cc_by_root(9, 10)
    assert line.error_y.array[0] == pytest.approx(100 * hi - 90) and line.error_y.arrayminus[0] == pytest.approx(90 - 100 * lo)
    assert any(s.y0 == pytest.approx(10.0) for s in fig.layout.shapes)


def test_a_model_keeps_its_colour_whatever_else_is_shown() -> None:
    one = figures.model_colors(["embedded:good"])
    two = figures.model_colors(["embedded:weak", "embedded:good"])
    three = figures.model_colors(["zzz", "embedded:good", "open_clip:ViT-B-32/openai"])
    assert one["embedded:good"] == two["embedded:good"] == three["embedded:good"]
    many = figures.model_colors([f"m{i}" for i in range(20)])
    assert len(set(many.values())) == 20  # within one chart no two models share a colour (up to 20)
    assert list(many) == [f"m{i}" for i in range(20)]


def test_every_label_flip_cell_is_labelled_on_the_axis(populated: Store) -> None:
    fig = figures.lfp_heatmap(data.load_run_view(populated, DONE).report)
    assert fig.layout.xaxis.dtick == 1 and fig.layout.yaxis.dtick == 1
    assert len(fig.data[0].x) == 5 and all(t for t in fig.data[0].text[0])


def test_runs_list_counts_units_not_cells(store: Store) -> None:
    # a worker died: every cell has its first shard, the last two cells of each model lost the second
    syn.populate(store, run_id=LIVE, status="running")
    for m in syn.MODELS:
        for corr, sev in (("brightness", 1), ("brightness", 2)):
            store.units.delete(run_id=LIVE, model=m, corruption=corr, severity=sev, shard=1)
    store.update_run(LIVE, config=store.get_run(LIVE).config.model_copy(update={"shard_size": 30}))
    run = store.get_run(LIVE)
    assert query.run_progress(store, run) == 1.0  # every cell has a unit: counting cells says "done"
    p = progress.unit_progress(store, run)
    assert (p.done, p.planned, p.exact) == (20, 24, True) and p.text() == "20 of 24 units"
    at = app()
    runs = next(d.value for d in at.dataframe if "units" in d.value.columns).set_index("run")
    assert runs.loc[LIVE, "units"] == "20 of 24 units" and runs.loc[LIVE, "progress %"] == pytest.approx(100 * 20 / 24)
    # without a set shard size the stored shards give a lower bound, and the text says so
    store.update_run(LIVE, config=run.config.model_copy(update={"shard_size": None}))
    assert progress.unit_progress(store, store.get_run(LIVE)).text() == "20 of ≥ 24 units"


def test_planned_but_never_run_domains_stay_out_of_the_runs_pages_heatmap(populated: Store) -> None:
    from domainbench.records.config import DomainConfig

    plan = DomainConfig.model_validate({**syn.domain_doc("underwater drone footage"),
                                        "corruptions": [{"name": "fog", "severities": [1]}]})
    populated.domains.save(plan, created_at="2025-02-01T00:00:00+00:00")
    assert "underwater drone footage" in data.selection_frequencies(populated).columns  # New domain shows it
    at = app()
    heat = next(spec(c) for c in at.get("plotly_chart") if "planner chose" in spec(c)["layout"]["title"]["text"])
    assert "underwater drone footage" not in heat["data"][0]["x"] and len(heat["data"][0]["x"]) == 2


def test_run_configuration_is_a_table_and_cards_are_not_cut(populated: Store) -> None:
    at = run_page(DONE)
    assert not at.json  # no collapsed raw JSON
    config = next(d.value for d in at.dataframe if "setting" in d.value.columns).set_index("setting")["value"]
    assert config["models"] == "embedded:good, embedded:weak" and config["seed"] == "0"
    assert config["dataset as evaluated"] == "sample[:60]" and config["environment: device"] == "cpu"
    card = next(m for m in at.metric if m.label == "dataset")
    assert card.value == "sample[:60]" and "sample[:60]" in card.proto.help
    long = "/data/warehouse-photos/2024/batch-17/manifest.csv"
    short = card_value(long)
    assert len(short) <= 22 and short.endswith("manifest.csv"[-6:]) and short.startswith("/data/")


@pytest.mark.parametrize("tab", ["Accuracy vs severity", "Per corruption", "Label flips", "PD threat", "Stability",
                                 "Accuracy vs radius", "Confusion matrix"])
def test_every_chart_has_axis_titles_and_a_legend(real_run: tuple[Path, str], real_store: Store, tab: str) -> None:
    charts = [spec(c) for c in run_page(real_run[1], tab).get("plotly_chart")]
    assert charts, tab
    for fig in charts:
        layout = fig["layout"]
        assert layout["xaxis"].get("title", {}).get("text") and layout["yaxis"].get("title", {}).get("text"), tab
        keyed = layout.get("showlegend") is True or any("colorbar" in t for t in fig["data"])
        assert keyed, f"{tab}: {layout.get('title')}"


def test_label_flip_cells_carry_their_interval(real_store: Store, real_run: tuple[Path, str]) -> None:
    run_id = real_run[1]
    fig = spec(run_page(run_id, "Label flips").get("plotly_chart")[0])
    report = real_store.get_report(run_id)
    ri = query.intervals(real_store, report)
    heat = fig["data"][0]
    keys = sorted({(c.corruption, c.severity) for m in report.models for c in m.cells})
    for i, model in enumerate(report.model_names):
        for j, (corr, sev) in enumerate(keys):
            lfp = next(c.lfp for c in report.model(model).cells if (c.corruption, c.severity) == (corr, sev))
            lo, hi = ri.cell(model, corr, sev).label_flip_probability
            assert heat["text"][i][j] == f"{100 * lfp:.0f} ({100 * lo:.0f}–{100 * hi:.0f})"
            assert f"95 % interval {100 * lo:.1f}–{100 * hi:.1f} %" in heat["customdata"][i][j]


def test_the_queue_panel_counts_units_too(store: Store) -> None:
    from test_new_domain import page

    syn.populate(store, run_id="r-stopped", status="interrupted", skip_cells=3)
    store.update_run("r-stopped", queued_at="2025-01-01T00:00:00+00:00")
    at = page()
    line = next(m.value for m in at.markdown if "r\\-stopped" in m.value or "r-stopped" in m.value)
    # 3 of 6 cells per model stored, 2 shards each: 12 units of at least 24 (automatic shard size)
    assert "12 of ≥ 24 units" in line and "cells" not in line


def test_a_corruption_of_one_cell_without_draws_takes_its_cells_interval() -> None:
    """A real shift (its own images: no per-corruption draws) has one cell, whose interval is its accuracy's; a
    corruption of several severities without draws gets none (the mean's interval is not the cells')."""
    frame = pd.DataFrame([{"model": "A", "corruption": "shift:rain", "ce": None, "rce": None, "fr": None, "accuracy": 0.6},
                          {"model": "A", "corruption": "noise", "ce": 1.1, "rce": None, "fr": 0.9, "accuracy": 0.5}])
    cells = {("A", "clean", 0): (0.8, 0.9), ("A", "shift:rain", 1): (0.5, 0.7),
             ("A", "noise", 1): (0.5, 0.6), ("A", "noise", 2): (0.4, 0.5)}
    out = data.corruption_bounds(frame.astype({c: "float64" for c in ("ce", "rce", "fr")}), {}, "r", cells=cells)
    assert out[["accuracy_lo", "accuracy_hi"]].iloc[0].tolist() == [0.5, 0.7]
    assert out[["accuracy_lo", "accuracy_hi", "ce_lo", "fr_hi"]].iloc[1].isna().all()

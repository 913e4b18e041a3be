"""Compare's aggregates carry their 95 % intervals (issue 27, item 1): the ranking's averaged accuracies, the
models × domains heatmap (cell text, hover and its table), the rank chart's error bars and the family heatmap."""

from __future__ import annotations

import json

import fe_synthetic as syn
import numpy as np
import pytest
from test_app import texts
from test_run_pages import compare_page

from domainbench import query
from domainbench.frontend import data
from domainbench.frontend.verdict import pm
from domainbench.stats import percentile_interval
from domainbench.stats.smoothed import multipliers
from tests.metrics.confidence_fixtures import textbook_loadings_of
from domainbench.store import Store

NIGHT, XRAY = "20250101-000000-night-abcd", "20250102-000000-xray-ef01"


@pytest.fixture
def two_domains(store: Store) -> Store:
    """Two finished runs in two domains on the same 60 images, with per-image predictions (identical results)."""
    syn.populate(store, run_id=NIGHT, per_image=True)
    syn.populate(store, run_id=XRAY, domain="chest x-rays from portable scanners", created_at="2025-01-02T00:00:00+00:00",
                 per_image=True)
    return store


def _own(store: Store, model: str):
    """The run page's own intervals of one run (both runs are the same images and results, resampled jointly,
    so their average is that run in every resample: the same interval)."""
    iv = query.intervals(store, store.get_report(NIGHT)).model(model)
    assert iv is not None
    return iv


def _chart(at, kind: str) -> dict:
    for c in at.get("plotly_chart"):
        spec = json.loads(c.proto.spec)
        if spec["data"] and spec["data"][0]["type"] == kind:
            return spec
    raise AssertionError(f"no {kind} chart")


def test_the_ranking_shows_each_averaged_accuracy_with_its_interval(two_domains: Store) -> None:
    at = compare_page([NIGHT, XRAY])
    assert not at.error, texts(at.error)
    ranking = next(d.value for d in at.dataframe if "rank change" in d.value.columns).set_index("model")
    report = two_domains.get_report(NIGHT)
    for row in report.table():
        own = _own(two_domains, row.model)
        assert ranking.loc[row.model, "clean acc (95 % CI)"] == pm(row.acc, own.clean_accuracy, True)
        assert ranking.loc[row.model, "corrupted acc (95 % CI)"] == pm(row.mean_corrupted_acc, own.mean_corrupted_accuracy,
                                                                       True)
        lo, hi = own.clean_accuracy
        assert ranking.loc[row.model, "clean acc (95 % CI)"] == f"{100 * row.acc:.1f} % ({100 * lo:.1f}–{100 * hi:.1f})"
    # mean mCE, against the page's shared baseline (the run page's intervals of the report re-based on it)
    base = at.selectbox(key="compare-baseline").value
    rebased = query.report(two_domains, NIGHT, base)
    for row, iv in zip(rebased.table(), query.intervals(two_domains, rebased).models, strict=True):
        assert ranking.loc[row.model, "mean mCE (95 % CI)"] == pm(row.mce, iv.mce, False)
    # the verdict's sentence carries the interval too
    best = ranking["corrupted acc (95 % CI)"].iloc[0]
    assert any(t.value.startswith("Across 2 domain(s), ") and f"corruption: {best} (clean " in t.value for t in at.text)
    # the rank chart: an error bar per rank, and the page says what the intervals are
    rank = _chart(at, "scatter")
    assert all(t["error_y"]["array"] is not None for t in rank["data"]) and "95 % intervals" in rank["layout"]["title"]["text"]
    note = texts(at.caption)
    assert "95 % intervals, normal with a smoothed per-class variance, drawn 2,000 times" in note
    assert "drawn jointly" in note and "runs on other images independently" in note


def test_heatmap_cells_hover_and_table_carry_the_interval(two_domains: Store) -> None:
    from streamlit.testing.v1 import AppTest
    from test_app import APP

    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["runs"], at.query_params["metric"] = f"{NIGHT},{XRAY}", "acc"
    at.run()
    at.switch_page("views/compare.py").run()
    assert not at.exception and not at.error
    heat = _chart(at, "heatmap")["data"][0]
    lo, hi = _own(two_domains, "embedded:good").clean_accuracy
    value = two_domains.get_report(NIGHT).model("embedded:good").clean_accuracy
    assert heat["text"][0][0] == f"{100 * value:.1f} ({100 * lo:.1f}–{100 * hi:.1f})"
    assert heat["customdata"][0][0][0] == f" (95 % interval {100 * lo:.1f}–{100 * hi:.1f} %)"
    assert "%{customdata[0]}" in heat["hovertemplate"]
    table = next(d.value for d in at.dataframe if "embedded:good" in d.value.index)
    assert table.loc["embedded:good"].tolist() == [f"{100 * value:.1f} % ({100 * lo:.1f}–{100 * hi:.1f})"] * 2


def test_the_family_heatmap_and_its_table_match_the_textbook_draws(two_domains: Store) -> None:
    """The noise family (gaussian_noise, severities 1-3) of embedded:weak, recomputed from the run's multipliers (its
    seed) and the textbook loadings: per draw, the balanced accuracy of each severity moved by the draw, averaged."""
    at = compare_page([NIGHT, XRAY])
    family = data.family_of("gaussian_noise")
    table = next(d.value for d in at.dataframe if family in d.value.columns)
    units = {(u.severity, u.shard): u for u in two_domains.units(NIGHT, model="embedded:weak")}
    labels = np.concatenate([units[(0, s)].labels for s in (0, 1)])
    preds = {sev: np.concatenate([units[(sev, s)].preds for s in (0, 1)]) for sev in (1, 2, 3)}
    e = multipliers(labels.size, 2000, seed=0)
    accuracy = {s: np.mean([np.mean(preds[s][labels == k] == k) for k in range(3)]) for s in (1, 2, 3)}
    values = np.mean([np.clip(accuracy[s] + e @ textbook_loadings_of(preds[s] == labels, labels), 0, 1) for s in (1, 2, 3)],
                     axis=0)
    point = np.mean([syn.correct("embedded:weak", s) / syn.PER_CLASS for s in (1, 2, 3)])
    assert point == pytest.approx(np.mean(list(accuracy.values())), abs=1e-12)
    lo, hi = np.quantile(values, [0.025, 0.975])
    assert table.loc["embedded:weak", family] == pm(point, (lo, hi), True)
    heat = next(c for c in (json.loads(p.proto.spec) for p in at.get("plotly_chart"))
                if c["data"] and c["data"][0]["type"] == "heatmap" and family in c["data"][0]["x"])["data"][0]
    row = heat["y"].index("embedded:weak")
    assert heat["customdata"][row][heat["x"].index(family)][0].endswith(f"(95 % interval {100 * lo:.1f}–{100 * hi:.1f} %)")


def test_runs_without_per_image_outcomes_show_values_and_say_why_no_interval(populated: Store) -> None:
    at = compare_page([NIGHT, XRAY])
    ranking = next(d.value for d in at.dataframe if "rank change" in d.value.columns)
    assert ranking["clean acc (95 % CI)"].tolist() == ["90.0 %", "80.0 %"]
    assert "No interval on the averages that include " in texts(at.caption)
    assert "no per-image outcomes" in texts(at.caption)


def test_a_column_of_two_runs_and_an_included_run_on_other_images(two_domains: Store) -> None:
    """A third run of the night domain (same images, same results) makes a column of 2 runs, resampled jointly: its
    interval is the single run's. A run on 30 other images, flagged and then included, keeps its own run page's
    interval in its column (its resamples are paired independently with the others')."""
    from streamlit.testing.v1 import AppTest
    from test_app import APP

    again = "20250103-000000-night-abce"
    syn.populate(two_domains, run_id=again, per_image=True, created_at="2025-01-03T00:00:00+00:00")
    two_domains.update_run(again, domain_id="d" + NIGHT[-4:])
    small = "20250104-000000-small-0030"
    syn.populate(two_domains, run_id=small, domain="a smaller set", shards=1, per_image=True,
                 created_at="2025-01-04T00:00:00+00:00")
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["runs"], at.query_params["metric"] = f"{NIGHT},{again},{XRAY},{small}", "acc"
    at.query_params["flagged"] = "1"
    at.run()
    at.switch_page("views/compare.py").run()
    assert not at.exception and not at.error, texts(at.error)
    assert "Not comparable" in texts(at.warning) and at.checkbox(key="compare-include-flagged").value
    heat = _chart(at, "heatmap")["data"][0]
    row = heat["y"].index("embedded:good")
    two = next(i for i, x in enumerate(heat["x"]) if x.endswith("(2 runs)"))
    lo, hi = _own(two_domains, "embedded:good").clean_accuracy
    assert heat["customdata"][row][two][0].endswith(f"(95 % interval {100 * lo:.1f}–{100 * hi:.1f} %)")
    own = query.intervals(two_domains, two_domains.get_report(small)).model("embedded:good").clean_accuracy
    col = heat["x"].index(next(x for x in heat["x"] if x.startswith("a smaller set")))
    assert heat["customdata"][row][col][0].endswith(f"(95 % interval {100 * own[0]:.1f}–{100 * own[1]:.1f} %)")


def test_all_numbers_and_per_corruption_tables_carry_each_runs_own_intervals(two_domains: Store) -> None:
    """The per run × model table (rCE, mFR and safe-cell accuracy included) and the per run × corruption table show
    each value with the interval of its run, from the draws the aggregates use (the run page's for NIGHT)."""
    at = compare_page([NIGHT, XRAY])
    assert not at.error, texts(at.error)
    base = at.selectbox(key="compare-baseline").value
    report = query.report(two_domains, NIGHT, base)
    iv = query.intervals(two_domains, report)
    everything = next(d for d in at.dataframe if "rCE (95 % CI)" in d.value.columns and "corruption" not in d.value.columns)
    rows = everything.value[everything.value["run"] == NIGHT].set_index("model")
    assert any(v is not None for v in report.safe_accuracy.values())
    for row in report.table():
        mi = iv.model(row.model)
        expected = {"clean acc (95 % CI)": pm(row.acc, mi.clean_accuracy, True),
                    "corrupted acc (95 % CI)": pm(row.mean_corrupted_acc, mi.mean_corrupted_accuracy, True),
                    "safe-cell acc (95 % CI)": pm(row.safe_acc, mi.safe_accuracy, True),
                    "mCE (95 % CI)": pm(row.mce, mi.mce, False), "rCE (95 % CI)": pm(row.rce, mi.rce, False),
                    "mFR (95 % CI)": pm(row.mfr, mi.mfr, False)}
        assert rows.loc[row.model, list(expected)].tolist() == list(expected.values()), row.model
        assert expected["safe-cell acc (95 % CI)"].endswith(")") and expected["mFR (95 % CI)"].endswith(")")
    order = list(everything.proto.column_order)
    assert "rCE (95 % CI)" in order and "rCE" not in order and "safe-cell acc %" not in order
    # per run × corruption: accuracy (the severities' mean, resample by resample), CE, rCE, FR
    draws = query.run_draws(two_domains, report)
    per = next(d.value for d in at.dataframe if "FR (95 % CI)" in d.value.columns)
    per = per[per["run"] == NIGHT].set_index(["model", "corruption"])
    checked = 0
    for m in report.models:
        for name in report.corruption_names():
            got = per.loc[(m.model, name)]
            assert got["accuracy (95 % CI)"] == pm(got["accuracy %"] / 100,
                                                   percentile_interval(draws.corruptions[m.model][name]["accuracy"]), True)
            for ratio, head, values in (("ce", "CE", m.ce_per_corruption), ("rce", "rCE", m.rce_per_corruption),
                                        ("fr", "FR", m.fr_per_corruption)):
                if values.get(name) is not None:
                    ci = percentile_interval(draws.corruptions[m.model][name][ratio])
                    assert got[f"{head} (95 % CI)"] == pm(values[name], ci, False), (m.model, name, ratio)
                    checked += 1
    assert checked

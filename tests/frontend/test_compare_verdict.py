"""Compare opens with the verdict (issue 27, items 1-3): an overall sentence from the ranking, then each domain's
verdict from the statistics' paired test (the run page's own sentences), before any table or chart; rates in %
and ratios said to be ratios in its tables."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_app import DONE, texts
from test_run_pages import XRAY, compare_page
from test_verdict import flat

from domainbench.query.compare import paired_comparison
from domainbench.frontend import data
from domainbench.store import Store


def test_compare_opens_with_the_verdict_of_each_domain(real_store: Store, real_run: tuple[Path, str]) -> None:
    run_id = real_run[1]
    at = compare_page([run_id])
    assert not at.error, texts(at.error)
    expected = [v.sentence for v in paired_comparison(real_store, [run_id]).verdicts]
    group = data.short_text(real_store.get_run(run_id).domain.domain, 32)
    shown = [t.value for t in at.text]
    assert expected and all(f"{group}: {s}" in shown for s in expected)
    report = real_store.get_report(run_id)
    best = max(report.table(), key=lambda r: r.mean_corrupted_acc)
    overall = next(t for t in shown if t.startswith("Across 1 domain(s), "))
    assert overall.startswith(f"Across 1 domain(s), {best.model} keeps the most accuracy under corruption: "
                              f"{100 * best.mean_corrupted_acc:.1f} %")
    order = list(flat(at.main))
    first_verdict = next(i for i, e in enumerate(order) if type(e).__name__ == "Text" and e.value == overall)
    first_table = next(i for i, e in enumerate(order) if type(e).__name__ == "Dataframe")
    first_chart = next(i for i, e in enumerate(order) if type(e).__name__ in ("PlotlyChart", "UnknownElement") and getattr(e, "type", "") == "plotly_chart")
    assert first_verdict < first_table and first_verdict < first_chart


def test_runs_without_per_image_outcomes_say_why_there_is_no_verdict(populated: Store) -> None:
    at = compare_page([DONE, XRAY])
    assert not at.error
    assert "No verdict for " in texts(at.caption)
    assert any(t.value.startswith("Across 2 domain(s), embedded:good keeps the most accuracy") for t in at.text)


def test_compare_tables_show_rates_in_percent_and_ratios_as_ratios(populated: Store) -> None:
    at = compare_page([DONE, XRAY])
    every = next(d for d in at.dataframe if "run" in d.value.columns and "model" in d.value.columns
                 and "clean acc %" in d.value.columns)
    frame = data.compare_runs(populated, [DONE, XRAY], "embedded:good").frame
    assert every.value["clean acc %"].tolist() == pytest.approx((100 * frame["acc"]).tolist())
    assert "acc" not in every.value.columns and "mCE" in every.value.columns
    import json

    assert json.loads(every.proto.columns)["mCE"]["help"].endswith("Lower is better.")
    per = next(d.value for d in at.dataframe if "family" in d.value.columns)
    assert "accuracy %" in per.columns and per["accuracy %"].max() > 1.0


def test_verdicts_beyond_the_first_domains_come_when_asked_and_stay_in_the_link(populated: Store) -> None:
    import fe_synthetic as syn
    from test_run_pages import param

    more = ["20250105-000000-fog-0005", "20250106-000000-snow-0006"]
    for i, rid in enumerate(more):
        syn.populate(populated, run_id=rid, domain=f"domain {i}", created_at=f"2025-01-0{5 + i}T00:00:00+00:00")
    at = compare_page([DONE, XRAY, *more])
    no_verdict = next(c.value for c in at.caption if c.value.startswith("No verdict for "))
    assert "domain 0: " in no_verdict and "domain 1: " not in no_verdict  # the first three domains only
    box = at.checkbox(key="compare-all-verdicts")
    assert "(4; 1 more" in box.label
    box.check().run()
    assert param(at, "verdicts") == "all"
    no_verdict = next(c.value for c in at.caption if c.value.startswith("No verdict for "))
    assert "domain 0: " in no_verdict and "domain 1: " in no_verdict

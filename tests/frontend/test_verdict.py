"""The run page opens with the statistics' verdict, then the table with 95 % intervals (real run)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_app import run_page, summary_table

from domainbench.query.compare import paired_comparison
from domainbench.query.confidence import load_intervals
from domainbench.store import Store
from domainbench.frontend.verdict import pm


def flat(node):  # noqa: ANN001, ANN201 - AppTest nodes, in page order
    children = getattr(node, "children", None)
    if not children:
        yield node
        return
    for child in children.values():
        yield from flat(child)


def test_verdict_first_then_the_table_with_intervals(real_store: Store, real_run: tuple[Path, str]) -> None:
    run_id = real_run[1]
    at = run_page(run_id)
    assert not at.error
    expected = [v.sentence for v in paired_comparison(real_store, [run_id]).verdicts]
    shown = [t.value for t in at.text]
    assert expected and all(s in shown for s in expected)
    # the verdict is drawn before the summary table
    order = list(flat(at.main))
    first_verdict = next(i for i, e in enumerate(order) if type(e).__name__ == "Text" and e.value in expected)
    first_table = next(i for i, e in enumerate(order) if type(e).__name__ == "Dataframe" and "mCE" in e.value.columns)
    assert first_verdict < first_table
    table = summary_table(at)
    # the tied groups: a line under the verdicts and a column beside each model's name, as `show` computes them
    groups = paired_comparison(real_store, [run_id]).groups
    assert groups.sentence() in shown
    assert dict(zip(table["model"], table["group"], strict=True)) == groups.letters
    assert list(table.columns).index("group") == list(table.columns).index("model") + 1
    report = real_store.get_report(run_id)
    # cost beside robustness: one point per model at its images/s from the run's timings, the front starred
    import json

    from domainbench.frontend.cost_view import TITLE
    from domainbench.metrics.cost import throughput

    charts = [json.loads(c.proto.spec) for c in run_page(run_id, "Cost").get("plotly_chart")]  # its own tab
    cost = next(c for c in charts if c["layout"]["title"]["text"] == TITLE)
    timings = real_store.get_run(run_id).timings
    assert {t["name"]: t["x"][0] for t in cost["data"]} == {m: throughput(timings, m)[2] for m in report.model_names}
    ci = {m.model: m for m in load_intervals(real_store, report).models}
    for row in report.table():
        got = table.set_index("model").loc[row.model, "clean acc (95 % CI)"]
        # "*": few images per class made the interval approximate (the real run has 4 per class)
        assert ci[row.model].approximate
        assert got == pm(row.acc, ci[row.model].clean_accuracy, True) + "*"
        lo, hi = ci[row.model].clean_accuracy
        assert lo <= row.acc <= hi and got == f"{100 * row.acc:.1f} % ({100 * lo:.1f}–{100 * hi:.1f})" + "*"


def test_the_summary_gives_rce_mfr_and_safe_cell_accuracy_their_intervals(real_store: Store,
                                                                          real_run: tuple[Path, str]) -> None:
    import json

    at = run_page(real_run[1])
    shown = next(d for d in at.dataframe if "mCE" in d.value.columns)
    table = shown.value.set_index("model")
    report = real_store.get_report(real_run[1])
    ci = {m.model: m for m in load_intervals(real_store, report).models}
    assert any(v is not None for v in report.safe_accuracy.values())  # the real run has PD-safe cells
    for row in report.table():
        iv = ci[row.model]
        star = "*" if iv.approximate else ""
        assert table.loc[row.model, "rCE (95 % CI)"] == pm(row.rce, iv.rce, False) + star
        assert table.loc[row.model, "mFR (95 % CI)"] == pm(row.mfr, iv.mfr, False) + star
        assert table.loc[row.model, "safe-cell acc (95 % CI)"] == pm(row.safe_acc, iv.safe_accuracy, True) + star
        for value, interval in ((row.rce, iv.rce), (row.mfr, iv.mfr), (row.safe_acc, iv.safe_accuracy)):
            assert interval is not None and interval[0] - 1e-12 <= value <= interval[1] + 1e-12
        lo, hi = iv.safe_accuracy
        assert table.loc[row.model, "safe-cell acc (95 % CI)"] == f"{100 * row.safe_acc:.1f} % ({100 * lo:.1f}–{100 * hi:.1f})" + star
        lo, hi = iv.rce
        assert table.loc[row.model, "rCE (95 % CI)"] == f"{row.rce:.3f} ({lo:.3f}–{hi:.3f})" + star
    # the headers hover to the registry's meaning, then how the interval is written
    config = json.loads(shown.proto.columns)
    from domainbench.metrics.registry import metric

    for header, name in (("rCE (95 % CI)", "rce"), ("mFR (95 % CI)", "mfr"), ("safe-cell acc (95 % CI)", "safe_accuracy")):
        assert config[header]["help"] == (f"{metric(name).help} Shown as value (low–high): the two ends of its 95 % "
                                          "interval, which need not be symmetric around the value.")


def test_pm_writes_the_value_and_its_interval_s_two_ends() -> None:
    assert pm(0.612, (0.581, 0.643), True) == "61.2 % (58.1–64.3)"
    # the lopsided rCE: both ends, so the upper end above 1.0 shows
    assert pm(0.572, (0.305, 1.165), False) == "0.572 (0.305–1.165)"
    assert pm(0.05, (-0.02, 0.1), False) == "0.050 (-0.020 to 0.100)"  # a minus never reads as the dash
    assert pm(None, None, True) == "—" and pm(0.5, None, True) == "50.0 %"
    assert pm(float("nan"), (0, 1), True) == "—"
    with pytest.raises(TypeError):
        pm("x", None, True)  # type: ignore[arg-type]


def test_summary_headers_hover_to_the_registry_meaning_and_direction(populated: Store) -> None:
    import json

    from test_app import DONE

    from domainbench.metrics.registry import metric

    at = run_page(DONE)
    table = next(d for d in at.dataframe if "mCE" in d.value.columns)
    config = json.loads(table.proto.columns)
    mce = config["mCE"]["help"]
    assert mce.startswith(metric("mce").meaning[0].upper() + metric("mce").meaning[1:])
    assert mce.endswith("Lower is better.") and "1.0 = as robust as the baseline" in mce
    assert config["clean acc %"]["help"].endswith("Higher is better.")


def test_a_value_with_its_interval_is_shown_once(real_store: Store, real_run: tuple[Path, str]) -> None:
    at = run_page(real_run[1])
    # the summary's headline columns and its folded "more columns" table (issue 37: the summary fits 1,400 px)
    order = [c for d in at.dataframe if "mCE" in d.value.columns for c in d.proto.column_order]
    for value, ci in {"clean acc %": "clean acc (95 % CI)", "safe-cell acc %": "safe-cell acc (95 % CI)", "mCE": "mCE (95 % CI)",
                      "rCE": "rCE (95 % CI)", "mFR": "mFR (95 % CI)"}.items():
        assert ci in order and value not in order, value
    assert "corr(acc, LFP)" in order  # no interval column: its value stays

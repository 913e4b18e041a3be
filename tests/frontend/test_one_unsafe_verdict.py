"""Issue 37, defect 6: one run page disagreed with itself (the accuracy tab shaded a cell "unsafe" that the PD-threat
tab called "borderline"; ``show`` counted 37 of 51 safe but listed only 12 unsafe cells). Every reader now takes the
report's one verdict: checked here on a run with a safe, a borderline and an unsafe cell."""

from __future__ import annotations

import fe_synthetic as syn
import pytest
from scipy.stats import beta
from test_app import run_page, texts

from domainbench.engine.reports import build_report
from domainbench.frontend import figures
from domainbench.metrics.threat import UNSAFE_SHARE_CUT
from domainbench.store import Store
from tests.cli_runner import run_cli

RUN = "20250101-000000-pd-abcd"


@pytest.fixture
def three_verdicts(store: Store) -> Store:
    syn.populate(store, run_id=RUN, per_image=True)
    # brightness s2: 2 of its 60 images above threat 1 -> Clopper-Pearson (0.4 %, 11.5 %) crosses the 10 % cut
    records = [{"run_id": RUN, "corruption": "brightness", "severity": 2, "shard": s, "n": 30, "sum": 6.0,
                "sum_sq": 1.2 + (4.0 if s == 0 else 0.0), "n_above_1": 2 if s == 0 else 0, "max": 2.0} for s in (0, 1)]
    store.upsert_many("threat", records)
    store.put_report(build_report(store, RUN))
    return store


def test_6_every_tab_and_show_name_the_same_unsafe_and_borderline_cells(three_verdicts: Store, capsys,  # noqa: ANN001
                                                                        monkeypatch) -> None:  # noqa: ANN001
    # the borderline cell by an independent Clopper-Pearson interval (scipy's beta quantiles)
    low, high = beta.ppf(0.025, 2, 59), beta.ppf(0.975, 3, 58)
    assert low < UNSAFE_SHARE_CUT < high
    report = three_verdicts.get_report(RUN)
    assert [figures.cell_label(t.corruption, t.severity) for t in report.cells_by_safety("borderline")] == ["brightness s2"]
    assert [figures.cell_label(t.corruption, t.severity) for t in report.cells_by_safety("unsafe")] == ["gaussian_noise s3"]
    for tab in ("Accuracy vs severity", "PD threat"):
        caption = texts(run_page(RUN, tab).caption)
        assert "Unsafe: gaussian_noise s3." in caption and "Borderline: brightness s2." in caption, tab
    # the accuracy chart shades exactly those severities, each in its verdict's colour
    fig = figures.severity_lines(report)
    shaded = sorted((s.fillcolor, s.x0, s.x1) for s in fig.layout.shapes if s.fillcolor)
    assert shaded == sorted([(figures.BORDERLINE_COLOR, 1.5, 2.5), (figures.UNSAFE_COLOR, 2.5, 3.5)])
    # show: the counts add up to the cells it lists
    code, out, err = run_cli(["show", RUN], capsys, monkeypatch)
    assert code == 0, err
    assert "PD threat: 3 of 5 corruption cells safe, 1 borderline, 1 unsafe" in " ".join(out.split())

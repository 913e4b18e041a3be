"""FMR's SA and PA on the run page carry their 95 % Wilson intervals, as the export holds them (issue 37, defect 10)."""

from __future__ import annotations

import fe_synthetic as syn
import pytest
from tests.oracles.score_interval import wilson_cc_by_root
from test_app import run_page

from domainbench import query
from domainbench.store import Store

FMR = "20250104-000000-fmr-5678"


def test_fmr_sa_and_pa_are_shown_with_their_intervals(store: Store) -> None:
    syn.populate_fmr(store, run_id=FMR, oracle=["embedded:o1", "embedded:o2", "embedded:o3"])
    at = run_page(FMR)
    table = next(d.value for d in at.dataframe if "FMR" in d.value.columns)
    row = table.iloc[0]
    report = query.report(store, FMR)
    ri = query.intervals(store, report)
    (iv,) = ri.fmr
    # SA: 5 of the 6 images right on the clean pass (fe_synthetic.populate_fmr), the continuity-corrected Wilson
    low, high = wilson_cc_by_root(5, 6)
    assert iv.sa == pytest.approx((low, high), abs=1e-9)
    assert row["SA (95 % CI)"] == f"{100 * 5 / 6:.1f} % ({100 * low:.1f}–{100 * high:.1f})"
    m = report.fmr.models[0]
    assert row["PA (95 % CI)"] == f"{100 * m.pa:.1f} % ({100 * iv.pa[0]:.1f}–{100 * iv.pa[1]:.1f})"

"""The quick version of benchmarks/interval_coverage.py: the product's intervals hold a known truth as often as their level
says, where the percentile bootstrap did not (100 classes, 100 images: one image per class)."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.interval_coverage import CELL_METHODS, lenient, passes, row, table

REPS = 120


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    """``benchmarks/interval_coverage.py --quick`` with fewer replications (its own table function)."""
    return table(REPS, quick=True, extra=False)  # the verdicts' rows: tests/stats/test_coverage_verdicts.py


def test_every_quick_interval_holds_its_truth(rows: list[dict]) -> None:
    now = [r for r in rows if not r["method"].endswith("(before)")]
    assert {r["what"] for r in now} >= {"model mce", "model rce", "model mfr", "model safe_accuracy", "family blur",
                                        "cross-run clean_accuracy", "model mean_corrupted_accuracy"}
    assert {r["scenario"] for r in now if r["what"].startswith("cell balanced")} == {
        "100 classes, n = 100, spread 0.0", "100 classes, n = 100, spread 0.5",
        "10 classes, n = 300, spread 0.0", "10 classes, n = 300, spread 0.5"}
    # run --breaking-point's interval, with one image per class (where its old bootstrap held 5 of 20)
    assert [r["scenario"] for r in now if r["what"].startswith("breaking point")] == ["100 classes, n = 100, spread 0.5"]
    # 0.94 less three Monte Carlo errors: 0.880 at 120 replications
    failing = [(r["what"], r["scenario"], r["share"]) for r in now if not passes(r, quick=True)]
    assert not failing and all(r["share"] >= lenient(0.94, REPS) for r in now), failing


def test_the_percentile_bootstrap_fails_the_same_check_at_one_image_per_class(rows: list[dict]) -> None:
    before = [r for r in rows if r["method"].endswith("(before)")]
    assert len(before) == 2 and all(r["scenario"].startswith("100 classes, n = 100") for r in before)
    # the same rows held to the same threshold fail with the interval printed before issue 34
    assert all(r["share"] < lenient(0.94, REPS) for r in before), before
    assert not any(passes({**r, "method": "smoothed"}, quick=True) for r in before)
    assert all(r["width"] == 0.0 for r in before)  # one image per class: every resample is the sample itself


def test_rows_and_thresholds() -> None:
    r = row("cell x", "s", "smoothed", 188, 200)
    assert r["share"] == 0.94 and r["mc_se"] == pytest.approx(np.sqrt(0.94 * 0.06 / 200))
    assert passes(r) and passes(row("cell x", "s", "smoothed", 930, 1000))  # 0.930 + 2 x 0.008 >= 0.94
    assert not passes(row("cell x", "s", "smoothed", 920, 1000))  # 0.920 + 2 x 0.0086 < 0.94
    assert passes(row("cell x", "s", "smoothed", 179, 200), quick=True)  # 0.895 >= 0.894
    assert not passes(row("cell x", "s", "smoothed", 178, 200), quick=True)
    assert passes(row("false beats", "s", "v", 10, 200, target=0.05)) and not passes(row("false beats", "s", "v", 11, 200,
                                                                                           target=0.05))
    assert set(CELL_METHODS) == {"smoothed", "percentile bootstrap (before)"}

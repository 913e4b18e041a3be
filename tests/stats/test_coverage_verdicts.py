"""The quick version of benchmarks/coverage_verdicts.py: the verdict's false "beats" rate for two identical models
and its power at the sample size it suggests, by simulation through the product's own comparison.

At 100 classes and 100 images (one per class) the old rule (a class-stratified paired bootstrap interval excluding
0) named a winner between identical models in about half of the replications; the bound here allows 5 % plus the
Monte Carlo error of the replications run."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "coverage_verdicts.py"
_spec = importlib.util.spec_from_file_location("coverage_verdicts", _PATH)
assert _spec is not None and _spec.loader is not None
cv = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cv)


def _bound(reps: int, rate: float = 0.05) -> float:
    """The target plus 2.5 Monte Carlo standard errors of a rate at the target (a 0.6 % chance to fail by luck)."""
    return rate + 2.5 * math.sqrt(rate * (1 - rate) / reps)


def test_identical_models_rarely_beat_each_other_with_one_image_per_class() -> None:
    [row] = cv.false_beats(100, 100, adaptive=False)(300, np.random.default_rng(0))
    assert row["rate"] <= _bound(300), row


def test_identical_models_rarely_beat_each_other_after_adaptive_stopping() -> None:
    [row] = cv.false_beats(10, 300, adaptive=True)(40, np.random.default_rng(1))
    assert row["rate"] <= _bound(40), row


def test_power_at_the_suggested_sample_size_is_about_80_percent() -> None:
    [row] = cv.power(10)(200, np.random.default_rng(2))
    se = math.sqrt(0.2 * 0.8 / 200)
    assert 0.70 - 2.5 * se <= row["rate"] <= 0.90 + 2.5 * se, row


def test_scenarios_are_rows_the_coverage_benchmark_reads() -> None:
    rows = cv.false_beats(10, 100, adaptive=False)(5, np.random.default_rng(3))
    assert set(rows[0]) == {"what", "scenario", "rate", "mc_se", "target"} and rows[0]["target"] == "<= 0.05"
    assert len(cv.SCENARIOS) == 10

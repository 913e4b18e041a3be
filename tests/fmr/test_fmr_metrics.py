"""SA, PA, FMR and the oracle's majority rule against independent computations."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from domainbench.metrics.fmr import TIE, fmr, majority, model_report


def test_fmr_is_pa_over_sa_times_100_on_a_hand_built_case() -> None:
    labels = [0, 1, 2, 3, 0, 1, 2, 3]
    clean = [0, 1, 2, 3, 0, 1, 0, 0]  # 6 of 8 right: SA = 0.75
    final = [0, 1, 3, 3, 1, 1, 0, 0]  # 4 of 8 right: PA = 0.5
    steps = [2, 0, 1, 3, 1, 0, 0, 0]
    validated = [True, True, True, True, True, True, False, False]
    r = model_report("m", np.array(labels), np.array(clean), np.array(final), np.array(steps), np.array(validated))
    assert r.sa == pytest.approx(6 / 8) and r.pa == pytest.approx(4 / 8)
    assert r.fmr == pytest.approx(100 * (4 / 8) / (6 / 8))  # 66.67
    assert r.validation_rate == pytest.approx(4 / 8)  # images with at least one accepted step
    assert r.mean_steps == pytest.approx(7 / 8)
    assert (r.n, r.n_validated, r.n_perturbed) == (8, 6, 4)


def test_fmr_is_undefined_when_no_clean_image_is_right() -> None:
    assert fmr(0.0, 0.0) is None
    assert fmr(0.3, 0.6) == pytest.approx(50.0)


def _reference_majority(row: list[int]) -> int:
    counts = Counter(row).most_common()
    return TIE if len(counts) > 1 and counts[0][1] == counts[1][1] else counts[0][0]


def test_majority_vote_rejects_ties() -> None:
    rng = np.random.default_rng(0)
    for members in (1, 2, 3, 4, 5):
        votes = rng.integers(0, 4, size=(200, members))
        expected = [_reference_majority(list(r)) for r in votes]
        assert majority(votes, 4).tolist() == expected
    assert majority(np.array([[1, 2], [3, 3]]), 4).tolist() == [TIE, 3]
    assert majority(np.array([[1, 2, 1], [0, 1, 2]]), 4).tolist() == [1, TIE]

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import balanced_accuracy_score

from domainbench.stats import (
    balanced_accuracy_weighted,
    bootstrap_weights,
    paired_balanced_accuracy_difference,
    percentile_interval,
    stratified_bootstrap,
)


def _data(n: int = 120, classes: int = 4, seed: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, classes, size=n)
    a = rng.random(n) < 0.7
    b = np.where(rng.random(n) < 0.8, a, ~a)
    return y, a, b


def test_weights_keep_every_class_size_and_are_reproducible() -> None:
    y, _, _ = _data()
    w = bootstrap_weights(y.size, y, resamples=1000, seed=7)
    assert w.shape == (1000, y.size)
    for c in np.unique(y):
        assert np.all(w[:, y == c].sum(axis=1) == np.sum(y == c))
    assert np.array_equal(w, bootstrap_weights(y.size, y, resamples=1000, seed=7))
    assert not np.array_equal(w, bootstrap_weights(y.size, y, resamples=1000, seed=8))
    # each image is drawn once per resample on average
    assert w.mean() == pytest.approx(1.0, abs=0.01)


def test_weighted_balanced_accuracy_equals_sklearn_on_expanded_samples() -> None:
    y, a, _ = _data(n=60)
    pred = np.where(a, y, (y + 1) % 4)
    w = bootstrap_weights(y.size, y, resamples=5, seed=0)
    got = balanced_accuracy_weighted(a, y, w)
    for r in range(5):
        idx = np.repeat(np.arange(y.size), w[r].astype(int))  # the resample as explicit images
        assert got[r] == pytest.approx(balanced_accuracy_score(y[idx], pred[idx]), abs=1e-12)
    assert balanced_accuracy_weighted(a, y, np.ones((1, y.size)))[0] == pytest.approx(balanced_accuracy_score(y, pred))


def test_bootstrap_distribution_matches_a_loop_over_index_resamples() -> None:
    """The multinomial counts resample like the textbook loop over drawn indices (same law)."""
    y, a, _ = _data(n=80, classes=3)
    fast = stratified_bootstrap(lambda w: balanced_accuracy_weighted(a, y, w), y.size, y, 4000, seed=0)
    rng = np.random.default_rng(99)
    slow = []
    members = [np.flatnonzero(y == c) for c in np.unique(y)]
    for _ in range(4000):
        # per class, draw its images' indices with replacement; balanced accuracy by hand
        slow.append(np.mean([a[rng.choice(m, size=m.size)].mean() for m in members]))
    assert np.mean(fast) == pytest.approx(np.mean(slow), abs=0.004)
    assert np.std(fast) == pytest.approx(np.std(slow), rel=0.08)
    lo_f, hi_f = percentile_interval(fast)
    lo_s, hi_s = percentile_interval(np.array(slow))
    assert lo_f == pytest.approx(lo_s, abs=0.015) and hi_f == pytest.approx(hi_s, abs=0.015)


def test_percentile_interval_levels_and_undefined_values() -> None:
    v = np.arange(1001, dtype=float)
    assert percentile_interval(v, 0.9) == pytest.approx((50.0, 950.0))
    assert percentile_interval(np.array([np.nan, 1.0, 3.0]), 0.5) == pytest.approx((1.5, 2.5))
    assert percentile_interval(np.array([np.nan, np.nan])) is None


def test_paired_difference_reproducible_and_sensible() -> None:
    y, a, b = _data(n=400)
    d, lo, hi = paired_balanced_accuracy_difference(a, b, y, seed=5)
    assert (d, lo, hi) == paired_balanced_accuracy_difference(a, b, y, seed=5)
    assert d == pytest.approx(balanced_accuracy_score(y, np.where(a, y, (y + 1) % 4)) - balanced_accuracy_score(y, np.where(b, y, (y + 1) % 4)))
    assert lo < d < hi
    # pairing: the paired interval is narrower than one from independent resamples of each model
    wa = bootstrap_weights(y.size, y, 2000, seed=1)
    wb = bootstrap_weights(y.size, y, 2000, seed=2)
    unpaired = balanced_accuracy_weighted(a, y, wa) - balanced_accuracy_weighted(b, y, wb)
    ulo, uhi = percentile_interval(unpaired)
    assert hi - lo < 0.8 * (uhi - ulo)
    # identical models: zero difference, degenerate interval
    assert paired_balanced_accuracy_difference(a, a, y) == (0.0, 0.0, 0.0)


def test_many_cells_at_once_equal_one_cell_at_a_time() -> None:
    """``balanced_accuracies_weighted`` over K cells (some images not evaluated by a cell, a class no image of
    which a cell evaluated) equals ``balanced_accuracy_weighted`` of each cell with its absent images weighing 0."""
    from domainbench.stats.bootstrap import balanced_accuracies_weighted

    rng = np.random.default_rng(4)
    y = rng.integers(0, 4, size=60)
    correct = rng.random((60, 5)) < 0.7
    present = rng.random((60, 5)) < 0.9
    present[y == 2, 3] = False  # cell 3 evaluated no image of class 2
    w = bootstrap_weights(60, y, 300, seed=1)
    many = balanced_accuracies_weighted(correct, present, y, w)
    for k in range(5):
        one = balanced_accuracy_weighted(correct[:, k] & present[:, k], y, w * present[:, k])
        assert many[:, k] == pytest.approx(one, abs=1e-12)


def test_shared_weights_are_the_same_rows_made_once_and_read_only() -> None:
    from domainbench.stats import shared_bootstrap_weights

    labels = np.array([0, 1, 1, 2, 2, 2, 0], dtype=np.int64)
    w = shared_bootstrap_weights(labels.size, labels, 300, 5)
    np.testing.assert_array_equal(w, bootstrap_weights(labels.size, labels, 300, 5))
    assert shared_bootstrap_weights(labels.size, labels.copy(), 300, 5) is w  # the same images: one matrix
    assert not w.flags.writeable
    np.testing.assert_array_equal(shared_bootstrap_weights(labels.size, None, 300, 5),
                                  bootstrap_weights(labels.size, None, 300, 5))

"""The smoothed per-class normal interval of balanced accuracy and its multiplier draws (``stats.smoothed``)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import norm
from sklearn.metrics import balanced_accuracy_score

from domainbench.stats import percentile_interval
from domainbench.stats.smoothed import (
    balanced_accuracy_interval,
    balanced_accuracy_linear,
    multipliers,
    rate_linear,
    shared_multipliers,
)


def test_a_hand_worked_interval() -> None:
    """Class a: one image, right. Class b: three images, two right. BA = (1 + 2/3)/2 = 5/6.
    p̃_a = 3/5 (variance 0.24/1), p̃_b = 4/7 (variance (4/7)(3/7)/3); se = sqrt(sum)/2; a step of BA is
    mean(1/1, 1/3)/2 = 1/3, so se grows by (1/3)/2 over z_0.975; the interval is 5/6 ± z·se in [0, 1]."""
    labels = np.array([0, 1, 1, 1])
    correct = np.array([True, True, True, False])
    se = np.sqrt(0.24 + (4 / 7) * (3 / 7) / 3) / 2 + (1 / 3) / 2 / norm.ppf(0.975)
    for level in (0.9, 0.95):
        z = norm.ppf(0.5 + level / 2)
        assert balanced_accuracy_interval(correct, labels, level) == pytest.approx((5 / 6 - z * se, 1.0), abs=1e-12)
    lin = balanced_accuracy_linear(correct[:, None], np.ones((4, 1)), labels)
    assert lin.point == pytest.approx([5 / 6]) and lin.se == pytest.approx([se], abs=1e-12)
    assert lin.median_per_class == pytest.approx([2.0])  # classes of 1 and 3 images


def test_draws_are_the_point_moved_by_loadings_whose_norm_is_the_standard_error() -> None:
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 7, size=80)
    correct = rng.random((80, 4)) < [0.2, 0.5, 0.9, 1.0]  # the last cell is right on every image
    present = rng.random((80, 4)) < 0.9
    present[labels == 3, 1] = False  # a class the second cell never saw is not in its mean
    lin = balanced_accuracy_linear(correct, present, labels)
    for j in range(4):
        shown = present[:, j]
        assert lin.point[j] == pytest.approx(balanced_accuracy_score(
            labels[shown], np.where(correct[shown, j], labels[shown], -1)), abs=1e-12)
    assert np.sqrt((lin.loadings**2).sum(axis=0)) == pytest.approx(lin.se, abs=1e-12)
    assert np.all(lin.loadings[~present] == 0)
    assert lin.draws(np.zeros((3, 80))) == pytest.approx(np.tile(lin.point, (3, 1)), abs=1e-12)
    # every draw a valid rate; the all-right cell still has spread below 1 (the smoothing)
    d = lin.draws(multipliers(80, 20000, 3))
    assert d.min() >= 0 and d.max() <= 1 and d[:, 3].std() > 0
    for j in range(3):  # away from the boundary the draws' percentile interval is the closed form
        assert percentile_interval(d[:, j]) == pytest.approx(lin.intervals()[j], abs=0.06 * lin.se[j] + 1e-3)


def test_a_rate_over_images_is_smoothed_the_same_way() -> None:
    events = np.array([[1, 0], [0, 0], [1, 0], [0, 0], [0, 0]], dtype=bool)
    present = np.array([[1, 1], [1, 1], [1, 1], [1, 1], [0, 0]], dtype=bool)
    lin = rate_linear(events, present)
    smoothed = np.array([(2 + 2) / 8, (0 + 2) / 8])
    se = np.sqrt(smoothed * (1 - smoothed) / 4) + (1 / 4) / 2 / norm.ppf(0.975)
    assert lin.point == pytest.approx([0.5, 0.0]) and lin.se == pytest.approx(se, abs=1e-12)
    assert lin.intervals(0.95)[1] == pytest.approx((0.0, norm.ppf(0.975) * se[1]), abs=1e-12)  # no event: not [0, 0]


def test_multipliers_are_seeded_and_shared_read_only() -> None:
    a = shared_multipliers(30, 100, 4)
    assert a is shared_multipliers(30, 100, 4) and not a.flags.writeable
    np.testing.assert_array_equal(a, multipliers(30, 100, 4))
    assert not np.array_equal(a, multipliers(30, 100, 5))
    with pytest.raises(ValueError, match="resamples"):
        multipliers(30, 0)
    with pytest.raises(ValueError, match="no image"):
        balanced_accuracy_interval(np.zeros(0, dtype=bool), np.zeros(0, dtype=int))

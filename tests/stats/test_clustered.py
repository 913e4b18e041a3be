"""The image-clustered bootstrap and the paired tests of task outcomes, against brute force and scipy."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binomtest, norm

from domainbench.stats.bootstrap import bootstrap_weights, percentile_interval
from domainbench.stats.clustered import (
    cluster_bootstrap_weights,
    clustered_interval,
    clustered_mean_draws,
    paired_p_value,
    rate_interval,
)


def test_an_images_outcomes_move_together_and_singletons_are_the_plain_bootstrap() -> None:
    clusters = np.array([7, 7, 3, 9, 9, 9, 3])
    w = cluster_bootstrap_weights(clusters, resamples=200, seed=4)
    for c in np.unique(clusters):
        cols = w[:, clusters == c]
        assert (cols == cols[:, :1]).all()
    assert (w[:, [2, 0, 3]].sum(axis=1) == 3).all()  # three images drawn per resample
    np.testing.assert_array_equal(cluster_bootstrap_weights(np.arange(6), 50, 1), bootstrap_weights(6, None, 50, 1))


def test_weighted_mean_equals_explicit_resamples() -> None:
    rng = np.random.default_rng(0)
    clusters = rng.integers(0, 8, size=30)
    values = rng.random(30)
    values[[4, 11]] = np.nan  # questions without references: left out
    draws = clustered_mean_draws(values, clusters, resamples=300, seed=2)
    counts = bootstrap_weights(np.unique(clusters).size, None, 300, 2)  # per image, times drawn
    images = np.unique(clusters)
    for r in range(300):
        picked = np.concatenate([np.repeat(values[(clusters == img) & ~np.isnan(values)], int(counts[r, k]))
                                 for k, img in enumerate(images)])
        expected = picked.mean() if picked.size else np.nan
        assert draws[r] == pytest.approx(expected, nan_ok=True)


def test_duplicated_outcomes_get_the_interval_of_their_images() -> None:
    rng = np.random.default_rng(1)
    per_image = (rng.random(40) < 0.6).astype(float)
    clusters = np.repeat(np.arange(40), 5)
    values = np.repeat(per_image, 5)  # five identical answers per image: no more evidence than one
    clustered = clustered_interval(values, clusters, resamples=2000, seed=0)
    images_only = percentile_interval(bootstrap_weights(40, None, 2000, 0) @ per_image / 40)
    assert clustered == pytest.approx(images_only)
    naive = percentile_interval(bootstrap_weights(200, None, 2000, 0) @ values / 200)
    assert (clustered[1] - clustered[0]) > 1.8 * (naive[1] - naive[0])  # type: ignore[index]  # ≈ sqrt(5) wider
    assert clustered_interval(np.full(3, np.nan), np.arange(3)) is None


def test_rate_interval_is_the_corrected_wilson() -> None:
    from tests.oracles.score_interval import wilson_cc_by_root

    flags = np.array([1, 0, 0, 1, 1, 0, 0, 0], bool)
    assert rate_interval(flags, 0.9) == pytest.approx(wilson_cc_by_root(3, 8, 0.9), abs=1e-9)
    assert rate_interval(np.array([], bool)) is None


def test_paired_p_value_exact_mcnemar_and_clustered_sign_flip() -> None:
    a = np.array([1, 1, 1, 1, 1, 1, 0, 1, 0, 1, 1, 1], float)
    b = np.array([0, 0, 1, 0, 0, 1, 0, 1, 1, 0, 1, 0], float)
    # 6 only-A, 1 only-B: binomial test on 7 discordant pairs
    assert paired_p_value(a, b) == pytest.approx(binomtest(6, 7, 0.5).pvalue)
    a_nan = np.append(a, np.nan)
    assert paired_p_value(a_nan, np.append(b, 1.0)) == pytest.approx(binomtest(6, 7, 0.5).pvalue)
    # two questions per image: the image's difference flips as one, (|sum| - max|d|) / sqrt(sum d^2)
    clusters = np.repeat(np.arange(6), 2)
    d = np.bincount(clusters, weights=a - b)  # per image: 2, 1, 1, 0, 0, 1
    z = (abs(d.sum()) - np.abs(d).max()) / np.sqrt(np.sum(d ** 2))
    assert paired_p_value(a, b, clusters) == pytest.approx(2 * norm.sf(z))
    # fractional VQA accuracies, one per image: the sign-flip test on the differences
    fa, fb = np.array([1.0, 0.6, 0.9, 0.3]), np.array([0.3, 0.6, 0.0, 0.3])
    z = (0.7 + 0.9 - 0.9) / np.sqrt(0.49 + 0.81)
    assert paired_p_value(fa, fb) == pytest.approx(2 * norm.sf(z))
    assert paired_p_value(np.ones(3), np.ones(3)) == 1.0


def test_clustered_interval_keeps_its_coverage_where_a_per_question_interval_does_not() -> None:
    # five questions per image, whose chance of being right is the image's (Beta(1.2, 0.8), mean 0.6): the
    # questions of one image agree far more than chance, so only resampling images reflects the spread
    rng = np.random.default_rng(0)
    clusters = np.repeat(np.arange(40), 5)
    truth, sims = 0.6, 200
    hit_clustered = hit_per_question = 0
    for s in range(sims):
        y = (rng.random(200) < np.repeat(rng.beta(1.2, 0.8, size=40), 5)).astype(float)
        low, high = clustered_interval(y, clusters, resamples=1000, seed=s)  # type: ignore[misc]
        hit_clustered += low <= truth <= high
        low, high = rate_interval(y.astype(bool))  # type: ignore[misc]
        hit_per_question += low <= truth <= high
    assert hit_clustered / sims >= 0.91  # nominal 0.95 (binomial spread over 200 simulations: +-0.03)
    assert hit_per_question / sims <= 0.89 and hit_clustered - hit_per_question >= 0.05 * sims

"""Stability -> downstream accuracy: quantile bins, half/half regression, Table 7 Pearson."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from domainbench.errors import UserInputError
from domainbench.metrics.stability_link import (
    RadiusBin,
    accuracy_by_radius_quantile,
    accuracy_by_radius_quantile_per_corruption,
    drop_robustness_correlation,
    fit_accuracy_regression,
    fit_accuracy_regression_per_corruption,
    mean_by_corruption,
)


def _synthetic(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Correctness that gets rarer as the radius grows (the paper's Figure 5 trend)."""
    radius = rng.gamma(2.0, 0.05, size=n)
    correct = (rng.random(n) < np.clip(0.9 - 2.0 * radius, 0, 1)).astype(float)
    return radius, correct


def test_quantile_bins_match_pandas_qcut() -> None:
    rng = np.random.default_rng(0)
    radius, correct = _synthetic(rng, 1003)
    bins = accuracy_by_radius_quantile(radius, correct, n_bins=5)
    cats, edges = pd.qcut(radius, 5, duplicates="drop", retbins=True)
    ref = pd.DataFrame({"r": radius, "c": correct, "q": cats.codes}).groupby("q")
    assert len(bins) == 5
    for b, (code, grp) in zip(bins, ref):
        assert isinstance(b, RadiusBin)
        assert b.count == len(grp)
        assert b.accuracy == pytest.approx(grp["c"].mean(), abs=1e-12)
        assert b.mean_radius == pytest.approx(grp["r"].mean(), abs=1e-12)
        assert (b.bin_lo, b.bin_hi) == pytest.approx((edges[code], edges[code + 1]), abs=1e-15)
    assert sum(b.count for b in bins) == radius.size
    assert bins[0].bin_lo == radius.min() and bins[-1].bin_hi == radius.max()
    # Figure 5's trend: accuracy falls from the most to the least stable fifth.
    assert bins[0].accuracy > bins[-1].accuracy + 0.1


def test_quantile_bins_with_ties_merge_like_pandas() -> None:
    radius = np.array([0.0] * 8 + [0.1, 0.2, 0.3, 0.4])
    correct = np.array([1, 1, 1, 0, 1, 1, 1, 1, 0, 1, 0, 0], dtype=float)
    bins = accuracy_by_radius_quantile(radius, correct, n_bins=4)
    cats = pd.qcut(radius, 4, duplicates="drop")
    counts = pd.Series(cats).value_counts(sort=False).tolist()
    assert [b.count for b in bins] == counts
    assert bins[0].count == 9 and bins[0].accuracy == pytest.approx(7 / 9)
    one = accuracy_by_radius_quantile(np.full(4, 0.2), [1, 0, 1, 1], n_bins=3)
    assert one == [RadiusBin(0.2, 0.2, 0.2, 0.75, 4)]


def test_quantile_bins_per_corruption() -> None:
    rng = np.random.default_rng(1)
    r1, c1 = _synthetic(rng, 50)
    r2, c2 = _synthetic(rng, 70)
    names = np.array(["jpeg"] * 50 + ["fog"] * 70)
    out = accuracy_by_radius_quantile_per_corruption(
        np.concatenate([r1, r2]), np.concatenate([c1, c2]), names, n_bins=3
    )
    assert list(out) == ["jpeg", "fog"]
    assert out["fog"] == accuracy_by_radius_quantile(r2, c2, n_bins=3)
    assert sum(b.count for b in out["jpeg"]) == 50


def test_regression_half_split_against_polyfit() -> None:
    rng = np.random.default_rng(2)
    x = rng.uniform(0, 0.3, size=401)
    y = np.clip(0.85 - 1.5 * x + 0.02 * rng.normal(size=x.size), 0, 1)
    fit = fit_accuracy_regression(x, y, seed=5)
    train, test = fit.train_index, fit.test_index
    assert (fit.n_train, fit.n_test) == (200, 201)
    assert np.array_equal(np.sort(np.concatenate([train, test])), np.arange(x.size))
    slope, intercept = np.polyfit(x[train], y[train], 1)
    assert fit.slope == pytest.approx(slope, abs=1e-10)
    assert fit.intercept == pytest.approx(intercept, abs=1e-10)
    mse = np.mean((y[test] - (slope * x[test] + intercept)) ** 2)
    assert fit.mse == pytest.approx(mse, rel=1e-9)
    assert fit.slope == pytest.approx(-1.5, abs=0.05) and fit.mse < 1e-3
    again = fit_accuracy_regression(x, y, seed=5)
    assert np.array_equal(again.train_index, train) and again.mse == fit.mse
    other = fit_accuracy_regression(x, y, seed=6)
    assert not np.array_equal(other.train_index, train)


def test_regression_per_corruption() -> None:
    rng = np.random.default_rng(3)
    x = rng.uniform(0, 0.3, size=40)
    y = np.clip(0.9 - x, 0, 1)
    names = ["a", "b"] * 20
    out = fit_accuracy_regression_per_corruption(x, y, names, seed=1)
    assert list(out) == ["a", "b"]
    assert out["b"].mse == fit_accuracy_regression(x[1::2], y[1::2], seed=1).mse
    assert out["a"].slope == pytest.approx(-1.0, abs=1e-12)  # noiseless line: exact


def test_pearson_of_drop_and_robustness() -> None:
    # Accuracy drops of the paper's Table 2 (zero-shot, ImageNet) with made-up radii.
    drop = [3.3, 2.1, 1.1, 8.3, 4.9, 2.4, 7.0, 2.4, 9.4]
    radius = [0.084, 0.06, 0.05, 0.15, 0.11, 0.07, 0.12, 0.09, 0.16]
    res = drop_robustness_correlation(drop, radius)
    assert res is not None and res.n_corruptions == 9
    assert res.r == pytest.approx(np.corrcoef(drop, radius)[0, 1], abs=1e-12)
    assert 0 < res.p_value < 0.01
    names = ["jpeg", "bright", "contrast", "defocus", "elastic", "fog", "frost", "noise", "glass"]
    by_name = drop_robustness_correlation(
        dict(zip(names, drop)), dict(reversed(list(zip(names, radius))))
    )
    assert by_name is not None and by_name.r == pytest.approx(res.r, abs=1e-12)


def test_means_per_corruption_feed_the_correlation() -> None:
    rng = np.random.default_rng(4)
    names = rng.choice(["jpeg", "fog", "glass", "noise"], size=400)
    radius = rng.gamma(2.0, 0.05, size=400)
    acc_p = np.clip(0.9 - radius, 0, 1)
    means = mean_by_corruption(radius, names)
    assert list(means) == list(dict.fromkeys(names.tolist()))
    for c, m in means.items():
        assert m == pytest.approx(radius[names == c].mean(), abs=1e-15)
    drop = {c: 0.95 - a for c, a in mean_by_corruption(acc_p, names).items()}
    res = drop_robustness_correlation(drop, means)
    # drop = 0.05 + mean radius exactly: a perfect positive correlation.
    assert res is not None and res.r == pytest.approx(1.0, abs=1e-9)


def test_pearson_undefined_is_none() -> None:
    assert drop_robustness_correlation([1.0, 2.0], [0.1, 0.2]) is None
    assert drop_robustness_correlation([1.0, 2.0, 3.0], [0.1, 0.1, 0.1]) is None
    assert drop_robustness_correlation([2.0, 2.0, 2.0], [0.1, 0.2, 0.3]) is None


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: accuracy_by_radius_quantile([0.1, 0.2], [1.0]), "one value per image"),
        (lambda: accuracy_by_radius_quantile([0.1, np.nan], [1.0, 0.0]), "NaN"),
        (lambda: accuracy_by_radius_quantile([0.1, 0.2], [1.0, 2.0]), r"\[0, 1\]"),
        (lambda: accuracy_by_radius_quantile([0.1, 0.2], [1.0, 0.0], n_bins=0), "n_bins"),
        (lambda: accuracy_by_radius_quantile([], []), "empty"),
        (lambda: fit_accuracy_regression([0.1, 0.2, 0.3], [1, 0, 1]), "at least 4"),
        (lambda: drop_robustness_correlation({"a": 1.0}, [0.1]), "both as mappings"),
        (lambda: drop_robustness_correlation({"a": 1.0}, {"b": 0.1}), "different corruptions"),
        (lambda: drop_robustness_correlation([1.0, 2.0, 3.0], [0.1, 0.2]), "corruptions"),
        (
            lambda: accuracy_by_radius_quantile_per_corruption([0.1, 0.2], [1, 0], ["a"]),
            "one corruption name per image",
        ),
    ],
)
def test_bad_input(call, match: str) -> None:
    with pytest.raises(UserInputError, match=match):
        call()

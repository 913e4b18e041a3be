"""What embedding stability predicts (stability paper, Section 5 and Table 7).

Pure functions on per-image arrays for one (model, corruption):

- ``accuracy_by_radius_quantile``: accuracy under perturbation (ACC_p) in quantile groups of
  DivergenceRadius (the paper's Figures 5-6, as bins);
- ``fit_accuracy_regression``: a linear regression ACC_p ~ robustness fitted on one half of
  the images and evaluated (mean squared error) on the other half (Figures 10-11);
- ``mean_by_corruption``: run-level means per corruption (Figure 4);
- ``drop_robustness_correlation``: across corruptions, the Pearson correlation between the
  accuracy drop (ACC - mean ACC_p) and the mean robustness value (Table 7).

Per-image accuracy may be a 0/1 correctness or the paper's ACC_p of an image, the fraction
of its perturbed versions classified correctly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
from sklearn.linear_model import LinearRegression
from sklearn.metrics import mean_squared_error

from domainbench.errors import UserInputError

__all__ = [
    "AccuracyRegression",
    "DropCorrelation",
    "RadiusBin",
    "accuracy_by_radius_quantile",
    "accuracy_by_radius_quantile_per_corruption",
    "drop_robustness_correlation",
    "fit_accuracy_regression",
    "fit_accuracy_regression_per_corruption",
    "mean_by_corruption",
]


class StabilityLinkInputError(UserInputError):
    """Arrays that cannot be related (lengths, NaN, values out of range)."""


class RadiusBin(NamedTuple):
    """One quantile group: radii in (bin_lo, bin_hi] (the first bin also holds bin_lo)."""

    bin_lo: float
    bin_hi: float
    mean_radius: float
    accuracy: float
    count: int


@dataclass(frozen=True)
class AccuracyRegression:
    """ACC_p ~ slope * robustness + intercept, fitted on ``train_index``, scored on
    ``test_index`` (mean squared error ``mse``)."""

    slope: float
    intercept: float
    mse: float
    n_train: int
    n_test: int
    seed: int
    train_index: np.ndarray
    test_index: np.ndarray


@dataclass(frozen=True)
class DropCorrelation:
    """Pearson r (and two-sided p-value) between accuracy drop and mean robustness."""

    r: float
    p_value: float
    n_corruptions: int


def _vector(x: Any, name: str) -> np.ndarray:
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError):
        raise StabilityLinkInputError(f"{name}: expected a 1-D array of numbers") from None
    if arr.ndim != 1:
        raise StabilityLinkInputError(f"{name}: expected a 1-D array, got shape {arr.shape}")
    if arr.size == 0:
        raise StabilityLinkInputError(f"{name}: is empty; need at least one image")
    if not np.all(np.isfinite(arr)):
        bad = int(np.flatnonzero(~np.isfinite(arr))[0])
        raise StabilityLinkInputError(f"{name}: entry {bad} is NaN or inf")
    return arr


def _paired(radius: Any, accuracy: Any, rname: str, aname: str) -> tuple[np.ndarray, np.ndarray]:
    r, a = _vector(radius, rname), _vector(accuracy, aname)
    if r.shape != a.shape:
        raise StabilityLinkInputError(
            f"{rname} has {r.size} values but {aname} has {a.size}; pass one value per image"
        )
    if np.any((a < 0) | (a > 1)):
        raise StabilityLinkInputError(
            f"{aname}: per-image accuracy must lie in [0, 1] (0/1 correctness or the fraction "
            f"of perturbed versions classified correctly); got range [{a.min()}, {a.max()}]"
        )
    return r, a


def accuracy_by_radius_quantile(radius: Any, correct: Any, n_bins: int = 5) -> list[RadiusBin]:
    """Accuracy per quantile group of DivergenceRadius, lowest radii first.

    Edges are the radius quantiles at 0, 1/n_bins, ..., 1; repeated edges (ties) are
    merged, so fewer than ``n_bins`` groups come back when many radii are equal. Each
    group is (lo, hi] except the first, which also includes the minimum (as pandas.qcut).
    """
    if isinstance(n_bins, bool) or not isinstance(n_bins, (int, np.integer)) or n_bins < 1:
        raise StabilityLinkInputError(f"n_bins: expected an integer >= 1, got {n_bins!r}")
    r, acc = _paired(radius, correct, "radius", "correct")
    edges = np.unique(np.quantile(r, np.linspace(0.0, 1.0, n_bins + 1)))
    if edges.size == 1:
        return [RadiusBin(float(edges[0]), float(edges[0]), float(r.mean()), float(acc.mean()), r.size)]
    which = np.searchsorted(edges[1:-1], r, side="left")
    out: list[RadiusBin] = []
    for k in range(edges.size - 1):
        sel = which == k
        count = int(sel.sum())
        if count == 0:
            continue
        out.append(
            RadiusBin(
                float(edges[k]), float(edges[k + 1]), float(r[sel].mean()), float(acc[sel].mean()), count
            )
        )
    return out


def _groups(corruption: Any, size: int) -> tuple[np.ndarray, list[Any]]:
    labels = np.asarray(corruption)
    if labels.shape != (size,):
        raise StabilityLinkInputError(
            f"corruption has shape {labels.shape} but there are {size} images; "
            "pass one corruption name per image"
        )
    return labels, list(dict.fromkeys(labels.tolist()))


def accuracy_by_radius_quantile_per_corruption(
    radius: Any, correct: Any, corruption: Any, n_bins: int = 5
) -> dict[str, list[RadiusBin]]:
    """``accuracy_by_radius_quantile`` for each corruption name (in first-seen order)."""
    r, acc = _paired(radius, correct, "radius", "correct")
    labels, names = _groups(corruption, r.size)
    return {
        str(c): accuracy_by_radius_quantile(r[labels == c], acc[labels == c], n_bins) for c in names
    }


def fit_accuracy_regression(robustness: Any, accuracy: Any, seed: int = 0) -> AccuracyRegression:
    """Linear regression of per-image accuracy on robustness: fit on a random half of the
    images (chosen by ``seed``, reproducibly), mean squared error on the other half."""
    x, y = _paired(robustness, accuracy, "robustness", "accuracy")
    if x.size < 4:
        raise StabilityLinkInputError(
            f"robustness: need at least 4 images to fit on one half and test on the other, "
            f"got {x.size}"
        )
    perm = np.random.default_rng(seed).permutation(x.size)
    half = x.size // 2
    train, test = np.sort(perm[:half]), np.sort(perm[half:])
    model = LinearRegression().fit(x[train, None], y[train])
    mse = mean_squared_error(y[test], model.predict(x[test, None]))
    return AccuracyRegression(
        slope=float(model.coef_[0]),
        intercept=float(model.intercept_),
        mse=float(mse),
        n_train=int(train.size),
        n_test=int(test.size),
        seed=int(seed),
        train_index=train,
        test_index=test,
    )


def fit_accuracy_regression_per_corruption(
    robustness: Any, accuracy: Any, corruption: Any, seed: int = 0
) -> dict[str, AccuracyRegression]:
    """``fit_accuracy_regression`` for each corruption name (in first-seen order)."""
    x, y = _paired(robustness, accuracy, "robustness", "accuracy")
    labels, names = _groups(corruption, x.size)
    return {str(c): fit_accuracy_regression(x[labels == c], y[labels == c], seed) for c in names}


def mean_by_corruption(values: Any, corruption: Any) -> dict[str, float]:
    """Mean of a per-image value (a robustness metric, ACC_p) for each corruption name, in
    first-seen order: the run-level numbers of the paper's Figure 4 and Table 7 inputs."""
    v = _vector(values, "values")
    labels, names = _groups(corruption, v.size)
    return {str(c): float(v[labels == c].mean()) for c in names}


def _aligned(
    drop: Mapping[str, float] | Sequence[float] | np.ndarray,
    robustness: Mapping[str, float] | Sequence[float] | np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    if isinstance(drop, Mapping) != isinstance(robustness, Mapping):
        raise StabilityLinkInputError(
            "accuracy_drop and mean_robustness: pass both as mappings corruption -> value "
            "or both as arrays in the same corruption order"
        )
    if isinstance(drop, Mapping) and isinstance(robustness, Mapping):
        if set(drop) != set(robustness):
            missing = sorted(set(drop) ^ set(robustness))
            raise StabilityLinkInputError(
                f"accuracy_drop and mean_robustness name different corruptions: {missing}"
            )
        keys = list(drop)
        drop, robustness = [drop[k] for k in keys], [robustness[k] for k in keys]
    d, r = _vector(drop, "accuracy_drop"), _vector(robustness, "mean_robustness")
    if d.shape != r.shape:
        raise StabilityLinkInputError(
            f"accuracy_drop has {d.size} corruptions but mean_robustness has {r.size}"
        )
    return d, r


def drop_robustness_correlation(
    accuracy_drop: Mapping[str, float] | Sequence[float] | np.ndarray,
    mean_robustness: Mapping[str, float] | Sequence[float] | np.ndarray,
) -> DropCorrelation | None:
    """Pearson correlation across corruptions between ACC - mean ACC_p and the mean
    robustness value (the paper's Table 7).

    Returns None when the correlation is undefined: fewer than 3 corruptions (r = +-1 by
    construction with 2) or either side without variance.
    """
    d, r = _aligned(accuracy_drop, mean_robustness)
    if d.size < 3 or np.ptp(d) == 0 or np.ptp(r) == 0:
        return None
    from scipy.stats import pearsonr  # scipy.stats takes ~1 s to import: only where a correlation is asked for

    res = pearsonr(d, r)
    stat, p = float(res.statistic), float(res.pvalue)
    if not (np.isfinite(stat) and np.isfinite(p)):
        return None
    return DropCorrelation(r=stat, p_value=p, n_corruptions=int(d.size))

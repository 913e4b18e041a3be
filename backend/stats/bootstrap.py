"""Percentile bootstrap over images, stratified by class, vectorised over resamples.

A resample is a vector of counts (how often each image is drawn); drawing n_c images with
replacement from a class of n_c images is a Multinomial(n_c, uniform) count vector, so all
resamples come from one ``Generator.multinomial`` call per class and no Python loop runs per
resample. Any statistic that is a weighted sum over images (accuracies, flip rates, means
of per-image values) is then a matrix product of the (resamples x images) count matrix. The
same counts are used for every model and cell, which keeps the bootstrap *paired*: the
images of a resample are the same images for every model.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

from typing import TYPE_CHECKING

import numpy as np

from domainbench.stats.intervals import DEFAULT_CONFIDENCE, check_confidence

if TYPE_CHECKING:
    import scipy.sparse as sp

DEFAULT_RESAMPLES = 2000
DEFAULT_SEED = 0
MIN_RESAMPLES = 1000


def _strata(strata: np.ndarray | None, n: int) -> np.ndarray:
    if strata is None:
        return np.zeros(n, dtype=np.int64)
    s = np.asarray(strata)
    if s.shape != (n,):
        raise ValueError(f"strata must have one entry per image ({n}), got shape {s.shape}")
    return s


def bootstrap_weights(n: int, strata: np.ndarray | None = None, resamples: int = DEFAULT_RESAMPLES,
                      seed: int = DEFAULT_SEED) -> np.ndarray:
    """(resamples, n) draw counts: each row resamples every stratum's images with replacement.

    Each stratum (class) keeps its size in every resample, so class balance is that of the
    sample. Reproducible under ``seed``: the strata are visited in sorted order.
    """
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples}")
    s = _strata(strata, n)
    rng = np.random.default_rng(seed)
    w = np.zeros((resamples, n), dtype=np.float64)
    for value in np.unique(s):
        members = np.flatnonzero(s == value)
        k = members.size
        w[:, members] = rng.multinomial(k, np.full(k, 1.0 / k), size=resamples)
    return w


def shared_bootstrap_weights(n: int, strata: np.ndarray | None = None, resamples: int = DEFAULT_RESAMPLES,
                             seed: int = DEFAULT_SEED) -> np.ndarray:
    """:func:`bootstrap_weights`, made once for the callers that ask for the same ones and returned read-only: a
    run's intervals, its resamples on Compare and its paired tests draw the same rows of the same images, and
    runs on the same images share them."""
    key = None if strata is None else np.ascontiguousarray(strata, dtype=np.int64).tobytes()
    return _shared_weights(n, key, resamples, seed)


@lru_cache(maxsize=4)
def _shared_weights(n: int, strata: bytes | None, resamples: int, seed: int) -> np.ndarray:
    w = bootstrap_weights(n, None if strata is None else np.frombuffer(strata, dtype=np.int64), resamples, seed)
    w.flags.writeable = False
    return w


def stratified_bootstrap(statistic: Callable[[np.ndarray], np.ndarray], n: int, strata: np.ndarray | None = None,
                         resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED) -> np.ndarray:
    """The statistic over ``resamples`` stratified resamples: ``statistic(weights)`` maps the
    (resamples, n) count matrix to (resamples,) values (nan where undefined)."""
    values = np.asarray(statistic(bootstrap_weights(n, strata, resamples, seed)), dtype=float)
    if values.shape != (resamples,):
        raise ValueError(f"statistic must return one value per resample ({resamples}), got shape {values.shape}")
    return values


def percentile_interval(values: np.ndarray, confidence: float = DEFAULT_CONFIDENCE) -> tuple[float, float] | None:
    """The (alpha/2, 1 - alpha/2) quantiles of the bootstrap values; resamples where the
    statistic is undefined (nan) are left out, and None is returned when all are."""
    alpha = 1.0 - check_confidence(confidence)
    v = np.asarray(values, dtype=float)
    v = v[~np.isnan(v)]
    if v.size == 0:
        return None
    low, high = np.quantile(v, [alpha / 2, 1 - alpha / 2])
    return float(low), float(high)


def mean_draws(parts: list[np.ndarray] | tuple[np.ndarray, ...]) -> np.ndarray:
    """Per resample, the mean of the parts defined there: ``parts`` are (resamples,) values of the numbers a
    mean averages (nan where one is undefined in a resample, which leaves it out of that resample's mean, as
    the point estimate leaves an undefined term out); nan where none is defined."""
    terms = np.stack([np.asarray(p, dtype=float) for p in parts])
    defined = ~np.isnan(terms)
    count = defined.sum(axis=0)
    total = np.where(defined, terms, 0.0).sum(axis=0)
    return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def class_indicator(labels: np.ndarray) -> tuple[sp.csr_matrix, np.ndarray]:
    """Sparse (n, classes present) one-hot of ``labels`` and the class sizes."""
    import scipy.sparse as sp  # ~0.5 s to import: only the breaking point's intervals use it, never `show`

    y = np.asarray(labels)
    present, codes = np.unique(y, return_inverse=True)
    n = y.size
    onehot = sp.csr_matrix((np.ones(n), (np.arange(n), codes)), shape=(n, present.size))
    return onehot, np.bincount(codes, minlength=present.size).astype(float)


def balanced_accuracy_weighted(correct: np.ndarray, labels: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Balanced accuracy under each row of draw counts: mean over the classes present of the
    weighted share of the class's images that are correct. ``weights``: (resamples, n)."""
    onehot, _ = class_indicator(labels)
    w = np.atleast_2d(weights)
    hits = np.asarray((onehot.T @ (w * np.asarray(correct, dtype=float)).T).T)  # (resamples, classes)
    support = np.asarray((onehot.T @ w.T).T)
    with np.errstate(invalid="ignore", divide="ignore"):
        recall = hits / support
    # a class drawn zero times (possible only without stratification) is not in the mean
    return np.nanmean(np.where(support > 0, recall, np.nan), axis=1)


def balanced_accuracies_weighted(correct: np.ndarray, present: np.ndarray, labels: np.ndarray,
                                 weights: np.ndarray) -> np.ndarray:
    """:func:`balanced_accuracy_weighted` of K cells on the same images at once: ``correct`` and ``present``
    are (n, K) (an image a cell did not evaluate is not present there and weighs 0), ``weights`` (resamples, n);
    returns (resamples, K). One dense product per class (draw counts of its images × its images' cells), so
    no Python loop runs per cell or resample and no (n, classes) matrix is formed per cell."""
    y = np.asarray(labels)
    w = np.atleast_2d(weights)
    ok = np.asarray(correct, dtype=float) * np.asarray(present, dtype=float)
    shown = np.asarray(present, dtype=float)
    total = np.zeros((w.shape[0], ok.shape[1]))
    count = np.zeros_like(total)
    for value in np.unique(y):
        members = np.flatnonzero(y == value)
        wc = w[:, members]
        support = wc @ shown[members]
        defined = support > 0  # a class none of whose images was drawn (or evaluated) is not in the mean
        total += np.where(defined, (wc @ ok[members]) / np.where(defined, support, 1.0), 0.0)
        count += defined
    with np.errstate(invalid="ignore"):
        return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def paired_balanced_accuracy_difference(
    correct_a: np.ndarray, correct_b: np.ndarray, labels: np.ndarray, confidence: float = DEFAULT_CONFIDENCE,
    resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED,
) -> tuple[float, float, float]:
    """Balanced accuracy of A minus that of B on the same images, and its paired percentile
    bootstrap interval (both models see the same resampled images): (difference, low, high)."""
    a = np.asarray(correct_a, dtype=float)
    b = np.asarray(correct_b, dtype=float)
    y = np.asarray(labels)
    if not a.shape == b.shape == y.shape or a.ndim != 1:
        raise ValueError(f"correct_a, correct_b and labels must be equal-length 1-d arrays, got "
                         f"{a.shape}, {b.shape}, {y.shape}")
    ones = np.ones((1, a.size))
    point = float(balanced_accuracy_weighted(a, y, ones)[0] - balanced_accuracy_weighted(b, y, ones)[0])
    w = bootstrap_weights(a.size, y, resamples, seed)
    diffs = balanced_accuracy_weighted(a - b, y, w)  # linear in the correctness bits
    interval = percentile_interval(diffs, confidence)
    assert interval is not None  # every resample keeps every class, so no value is undefined
    return point, interval[0], interval[1]

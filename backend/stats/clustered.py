"""Intervals and paired tests when several outcomes share an image (VQA questions, retrieval captions).

Questions about one image are not independent: a corruption that ruins the image ruins all of them. A
bootstrap that resamples questions would treat an image's ten questions as ten images' worth of evidence,
and its interval would be too narrow. The clustered bootstrap resamples *images* (with replacement, as
``bootstrap_weights`` draws them) and every outcome of a drawn image comes along with it: an outcome's weight
in a resample is the number of times its image was drawn. A statistic that is a mean over outcomes is then
the weighted mean per resample (a ratio estimator, since resamples hold different numbers of outcomes).

Paired tests between two models on the same questions: with one binary outcome per image, the exact
McNemar test (``stats.paired.mcnemar_exact``); with several outcomes per image or fractional scores (VQA
accuracy with ten references), the sign-flip test of ``stats.paired.sign_flip_test`` on the per-image sums of
the differences, which flips the sign of a whole image's difference at once (valid when the two models are
exchangeable on every image, whatever the dependence between an image's questions).
"""

from __future__ import annotations

import numpy as np

from domainbench.stats.bootstrap import DEFAULT_RESAMPLES, DEFAULT_SEED, bootstrap_weights, percentile_interval
from domainbench.stats.intervals import DEFAULT_CONFIDENCE, proportion_interval
from domainbench.stats.paired import mcnemar_exact, sign_flip_test


def _codes(clusters: np.ndarray) -> tuple[np.ndarray, int]:
    c = np.asarray(clusters)
    if c.ndim != 1:
        raise ValueError(f"clusters must be one label per outcome, got shape {c.shape}")
    present, codes = np.unique(c, return_inverse=True)
    return codes.astype(np.int64), present.size


def cluster_bootstrap_weights(clusters: np.ndarray, resamples: int = DEFAULT_RESAMPLES,
                              seed: int = DEFAULT_SEED) -> np.ndarray:
    """(resamples, outcomes) weights: per resample, how often each outcome's cluster (image) was drawn.

    The clusters are drawn as ``bootstrap_weights`` draws images (in sorted order of their labels), so with one
    outcome per cluster this is exactly the unclustered bootstrap of the same seed.
    """
    codes, k = _codes(clusters)
    return bootstrap_weights(k, None, resamples, seed)[:, codes]


def clustered_mean_draws(values: np.ndarray, clusters: np.ndarray, resamples: int = DEFAULT_RESAMPLES,
                         seed: int = DEFAULT_SEED) -> np.ndarray:
    """(resamples,) weighted means of ``values`` under the cluster bootstrap; nan values (undefined outcomes,
    such as questions without references) are left out, and a resample with none defined is nan."""
    v = np.asarray(values, dtype=float)
    w = cluster_bootstrap_weights(clusters, resamples, seed)
    if w.shape[1] != v.size:
        raise ValueError(f"need one cluster label per value ({v.size}), got {w.shape[1]}")
    defined = ~np.isnan(v)
    w = w[:, defined]
    total = w.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, w @ v[defined] / total, np.nan)


def clustered_interval(values: np.ndarray, clusters: np.ndarray, confidence: float = DEFAULT_CONFIDENCE,
                       resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED) -> tuple[float, float] | None:
    """Percentile interval of the mean of ``values`` by the cluster bootstrap (None when no value is defined)."""
    if not np.any(~np.isnan(np.asarray(values, dtype=float))):
        return None
    return percentile_interval(clustered_mean_draws(values, clusters, resamples, seed), confidence)


def rate_interval(flags: np.ndarray, confidence: float = DEFAULT_CONFIDENCE) -> tuple[float, float] | None:
    """Wilson interval of the share of True among ``flags`` (None when empty)."""
    f = np.asarray(flags, dtype=bool)
    return proportion_interval(int(f.sum()), int(f.size), confidence)


def paired_p_value(a: np.ndarray, b: np.ndarray, clusters: np.ndarray | None = None) -> float:
    """Two-sided p-value that models A and B do equally well on the same outcomes (module docstring).

    ``a``, ``b``: per outcome, 1/0 (right, or flipped) or a fractional score; nan outcomes are left out.
    Binary outcomes with at most one per cluster get the exact McNemar test; otherwise the per-cluster sums of
    a - b go to the sign-flip test.
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"a and b need the same flat shape, got {a.shape} and {b.shape}")
    keep = ~(np.isnan(a) | np.isnan(b))
    a, b = a[keep], b[keep]
    codes = np.arange(a.size) if clusters is None else _codes(np.asarray(clusters)[keep])[0]
    binary = bool(np.all(np.isin(a, (0.0, 1.0))) and np.all(np.isin(b, (0.0, 1.0))))
    if binary and np.unique(codes).size == codes.size:
        return mcnemar_exact(int(np.sum((a == 1) & (b == 0))), int(np.sum((a == 0) & (b == 1))))
    return sign_flip_test(np.bincount(codes, weights=a - b))


__all__ = [
    "cluster_bootstrap_weights",
    "clustered_interval",
    "clustered_mean_draws",
    "paired_p_value",
    "rate_interval",
]

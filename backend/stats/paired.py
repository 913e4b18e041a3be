"""Paired comparison of two models on the same images: exact McNemar, Holm, sample size."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from domainbench.stats.kernels import binom_half_cdf, normal_cdf, normal_ppf


def mcnemar_exact(a_only: int, b_only: int) -> float:
    """Two-sided exact McNemar p-value: a binomial test of a_only among the discordant images at 1/2.

    ``a_only``: images model A gets right and B wrong; ``b_only``: the reverse. Images both get
    right or both get wrong carry no information about which model is better. With no
    discordant image the p-value is 1.
    """
    if a_only < 0 or b_only < 0:
        raise ValueError(f"discordant counts must be >= 0, got a_only={a_only}, b_only={b_only}")
    n = a_only + b_only
    if n == 0:
        return 1.0
    # the null distribution is symmetric, so the two-sided p is twice the smaller tail
    return float(min(1.0, 2.0 * binom_half_cdf(min(a_only, b_only), n)))


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (family-wise error control, any dependence).

    The i-th smallest p (0-based) is multiplied by (m - i); adjusted values are made monotone
    by a running maximum and capped at 1. Reject H_j at level alpha when adjusted p_j <= alpha.
    """
    p = np.asarray(p_values, dtype=float)
    if p.ndim != 1:
        raise ValueError("holm takes a flat list of p-values")
    m = p.size
    if m == 0:
        return []
    if np.any((p < 0) | (p > 1) | np.isnan(p)):
        raise ValueError("p-values must lie in [0, 1]")
    order = np.argsort(p, kind="stable")
    scaled = p[order] * (m - np.arange(m))
    adjusted = np.minimum(np.maximum.accumulate(scaled), 1.0)
    out = np.empty(m)
    out[order] = adjusted
    return out.tolist()


def paired_sample_size(discordance: float, difference: float = 0.03, alpha: float = 0.05,
                       power: float = 0.8) -> int:
    """Images a paired (McNemar) test needs to detect ``difference`` in accuracy with ``power``.

    Connor's (1987) normal approximation, n = (z_{a/2} sqrt(d) + z_b sqrt(d - delta^2))^2 / delta^2,
    where d is the share of discordant images (observed) and delta the difference to resolve.
    The discordance cannot be smaller than the difference, so d is raised to |delta| if needed.
    """
    if not 0 < abs(difference) < 1:
        raise ValueError(f"difference must lie in (0, 1), got {difference}")
    delta = abs(difference)
    d = min(1.0, max(float(discordance), delta))
    za = normal_ppf(1 - alpha / 2)
    zb = normal_ppf(power)
    n = (za * math.sqrt(d) + zb * math.sqrt(max(d - delta * delta, 0.0))) ** 2 / (delta * delta)
    return int(math.ceil(n))


def sign_flip_test(contributions: np.ndarray) -> float:
    """Two-sided p-value that a sum of per-image paired contributions is 0, by the sign-flip (randomisation) null.

    ``contributions``: per image, its share of a difference between two models measured on the same images
    (for balanced accuracy, (A right - B right) / (classes x the image's class size), averaged over the cells
    the difference averages). If the two models are exchangeable on every image, each contribution is as
    likely to have either sign whatever its size, so the sum's null variance is the sum of the squared
    contributions, known exactly from the data: no class has to supply a spread of its own, which is why the
    test holds with one image per class where a class-stratified bootstrap does not. Under the weaker null of
    equal expected difference it stays valid (the squared contributions then over-estimate the variance).
    The z statistic takes off the largest contribution as a continuity correction; with equal contributions
    this is McNemar's test with Edwards' correction, which is conservative against the exact binomial in the
    tails a Holm adjustment uses.
    """
    d = np.asarray(contributions, dtype=float).ravel()
    d = d[d != 0]
    if d.size == 0:
        return 1.0
    z = max(0.0, abs(float(d.sum())) - float(np.abs(d).max())) / math.sqrt(float(np.sum(d * d)))
    return min(1.0, 2.0 * normal_cdf(-z))


def sign_flip_sample_size(second_moment: float, difference: float, alpha: float = 0.05, power: float = 0.8) -> int:
    """Images (in all) for which :func:`sign_flip_test` at level ``alpha`` detects ``difference`` with ``power``.

    ``second_moment``: the mean over images of the squared per-image difference (class-balanced, so that the
    test's null variance at N images is second_moment / N; with one cell it is the share of discordant images).
    With per-image contributions d_i / N, the test rejects when |T| - 1/N > z_a sqrt(s / N), T ~ N(delta,
    (s - delta^2) / N); solving delta sqrt(N) - 1/sqrt(N) = z_a sqrt(s) + z_b sqrt(s - delta^2) for sqrt(N)
    gives the closed form below (without the correction term it is Connor's McNemar sample size).
    """
    if not 0 < abs(difference) < 1:
        raise ValueError(f"difference must lie in (0, 1), got {difference}")
    if not 0 < alpha < 1 or not 0 < power < 1:
        raise ValueError(f"alpha and power must lie in (0, 1), got {alpha}, {power}")
    delta = abs(difference)
    s = min(1.0, max(float(second_moment), delta * delta))
    b = normal_ppf(1 - alpha / 2) * math.sqrt(s) + normal_ppf(power) * math.sqrt(max(s - delta * delta, 0.0))
    root = (b + math.sqrt(b * b + 4 * delta)) / (2 * delta)
    return int(math.ceil(root * root))

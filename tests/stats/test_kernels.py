"""The standard-library kernels that replaced scipy.special on the read path equal scipy's over a grid to 1e-12."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy.special import ndtr, ndtri
from scipy.stats import binom

from domainbench.stats.kernels import EXACT_TOP_MAX_N, binom_half_cdf, normal_cdf, normal_ppf


def test_normal_cdf_is_scipys_ndtr_over_a_grid() -> None:
    x = np.concatenate([np.linspace(-37.5, 37.5, 30_001), [0.0, -0.0, 1e-300, -1e-12, 0.7071, -1.0, 1.0]])
    ours = np.array([normal_cdf(float(v)) for v in x])
    ref = ndtr(x)
    # relative where the value is a tail probability (scipy itself holds ~1e-13 there), absolute near 1
    assert np.max(np.abs(ours - ref) / np.maximum(ref, 1e-300)) < 1e-12
    assert normal_cdf(0.0) == 0.5 and normal_cdf(-40.0) == pytest.approx(float(ndtr(-40.0)), rel=1e-12, abs=1e-320)


def test_normal_ppf_is_scipys_ndtri_over_a_grid() -> None:
    p = np.concatenate([np.linspace(1e-9, 1 - 1e-9, 20_001), [1e-300, 1e-15, 0.5, 0.975, 0.995, 0.8, 1 - 1e-15]])
    ours = np.array([normal_ppf(float(v)) for v in p])
    assert np.max(np.abs(ours - ndtri(p)) / np.maximum(np.abs(ndtri(p)), 1.0)) < 1e-12
    assert normal_ppf(0.5) == 0.0
    with pytest.raises(Exception):
        normal_ppf(1.0)


def test_binom_half_cdf_is_exact_for_small_n() -> None:
    # the exact tail as a fraction of integers: the float is its correct rounding up to a few ulps
    for n in range(0, 120):
        for k in range(n + 1):
            exact = Fraction(sum(math.comb(n, i) for i in range(k + 1)), 2 ** n)
            assert abs(Fraction(binom_half_cdf(k, n)) - exact) <= exact * Fraction(1, 10 ** 15), (k, n)


@pytest.mark.parametrize("n", [1, 2, 7, 50, 299, 1000, 1001, 4999, EXACT_TOP_MAX_N, EXACT_TOP_MAX_N + 1, 100_001])
def test_binom_half_cdf_is_scipys_binom_cdf(n: int) -> None:
    ks = np.unique(np.linspace(0, n, min(n + 1, 301)).astype(int))
    ours = np.array([binom_half_cdf(int(k), n) for k in ks])
    ref = binom.cdf(ks, n, 0.5)
    seen = ref > 1e-290  # below, both are denormal or zero
    assert np.max(np.abs(ours[seen] - ref[seen]) / ref[seen]) < 1e-12
    assert np.all(ours[~seen] < 1e-280)


def test_binom_half_cdf_edges() -> None:
    assert binom_half_cdf(0, 0) == 1.0 and binom_half_cdf(3, 3) == 1.0 and binom_half_cdf(0, 5) == 1 / 32
    with pytest.raises(ValueError):
        binom_half_cdf(-1, 4)

"""The three distribution kernels the read path needs, from the standard library instead of ``scipy.special``.

Importing ``scipy.special`` took 0.5-0.7 s on the 2-core build machine (its array-API layer imports
``numpy.f2py`` and wraps every ufunc), more than half of what ``domainbench show`` spent in all (issue 43), for
three scalar functions. Each one below is checked against scipy over a grid to 1e-12 (``tests/stats/test_kernels.py``):

- :func:`normal_cdf`: Φ(x), scipy's ``ndtr``, written the way its Cephes kernel is (erf near 0, erfc in the tails)
  on the C library's ``erf`` / ``erfc``;
- :func:`normal_ppf`: Φ⁻¹(p), scipy's ``ndtri``: ``statistics.NormalDist.inv_cdf`` (Wichura's AS 241, ~1e-16);
- :func:`binom_half_cdf`: P(X <= k) for X ~ Binomial(n, 1/2), the exact McNemar test's tail: the largest term
  C(n, k) / 2^n exactly (integers), times the sum of the ratios down to C(n, 0). Past ``EXACT_TOP_MAX_N``
  discordant images the exact C(n, k) costs more than scipy's import (it grows as n²: 60 ms at n = 20,000,
  0.23 s at 50,000), so scipy's kernel is used there; a cell that large is read in seconds anyway.
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np

_STANDARD = NormalDist()
_SQRT1_2 = math.sqrt(0.5)
#: bits of C(n, k) kept when it is scaled into a float: its rounding is then far below the float's own
_MANTISSA_BITS = 62
#: above this n, binom_half_cdf asks scipy (see the module's docstring)
EXACT_TOP_MAX_N = 20_000


def normal_cdf(x: float) -> float:
    """Φ(x), the standard normal distribution function (scipy.special.ndtr)."""
    t = x * _SQRT1_2
    if abs(t) < _SQRT1_2:
        return 0.5 + 0.5 * math.erf(t)
    # the tail by erfc: 1 - erf would lose every digit of a small tail probability
    tail = 0.5 * math.erfc(abs(t))
    return 1.0 - tail if t > 0 else tail


def normal_ppf(p: float) -> float:
    """Φ⁻¹(p) for 0 < p < 1 (scipy.special.ndtri)."""
    return _STANDARD.inv_cdf(p)


def binom_half_cdf(k: int, n: int) -> float:
    """P(X <= k) for X ~ Binomial(n, 1/2) (scipy.stats.binom.cdf(k, n, 0.5)), to ~1e-13 relative at any n.

    Below the median the terms C(n, i) grow with i, so the tail is C(n, k) (1 + r_k + r_k r_{k-1} + ...) with
    r_i = i / (n - i + 1) < 1: the leading term exactly from integers (no cancellation, no overflow: it is scaled
    to a float by its bit length), the ratios' running products summed in floats. Above the median, the
    complement by symmetry (X and n - X have one distribution).
    """
    if n < 0 or k < 0:
        raise ValueError(f"need n >= 0 and k >= 0, got k={k}, n={n}")
    if k >= n:
        return 1.0
    if 2 * k > n:
        return 1.0 - binom_half_cdf(n - k - 1, n)
    if n > EXACT_TOP_MAX_N:
        from scipy.special import _ufuncs  # scipy.stats.binom.cdf's own kernel, without importing scipy.stats

        kernel = getattr(_ufuncs, "_binom_cdf", None)
        if kernel is None:  # scipy moved it: scipy.stats then
            from scipy.stats import binom

            return float(binom.cdf(k, n, 0.5))
        return float(kernel(k, n, 0.5))
    top = math.comb(n, k)
    i = np.arange(k, 0, -1, dtype=float)
    ratios = float(np.cumprod(i / (n - i + 1.0)).sum()) if k else 0.0
    shift = max(0, top.bit_length() - _MANTISSA_BITS)
    return math.ldexp(float(top >> shift) * (1.0 + ratios), shift - n)

"""Test oracle: the continuity-corrected Wilson interval by root-finding on the corrected score test itself.

Independent of :func:`domainbench.stats.proportion_interval`'s closed form (no algebra shared): each end is
where |k − np| − 1/2 = z·sqrt(np(1 − p)) on its side of k/n, found by scipy's brentq. statsmodels'
``proportion_confint`` has no continuity-corrected Wilson, so this replaces it as the reference.
"""

from __future__ import annotations

import math

from scipy.optimize import brentq
from scipy.stats import norm


def wilson_cc_by_root(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    z = float(norm.ppf(0.5 + confidence / 2))

    def excess(p: float) -> float:  # > 0 where the corrected score test rejects p
        return abs(k - n * p) - 0.5 - z * math.sqrt(n * p * (1 - p))

    tiny = 1e-15
    p_hat = k / n
    low = 0.0 if k == 0 or excess(tiny) <= 0 else brentq(excess, tiny, max(p_hat - 0.5 / n, tiny), xtol=1e-14)
    high = 1.0 if k == n or excess(1 - tiny) <= 0 else brentq(excess, min(p_hat + 0.5 / n, 1 - tiny), 1 - tiny, xtol=1e-14)
    return low, high

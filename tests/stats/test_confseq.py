from __future__ import annotations

import numpy as np
import pytest

from domainbench.stats.confseq import betting_cs, coverage_simulation, log_capital, paired_difference_cs


def test_anytime_coverage_at_least_nominal() -> None:
    """Small version of benchmarks/adaptive.py's simulation: every step of every stream counts."""
    cov = coverage_simulation([0.1, 0.5, 0.85], streams=600, length=200, confidence=0.9, seed=2)
    assert all(c >= 0.9 for c in cov.values()), cov


def test_capital_by_a_plain_loop() -> None:
    """The hedged capital process, step by step, as written in Waudby-Smith & Ramdas (PrPl bets)."""
    rng = np.random.default_rng(0)
    x = (rng.random(60) < 0.7).astype(float)
    alpha, m = 0.05, 0.55
    up = down = 1.0
    best = -np.inf
    s, sq = 0.0, 0.0
    for t, xi in enumerate(x, start=1):
        var_prev = (0.25 + sq) / t  # sigma^2_{t-1}: (1/4 + sum_{i<t} (x_i - mu_i)^2) / t
        lam = np.sqrt(2 * np.log(2 / alpha) / (var_prev * t * np.log(t + 1)))
        up *= 1 + min(lam, 0.5 / m) * (xi - m)
        down *= 1 - min(lam, 0.5 / (1 - m)) * (xi - m)
        best = max(best, np.log(0.5 * up + 0.5 * down))
        s += xi
        mu = (0.5 + s) / (t + 1)
        sq += (xi - mu) ** 2
    assert log_capital(x, m, alpha)[0] == pytest.approx(best, abs=1e-9)


def test_interval_shrinks_and_holds_the_mean() -> None:
    rng = np.random.default_rng(5)
    x = (rng.random(2000) < 0.3).astype(float)
    lo1, hi1 = betting_cs(x[:100])
    lo2, hi2 = betting_cs(x)
    assert lo2 <= 0.3 <= hi2 and hi2 - lo2 < hi1 - lo1 < 0.45
    assert hi2 - lo2 < 0.1  # wider than Wilson (0.04 here): the price of validity at every step
    # a paired difference of +0.2 on 400 images is decided (0 excluded), one of 0 is not
    a = (rng.random(400) < 0.8).astype(float)
    b = np.where(rng.random(400) < 0.25, 0.0, a)
    lo, hi = paired_difference_cs(a, b)
    assert lo > 0
    lo, hi = paired_difference_cs(a, a)
    assert lo < 0 < hi
    with pytest.raises(ValueError):
        betting_cs(np.array([1.5]))


def test_anytime_p_value_is_the_paired_sequence_excluding_zero() -> None:
    from domainbench.stats.confseq import anytime_p_value

    rng = np.random.default_rng(2)
    agree = 0
    for shift in (0.0, 0.05, 0.1, 0.2, 0.3):
        for _ in range(20):
            a = (rng.random(300) < 0.6 + shift).astype(float)
            b = (rng.random(300) < 0.6).astype(float)
            p = anytime_p_value((a - b + 1) / 2)
            low, high = paired_difference_cs(a, b)
            # the sequence is widened by one grid step, so it may keep 0 a hair longer than the test
            if (p < 0.05) == (low > 0 or high < 0) or abs(p - 0.05) < 0.01:
                agree += 1
    assert agree == 100
    # under the null, the sup-capital p-value is valid however the stream is stopped: at most 5 % ever below 0.05
    x = (rng.random((2000, 400)) < 0.5).astype(float)
    ever = np.mean([anytime_p_value(row) < 0.05 for row in x])
    assert ever <= 0.05 + 2 * np.sqrt(0.05 * 0.95 / 2000)
    assert anytime_p_value(np.array([])) == 1.0

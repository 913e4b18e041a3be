from __future__ import annotations

import math

import pytest
import numpy as np
from scipy.stats import binomtest, norm

from domainbench.errors import UserInputError
from domainbench.stats import check_confidence, proportion_interval, wilson_interval
from tests.oracles.score_interval import wilson_cc_by_root

CASES = [(0, 1), (1, 1), (0, 20), (20, 20), (1, 20), (7, 13), (61, 100), (599, 1000), (3, 5000), (4999, 5000)]


@pytest.mark.parametrize("confidence", [0.5, 0.8, 0.95, 0.99, 0.999])
@pytest.mark.parametrize(("k", "n"), CASES)
def test_wilson_matches_scipy(k: int, n: int, confidence: float) -> None:
    ref = binomtest(k, n).proportion_ci(confidence_level=confidence, method="wilson")
    low, high = wilson_interval(k, n, confidence)
    assert low == pytest.approx(ref.low, abs=1e-9)
    assert high == pytest.approx(ref.high, abs=1e-9)


def test_wilson_hand_worked_case() -> None:
    # 8 of 10 at 95 %: centre (0.8 + z²/20) / (1 + z²/10), half-width z/(1 + z²/10) * sqrt(0.016 + z²/400)
    z = 1.959963984540054
    centre = (0.8 + z * z / 20) / (1 + z * z / 10)
    half = z / (1 + z * z / 10) * math.sqrt(0.016 + z * z / 400)
    assert wilson_interval(8, 10) == pytest.approx((centre - half, centre + half), abs=1e-12)
    assert wilson_interval(8, 10) == pytest.approx((0.4901625, 0.9433178), abs=1e-6)


def test_wilson_narrows_with_more_data_and_no_data_gives_none() -> None:
    w1 = wilson_interval(30, 50)
    w2 = wilson_interval(300, 500)
    assert w1 is not None and w2 is not None
    assert w2[1] - w2[0] < w1[1] - w1[0]
    assert wilson_interval(0, 0) is None
    with pytest.raises(ValueError):
        wilson_interval(6, 5)


@pytest.mark.parametrize("bad", [0, 1, -0.5, 1.5, float("nan"), "x"])
def test_confidence_outside_unit_interval_is_a_user_error(bad: object) -> None:
    with pytest.raises(UserInputError, match="--confidence"):
        check_confidence(bad)  # type: ignore[arg-type]
    assert check_confidence("0.9") == 0.9  # type: ignore[arg-type]


def _cc_score_rejects(p: float, k: int, n: int, z: float) -> bool:
    """The score test with Yates' continuity correction, written straight from its definition."""
    return abs(k - n * p) - 0.5 > z * math.sqrt(n * p * (1 - p))


@pytest.mark.parametrize("confidence", [0.8, 0.95, 0.99])
@pytest.mark.parametrize(("k", "n"), CASES)
def test_continuity_corrected_wilson_inverts_the_corrected_score_test(k: int, n: int, confidence: float) -> None:
    """Each end is the root of |k − np| − 1/2 = z·sqrt(np(1 − p)) on its side of k/n (scipy's brentq), or 0 / 1
    where the test rejects no rate on that side; Newcombe's (1998) closed form gives the same ends."""
    z = float(norm.ppf(0.5 + confidence / 2))
    low, high = proportion_interval(k, n, confidence)
    p_hat = k / n
    assert (low, high) == pytest.approx(wilson_cc_by_root(k, n, confidence), abs=1e-9)
    if 0 < k < n:  # Newcombe's ends are defined (and set to 0 / 1) at k = 0 / n apart from the formula
        q = 1 - p_hat
        newcombe_low = (2 * n * p_hat + z * z - 1 - z * math.sqrt(z * z - 2 - 1 / n + 4 * p_hat * (n * q + 1))) / (2 * (n + z * z))
        newcombe_high = (2 * n * p_hat + z * z + 1 + z * math.sqrt(z * z + 2 - 1 / n + 4 * p_hat * (n * q - 1))) / (2 * (n + z * z))
        assert (low, high) == pytest.approx((max(0.0, newcombe_low), min(1.0, newcombe_high)), abs=1e-9)
    # a brute-force scan of rates: every rate strictly inside is not rejected, rates just outside are
    grid = np.linspace(0, 1, 20001)[1:-1]
    kept = grid[[not _cc_score_rejects(p, k, n, z) for p in grid]]
    assert kept.min() == pytest.approx(low, abs=1e-4 + 5e-5) and kept.max() == pytest.approx(high, abs=1e-4 + 5e-5)


def test_continuity_corrected_wilson_hand_worked_and_wider_than_plain() -> None:
    # 8 of 10 at 95 %: the plain Wilson ends of 7.5 and 8.5 successes
    z = 1.959963984540054
    low = ((0.75 + z * z / 20) - z * math.sqrt(0.75 * 0.25 / 10 + z * z / 400)) / (1 + z * z / 10)
    high = ((0.85 + z * z / 20) + z * math.sqrt(0.85 * 0.15 / 10 + z * z / 400)) / (1 + z * z / 10)
    assert proportion_interval(8, 10) == pytest.approx((low, high), abs=1e-12)
    assert proportion_interval(8, 10) == pytest.approx((0.4422, 0.9646), abs=1e-4)  # worked by hand: 0.6806 ∓ 0.2384, 0.7529 + 0.2117
    for k, n in CASES:
        plain, cc = wilson_interval(k, n), proportion_interval(k, n)
        assert cc[0] <= plain[0] and cc[1] >= plain[1]
    assert proportion_interval(0, 0) is None


def test_continuity_corrected_wilson_holds_95_percent_exactly_where_plain_wilson_dips() -> None:
    """Coverage from the binomial itself (no simulation) at the sample sizes the coverage benchmark uses."""
    from scipy.stats import binom

    for n in (100, 300):
        k = np.arange(n + 1)
        plain = np.array([wilson_interval(int(i), n) for i in k])
        cc = np.array([proportion_interval(int(i), n) for i in k])
        worst_plain, worst_cc = 1.0, 1.0
        for p in np.linspace(0.05, 0.95, 91):
            pmf = binom.pmf(k, n, p)
            worst_plain = min(worst_plain, pmf[(plain[:, 0] <= p) & (p <= plain[:, 1])].sum())
            worst_cc = min(worst_cc, pmf[(cc[:, 0] <= p) & (p <= cc[:, 1])].sum())
        assert worst_cc >= 0.95 and (n > 100 or worst_plain < 0.94), (n, worst_plain, worst_cc)

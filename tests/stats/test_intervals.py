from __future__ import annotations

import math

import pytest
from scipy.stats import binomtest

from domainbench.errors import UserInputError
from domainbench.stats import check_confidence, wilson_interval

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

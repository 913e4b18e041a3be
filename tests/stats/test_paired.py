from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binomtest

from domainbench.stats import holm, mcnemar_exact, paired_sample_size


@pytest.mark.parametrize(("a", "b"), [(0, 0), (1, 0), (0, 1), (5, 5), (10, 3), (3, 10), (0, 12), (40, 61), (250, 199),
                                       (1000, 1100)])
def test_exact_mcnemar_is_the_binomial_test_on_discordant_pairs(a: int, b: int) -> None:
    expected = 1.0 if a + b == 0 else binomtest(a, a + b, 0.5, alternative="two-sided").pvalue
    assert mcnemar_exact(a, b) == pytest.approx(expected, abs=1e-9)
    assert mcnemar_exact(a, b) == mcnemar_exact(b, a)


def test_mcnemar_hand_worked() -> None:
    # 0 vs 5 discordant: both tails 2 * 0.5^5
    assert mcnemar_exact(0, 5) == pytest.approx(2 / 32, abs=1e-15)
    with pytest.raises(ValueError):
        mcnemar_exact(-1, 3)


def test_holm_hand_computed() -> None:
    # sorted 0.01, 0.02, 0.03, 0.04 (m = 4): 0.04, 0.06, 0.06 (running max of 0.06), 0.06 (0.04 * 1 < 0.06)
    p = [0.03, 0.01, 0.04, 0.02]
    assert holm(p) == pytest.approx([0.06, 0.04, 0.06, 0.06], abs=1e-15)
    # capped at 1, ties, single value unchanged
    assert holm([0.5, 0.5, 0.9]) == pytest.approx([1.0, 1.0, 1.0])
    assert holm([0.2]) == [0.2]
    assert holm([]) == []


def test_holm_matches_a_brute_force_step_down() -> None:
    rng = np.random.default_rng(3)
    for _ in range(50):
        p = rng.uniform(0, 0.2, size=rng.integers(1, 12))
        m = p.size
        order = np.argsort(p)
        expected = np.empty(m)
        running = 0.0
        for rank, i in enumerate(order):
            running = max(running, min(1.0, (m - rank) * p[i]))
            expected[i] = running
        assert holm(p.tolist()) == pytest.approx(expected.tolist(), abs=1e-15)
        try:
            from statsmodels.stats.multitest import multipletests
        except ImportError:
            continue
        assert holm(p.tolist()) == pytest.approx(multipletests(p, method="holm")[1].tolist(), abs=1e-12)


def test_paired_sample_size_by_simulation() -> None:
    """The planned n gives about the planned power when simulated with the exact test."""
    d, delta = 0.2, 0.05
    n = paired_sample_size(d, delta)
    # Connor's formula: (1.95996 * sqrt(.2) + 0.84162 * sqrt(.2 - .0025))^2 / .0025 = 625.56
    assert n == 626
    rng = np.random.default_rng(0)
    probs = [(d + delta) / 2, (d - delta) / 2, 1 - d]
    counts = rng.multinomial(n, probs, size=2000)
    power = np.mean([mcnemar_exact(int(a), int(b)) < 0.05 for a, b, _ in counts])
    assert 0.74 < power < 0.86
    assert paired_sample_size(0.0, 0.03) == paired_sample_size(0.03, 0.03)  # d raised to delta


@pytest.mark.parametrize(("a", "b"), [(0, 0), (1, 0), (5, 5), (10, 3), (0, 12), (40, 61), (250, 199)])
def test_sign_flip_test_with_equal_weights_is_mcnemar_with_edwards_correction(a: int, b: int) -> None:
    from scipy.stats import chi2

    from domainbench.stats.paired import sign_flip_test

    d = np.array([1.0] * a + [-1.0] * b + [0.0] * 7) / 300  # the weight (1 / images) does not matter
    expected = 1.0 if a + b == 0 else min(1.0, chi2.sf(max(0, abs(a - b) - 1) ** 2 / (a + b), 1))
    assert sign_flip_test(d) == pytest.approx(expected, abs=1e-12)
    if a + b:  # never below the exact binomial test in the tails a Holm adjustment reaches
        assert sign_flip_test(d) >= mcnemar_exact(a, b) or mcnemar_exact(a, b) > 0.2


def test_sign_flip_test_against_the_enumerated_randomisation_distribution() -> None:
    """Weighted contributions (one image per class in some classes, several in others): the normal p-value with its
    continuity correction is at least the exact sign-flip p-value counted over all 2^k sign patterns, near the
    levels a verdict uses."""
    from itertools import product

    from domainbench.stats.paired import sign_flip_test

    rng = np.random.default_rng(7)
    checked = 0
    for _ in range(40):
        k = int(rng.integers(6, 15))
        d = rng.choice([-1.0, 1.0], k) / rng.choice([1, 2, 3, 5], k)
        lopsided = int(rng.integers(k // 2, k + 1))  # most of them one way, so that some p-values are small
        d[:lopsided] = np.abs(d[:lopsided])
        signs = np.array(list(product([-1.0, 1.0], repeat=k)))
        sums = np.abs(signs @ np.abs(d))
        exact = float(np.mean(sums >= abs(d.sum()) - 1e-12))
        if exact <= 0.1:
            assert sign_flip_test(d) >= exact - 1e-12
            checked += 1
    assert checked >= 5


def test_sign_flip_sample_size_closed_form_and_by_simulation() -> None:
    from domainbench.stats.paired import sign_flip_sample_size, sign_flip_test

    s, delta = 0.2, 0.05
    n = sign_flip_sample_size(s, delta)
    # by hand: b = 1.95996 sqrt(.2) + 0.84162 sqrt(.1975) = 1.25055; sqrt(N) = (b + sqrt(b^2 + .2)) / .1 = 25.7865, squared 664.95
    assert n == 665
    assert n >= paired_sample_size(s, delta)  # Connor's without the continuity correction: 626
    # one cell, independent images: discordant with probability s, A's way with (s + delta) / 2
    rng = np.random.default_rng(0)
    power = np.mean([sign_flip_test(rng.choice([1.0, -1.0, 0.0], n, p=[(s + delta) / 2, (s - delta) / 2, 1 - s]) / n)
                     < 0.05 for _ in range(2000)])
    assert 0.76 < power < 0.84
    with pytest.raises(ValueError):
        sign_flip_sample_size(0.2, 0.0)

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

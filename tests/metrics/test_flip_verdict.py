"""The label-free verdict (issue 37, item 3): models of an unlabelled run compared by label flips, checked against a
plain loop over images and cells, scipy's normal tail and statsmodels-style Holm by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

from domainbench.metrics.comparison import compare_flips
from domainbench.metrics.outcomes import MISSING, ImageOutcomes

CELLS = [("blur", 1), ("blur", 3), ("noise", 2)]


def outcomes(n: int = 200, seed: int = 3) -> ImageOutcomes:
    """Three models on n unlabelled images; m1 flips least; some images missing in one cell."""
    rng = np.random.default_rng(seed)
    preds = {}
    for model, rate in (("m1", 0.1), ("m2", 0.3), ("m3", 0.32)):
        clean = rng.integers(0, 4, n)
        preds[(model, "clean", 0)] = clean
        for corr, sev in CELLS:
            flip = rng.random(n) < rate * sev / 2
            p = np.where(flip, (clean + 1) % 4, clean)
            if (corr, sev) == ("blur", 3):
                p[:10] = MISSING  # ten images this cell never evaluated
            preds[(model, corr, sev)] = p
    return ImageOutcomes(indices=np.arange(n), labels=None, preds=preds)


def brute(out: ImageOutcomes, a: str, b: str) -> tuple[float, float, float, float]:
    """(flips a, flips b, p-value, interval half-width at 95 %) by loops over cells and images."""
    share = np.zeros(out.n)
    ra, rb = [], []
    for corr, sev in CELLS:
        pa, pb = out.preds[(a, corr, sev)], out.preds[(b, corr, sev)]
        ca, cb = out.preds[(a, "clean", 0)], out.preds[(b, "clean", 0)]
        used = [i for i in range(out.n) if pa[i] != MISSING and pb[i] != MISSING]
        fa = {i: pa[i] != ca[i] for i in used}
        fb = {i: pb[i] != cb[i] for i in used}
        ra.append(sum(fa.values()) / len(used))
        rb.append(sum(fb.values()) / len(used))
        for i in used:
            share[i] += (float(fa[i]) - float(fb[i])) / len(used) / len(CELLS)
    d = share[share != 0]
    z = max(0.0, abs(d.sum()) - np.abs(d).max()) / math.sqrt(np.sum(d * d))
    half = np.abs(d).max() + norm.ppf(0.975) * math.sqrt(np.sum(d * d))
    return float(np.mean(ra)), float(np.mean(rb)), float(2 * norm.sf(z)), float(half)


def test_flip_verdicts_against_a_plain_loop_and_holm_by_hand() -> None:
    out = outcomes()
    verdicts = compare_flips(out, ["m1", "m2", "m3"])
    assert [(v.model_a, v.model_b) for v in verdicts] == [("m1", "m2"), ("m1", "m3"), ("m2", "m3")]
    raw = []
    for v in verdicts:
        fa, fb, p, half = brute(out, v.model_a, v.model_b)
        assert (v.flips_a, v.flips_b, v.p_value) == (pytest.approx(fa), pytest.approx(fb), pytest.approx(p))
        assert v.difference == pytest.approx(fa - fb)
        assert (v.ci_low, v.ci_high) == (pytest.approx(fa - fb - half), pytest.approx(fa - fb + half))
        assert (v.cells, v.n_images, v.pairs_compared) == (3, 200, 3)
        raw.append(p)
    # Holm by hand: the smallest p times 3, the next times 2 (running maximum), the largest times 1, capped at 1
    order = np.argsort(raw)
    expected = np.empty(3)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, raw[i] * (3 - rank)))
        expected[i] = running
    assert [v.p_holm for v in verdicts] == pytest.approx(expected.tolist())
    # m1 flips far less than m2 and m3, which flip about as often as each other
    assert [v.steadier for v in verdicts] == ["a", "a", None]
    assert "m1 is steadier" in verdicts[0].sentence and "equally steady" in verdicts[2].sentence
    assert "Steadier is not more accurate" in verdicts[0].sentence


def test_a_pair_with_no_shared_corrupted_cell_is_refused() -> None:
    from domainbench.metrics.classification import MetricInputError

    out = ImageOutcomes(indices=np.arange(3), labels=None,
                        preds={("a", "clean", 0): np.zeros(3, int), ("b", "clean", 0): np.zeros(3, int)})
    with pytest.raises(MetricInputError, match="share no corrupted cell"):
        compare_flips(out, ["a", "b"])

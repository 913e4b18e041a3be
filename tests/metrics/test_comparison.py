from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binomtest

from domainbench.metrics.comparison import PairVerdict, compare_models, verdict_sentence
from domainbench.metrics.outcomes import image_outcomes
from domainbench.stats import holm, paired_sample_size
from tests.metrics.confidence_fixtures import synthetic_units


def test_pairs_cells_holm_and_verdicts_against_direct_computation() -> None:
    units = synthetic_units(n=300, skill={"m1": 0.9, "m2": 0.75, "m3": 0.74})
    out = image_outcomes(units)
    c = compare_models(out, ["m1", "m2", "m3"], confidence=0.95, resamples=1000, seed=1)
    assert len(c.pairs) == 3 * 5  # three pairs x (clean + 4 corrupted cells)
    # McNemar from the per-image bits, Holm over all 15 tests
    for p in c.pairs:
        ca, cb = out.correct(p.model_a, p.corruption, p.severity), out.correct(p.model_b, p.corruption, p.severity)
        assert (p.a_only, p.b_only, p.n) == (int(np.sum(ca & ~cb)), int(np.sum(cb & ~ca)), 300)
        assert p.p_value == pytest.approx(binomtest(p.a_only, p.a_only + p.b_only).pvalue, abs=1e-9)
        assert p.ci_low <= p.difference <= p.ci_high
    assert [p.p_holm for p in c.pairs] == pytest.approx(holm([p.p_value for p in c.pairs]))
    by = {(v.model_a, v.model_b): v for v in c.verdicts}
    strong = by[("m1", "m2")]
    assert strong.winner == "a" and strong.ci_low > 0 and strong.better >= 2 and strong.worse == 0
    assert strong.sentence.startswith("m1 beats m2 on this domain: balanced accuracy ")
    assert "better in" in strong.sentence and "of 4 cells, worse in none (Holm-adjusted p < 0.05)" in strong.sentence
    close = by[("m2", "m3")]
    assert close.winner is None  # 1 point apart on 300 images: undecided
    assert close.sentence.startswith("m2 vs m3: no significant difference on 300 images")
    assert close.images_needed == paired_sample_size(close.discordance, 0.03, 0.05, 0.8) > 300
    assert f"about {round(close.images_needed, -2):,} images would resolve a 3-point difference" in close.sentence
    # the domain difference is the mean over the corrupted cells of the per-cell differences
    cells = [p for p in c.pairs if (p.model_a, p.model_b) == ("m1", "m2") and p.corruption != "clean"]
    assert strong.difference == pytest.approx(np.mean([p.difference for p in cells]))
    # reproducible under the seed
    assert compare_models(out, ["m1", "m2", "m3"], resamples=1000, seed=1) == c


def test_verdict_sentence_wording() -> None:
    v = dict(model_a="RN50", model_b="ViT-B-32", accuracy_a=0.55, accuracy_b=0.612, difference=-0.062, ci_low=-0.094,
             ci_high=-0.031, better=0, worse=9, cells=12, n_images=200, discordance=0.2, images_needed=1437, winner="b")
    assert verdict_sentence(v, 0.95) == ("ViT-B-32 beats RN50 on this domain: balanced accuracy 61.2 % vs 55.0 % (+6.2 points, "
                                         "95 % CI 3.1 to 9.4); better in 9 of 12 cells, worse in none (Holm-adjusted p < 0.05)")
    v.update(winner=None, difference=0.01, ci_low=-0.02, ci_high=0.04)
    assert verdict_sentence(PairVerdict(**v, sentence=""), 0.9) == (
        "RN50 vs ViT-B-32: no significant difference on 200 images (balanced accuracy 55.0 % vs 61.2 %, +1.0 points, "
        "90 % CI -2.0 to 4.0); about 1,400 images would resolve a 3-point difference")


def test_needs_two_models_and_labels() -> None:
    out = image_outcomes(synthetic_units())
    from domainbench.metrics.classification import MetricInputError

    with pytest.raises(MetricInputError, match="at least two models"):
        compare_models(out, ["m1"])

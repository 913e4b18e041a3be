from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binomtest

from domainbench.metrics.comparison import PairVerdict, compare_models, verdict_sentence
from domainbench.metrics.outcomes import image_outcomes
from domainbench.stats import holm
from tests.metrics.confidence_fixtures import synthetic_units


def _shares(out, a: str, b: str, cells) -> np.ndarray:  # noqa: ANN001 - per image, by a plain loop over classes
    y = out.labels
    total = np.zeros(out.n)
    for corr, sev in cells:
        ca, cb = out.correct(a, corr, sev), out.correct(b, corr, sev)
        classes = sorted(set(y.tolist()))
        for c in classes:
            members = np.flatnonzero(y == c)
            total[members] += (ca[members].astype(float) - cb[members]) / (len(classes) * members.size)
    return total / len(cells)


def test_pairs_cells_holm_and_verdicts_against_direct_computation() -> None:
    from sklearn.metrics import balanced_accuracy_score

    from domainbench.stats.paired import sign_flip_sample_size, sign_flip_test

    units = synthetic_units(n=300, skill={"m1": 0.9, "m2": 0.75, "m3": 0.74})
    out = image_outcomes(units)
    c = compare_models(out, ["m1", "m2", "m3"], confidence=0.95, resamples=1000, seed=1)
    assert len(c.pairs) == 3 * 5  # three pairs x (clean + 4 corrupted cells)
    # McNemar (top-1) and the balanced-accuracy test from the per-image bits, Holm over all 15 tests each
    for p in c.pairs:
        ca, cb = out.correct(p.model_a, p.corruption, p.severity), out.correct(p.model_b, p.corruption, p.severity)
        assert (p.a_only, p.b_only, p.n) == (int(np.sum(ca & ~cb)), int(np.sum(cb & ~ca)), 300)
        assert p.p_value == pytest.approx(binomtest(p.a_only, p.a_only + p.b_only).pvalue, abs=1e-9)
        pa, pb = out.cell(p.model_a, p.corruption, p.severity), out.cell(p.model_b, p.corruption, p.severity)
        assert p.difference == pytest.approx(balanced_accuracy_score(out.labels, pa) - balanced_accuracy_score(out.labels, pb),
                                             abs=1e-12)
        d = _shares(out, p.model_a, p.model_b, [(p.corruption, p.severity)])
        assert d.sum() == pytest.approx(p.difference, abs=1e-12)
        assert p.p_balanced == pytest.approx(sign_flip_test(d), abs=1e-12)
        assert p.ci_low <= p.difference <= p.ci_high
        assert (p.ci_low > 0 or p.ci_high < 0) == (p.p_balanced < 0.05)  # the interval is the test inverted
    assert [p.p_holm for p in c.pairs] == pytest.approx(holm([p.p_value for p in c.pairs]))
    assert [p.p_balanced_holm for p in c.pairs] == pytest.approx(holm([p.p_balanced for p in c.pairs]))
    by = {(v.model_a, v.model_b): v for v in c.verdicts}
    corrupted = [("blur", 1), ("blur", 3), ("noise", 2), ("noise", 4)]
    # the domain test: each image's share of the mean difference over the corrupted cells; Holm over the 3 pairs
    for v in c.verdicts:
        share = _shares(out, v.model_a, v.model_b, corrupted)
        assert v.difference == pytest.approx(share.sum(), abs=1e-12)
        assert v.p_value == pytest.approx(sign_flip_test(share), abs=1e-12)
        mine = [p for p in c.pairs if (p.model_a, p.model_b) == (v.model_a, v.model_b) and p.corruption != "clean"]
        assert v.better == sum(p.p_balanced_holm < 0.05 and p.difference > 0 for p in mine)
        assert v.worse == sum(p.p_balanced_holm < 0.05 and p.difference < 0 for p in mine)
        assert v.pairs_compared == 3 and v.classes == 3
    assert [v.p_holm for v in c.verdicts] == pytest.approx(holm([v.p_value for v in c.verdicts]))
    strong = by[("m1", "m2")]
    assert strong.winner == "a" and strong.p_holm < 0.05 and strong.ci_low > 0 and strong.better >= 2 and strong.worse == 0
    assert strong.sentence.startswith("m1 beats m2 on this domain by balanced accuracy: ")
    assert "Holm-adjusted over 3 model pairs); by the same measure better in" in strong.sentence
    assert "of 4 cells, worse in none (Holm-adjusted over cells and pairs, p < 0.05)" in strong.sentence
    close = by[("m2", "m3")]
    assert close.winner is None and close.p_holm >= 0.05  # 1 point apart on 300 images: a tie
    assert close.sentence.startswith("m2 and m3 tie on this domain by balanced accuracy: ")
    assert "on 300 images (about 100 per class)" in close.sentence
    # the sample size is the domain test's, at the level Holm gives the strongest of the 3 pairs, per class
    per_image = np.mean([out.correct("m2", *k).astype(float) - out.correct("m3", *k) for k in corrupted], axis=0)
    second = np.mean([np.mean(per_image[out.labels == k] ** 2) for k in range(3)])
    assert close.second_moment == pytest.approx(second, abs=1e-12)
    assert close.images_per_class_needed == -(-sign_flip_sample_size(second, 0.03, 0.05 / 3, 0.8) // 3) > 100
    assert f"about {round(close.images_per_class_needed, -1):,} images per class would settle a 3-point difference" \
        in close.sentence
    # the domain difference is the mean over the corrupted cells of the per-cell differences
    cells = [p for p in c.pairs if (p.model_a, p.model_b) == ("m1", "m2") and p.corruption != "clean"]
    assert strong.difference == pytest.approx(np.mean([p.difference for p in cells]))
    # reproducible
    assert compare_models(out, ["m1", "m2", "m3"], resamples=1000, seed=1) == c


def test_verdict_sentence_wording() -> None:
    v = dict(model_a="RN50", model_b="ViT-B-32", accuracy_a=0.55, accuracy_b=0.612, difference=-0.062, ci_low=-0.094,
             ci_high=-0.031, p_value=0.0004, p_holm=0.0012, pairs_compared=3, better=0, worse=9, cells=12, n_images=200,
             classes=10, second_moment=0.2, images_per_class_needed=143, winner="b")
    assert verdict_sentence(v, 0.95) == (
        "ViT-B-32 beats RN50 on this domain by balanced accuracy: 61.2 % vs 55.0 % (+6.2 points, 95 % CI 3.1 to 9.4, "
        "p = 0.0012 Holm-adjusted over 3 model pairs); by the same measure better in 9 of 12 cells, worse in none "
        "(Holm-adjusted over cells and pairs, p < 0.05)")
    v.update(winner=None, difference=0.01, ci_low=-0.02, ci_high=0.04, p_value=0.4, p_holm=0.8, pairs_compared=1, worse=0)
    assert verdict_sentence(PairVerdict(**v, sentence=""), 0.9) == (
        "RN50 and ViT-B-32 tie on this domain by balanced accuracy: 55.0 % vs 61.2 % (+1.0 points, 90 % CI -2.0 to 4.0, "
        "p = 0.8) on 200 images (about 20 per class); by the same measure better in 0 of 12 cells, worse "
        "in none (Holm-adjusted over cells and pairs, p < 0.1); about 140 images per class would settle a 3-point difference")
    v.update(sequential=True)
    assert "(+1.0 points, anytime-valid, 90 % CI" in verdict_sentence(v, 0.9)
    assert "; a fixed-size run of about 140 images per class would settle" in verdict_sentence(v, 0.9)


def test_needs_two_models_and_labels() -> None:
    out = image_outcomes(synthetic_units())
    from domainbench.metrics.classification import MetricInputError

    with pytest.raises(MetricInputError, match="at least two models"):
        compare_models(out, ["m1"])


def test_no_image_with_per_image_outcomes_is_refused_not_a_tie() -> None:
    from domainbench.metrics.classification import MetricInputError
    from domainbench.metrics.outcomes import MISSING, ImageOutcomes

    labels = np.array([0, 1, 0, 1])
    missing = np.full(4, MISSING)
    out = ImageOutcomes(indices=np.arange(4), labels=labels,
                        preds={(m, c, s): missing for m in ("a", "b") for c, s in (("clean", 0), ("blur", 1))})
    with pytest.raises(MetricInputError, match="have no image with a prediction from both"):
        compare_models(out, ["a", "b"])


def test_adaptive_comparison_is_anytime_valid_along_the_arrival_order() -> None:
    from domainbench.stats.confseq import anytime_p_value, class_balance_weights, weighted_difference_stream

    units = synthetic_units(n=120, skill={"m1": 0.9, "m2": 0.6})
    out = image_outcomes(units)
    arrival = np.random.default_rng(4).permutation(out.n)
    c = compare_models(out, ["m1", "m2"], arrival=arrival)
    assert c.method.startswith("anytime-valid") and all(v.sequential for v in c.verdicts)
    order = np.argsort(arrival)
    w = class_balance_weights(out.labels)
    for p in c.pairs:
        d = out.correct("m1", p.corruption, p.severity).astype(float) - out.correct("m2", p.corruption, p.severity)
        assert p.p_balanced == pytest.approx(anytime_p_value(weighted_difference_stream(d[order], w[order])), abs=1e-12)
        assert p.p_value == pytest.approx(anytime_p_value((d[order] + 1) / 2), abs=1e-12)
        assert -1 <= p.ci_low <= p.ci_high <= 1
    # anytime-valid tests are more cautious than the fixed-sample one on the same images
    fixed = compare_models(out, ["m1", "m2"])
    assert all(a.p_balanced >= b.p_balanced for a, b in zip(c.pairs, fixed.pairs, strict=True))
    assert "anytime-valid" in c.verdicts[0].sentence


def test_adaptive_domain_test_averages_each_image_over_the_cells_still_running() -> None:
    from domainbench.metrics.outcomes import MISSING, ImageOutcomes
    from domainbench.stats.confseq import anytime_p_value, class_balance_weights, weighted_difference_stream

    out = image_outcomes(synthetic_units(n=120, skill={"m1": 0.85, "m2": 0.7}))
    arrival = np.random.default_rng(5).permutation(out.n)
    # blur@3 stopped after the first 40 images of the stream, noise@4 after 80: later images are missing there
    preds = dict(out.preds)
    for (corr, sev), stop in ((("blur", 3), 40), (("noise", 4), 80)):
        for m in ("m1", "m2"):
            preds[(m, corr, sev)] = np.where(arrival < stop, preds[(m, corr, sev)], MISSING)
    out = ImageOutcomes(indices=out.indices, labels=out.labels, preds=preds)
    v = compare_models(out, ["m1", "m2"], arrival=arrival).verdicts[0]
    order = np.argsort(arrival)
    cells = [("blur", 1), ("blur", 3), ("noise", 2), ("noise", 4)]
    total, count = np.zeros(out.n), np.zeros(out.n)
    for k in cells:  # by a loop: each image's difference over the cells that evaluated it
        here = out.present("m1", *k)
        total += np.where(here, out.correct("m1", *k).astype(float) - out.correct("m2", *k), 0.0)
        count += here
    w = class_balance_weights(out.labels)
    expected = anytime_p_value(weighted_difference_stream((total / count)[order], w[order]))
    assert v.p_value == pytest.approx(expected, abs=1e-12) and v.sequential

"""An answer that named no class is a wrong answer, not a missing image: `compare` and the bootstrap intervals
count it against the model, as the stored confusion (and so the summary's accuracy) does. Only an image a cell
did not evaluate is left out of a pair."""

from __future__ import annotations

import numpy as np
import pytest

from domainbench.engine.scoring import confusion
from domainbench.metrics.comparison import compare_models
from domainbench.metrics.confidence import cells_linear
from domainbench.metrics.outcomes import image_outcomes
from domainbench.models.generative import UNPARSED
from domainbench.store.records import UnitRecord

LABELS = np.array([0, 1, 0, 1])
CLIP = np.array([0, 1, 0, 0])  # right on images 0, 1, 2
VLM = np.array([0, UNPARSED, UNPARSED, 1])  # right on 0 and 3, no class named on 1 and 2


def _units(vlm_indices: list[int] | None = None) -> list[UnitRecord]:
    units = []
    for model, preds in (("clip", CLIP), ("vlm", VLM)):
        for corr, sev in (("clean", 0), ("fog", 1)):
            keep = list(range(4)) if model == "clip" or vlm_indices is None else vlm_indices
            cm = confusion(LABELS[keep], preds[keep], 2).dense()
            units.append(UnitRecord(
                run_id="r", model=model, corruption=corr, severity=sev, shard=0, n=len(keep), confusion=cm.tolist(),
                flips=0, seed=0, classes=["a", "b"], preds=preds[keep].tolist(), indices=keep,
                labels=LABELS[keep].tolist() if corr == "clean" else None))
    return units


def test_an_unparsed_answer_counts_as_wrong_in_the_paired_comparison() -> None:
    out = image_outcomes(_units())
    # by hand: clip's balanced accuracy (2/2 + 1/2) / 2 = 0.75; the VLM's (1/2 + 1/2) / 2 = 0.5, its two unparsed
    # answers wrong; clip alone right on images 1 and 2, the VLM alone on image 3; all 4 images paired
    assert out.present("vlm", "fog", 1).all()
    assert out.correct("vlm", "fog", 1).tolist() == [True, False, False, True]
    c = compare_models(out, ["clip", "vlm"], resamples=50)
    for p in c.pairs:
        assert (p.n, p.a_only, p.b_only) == (4, 2, 1)
        assert p.difference == pytest.approx(0.25, abs=1e-12)
    v = c.verdicts[0]
    assert (v.accuracy_a, v.accuracy_b, v.n_images) == (pytest.approx(0.75), pytest.approx(0.5), 4)


def test_the_bootstrap_point_is_the_stored_confusions_balanced_accuracy() -> None:
    units = _units()
    out = image_outcomes(units)
    stored = next(u for u in units if u.model == "vlm" and u.corruption == "fog")
    cm = np.asarray(stored.confusion)
    expected = float(np.mean(np.diag(cm) / cm.sum(axis=1)))
    assert expected == pytest.approx(0.5)
    assert cells_linear(out, [("vlm", "fog", 1)]).point[0] == pytest.approx(expected, abs=1e-12)


def test_an_image_the_cell_did_not_evaluate_is_still_left_out() -> None:
    # the VLM's units hold images 0, 1 and 3 only: image 2 is missing (not evaluated), image 1 unparsed (wrong)
    out = image_outcomes(_units(vlm_indices=[0, 1, 3]))
    assert out.present("vlm", "fog", 1).tolist() == [True, True, False, True]
    c = compare_models(out, ["clip", "vlm"], resamples=50)
    # paired on images 0, 1, 3: clip right on 0 and 1, the VLM on 0 and 3; classes 0: {0}, 1: {1, 3}
    # clip (1/1 + 1/2) / 2 = 0.75, the VLM (1/1 + 1/2) / 2 = 0.75
    for p in c.pairs:
        assert (p.n, p.a_only, p.b_only) == (3, 1, 1)
        assert p.difference == pytest.approx(0.0, abs=1e-12)


def test_missing_and_unparsed_are_different_codes() -> None:
    from domainbench.metrics.outcomes import MISSING

    assert MISSING != UNPARSED and MISSING < 0 and UNPARSED < 0

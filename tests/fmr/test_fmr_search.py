"""The generator (greedy and gradient): oracle validity, bounds on FMR, budget 0, seeding."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from domainbench.engine.scoring import ModelState
from domainbench.fmr.differentiable import gradient_search
from domainbench.fmr.generator import SearchConfig, SearchResult, greedy_search
from domainbench.fmr.tested import CallableTested, ZeroShotTested
from domainbench.fmr.tested import TestedModel as ModelUnderTest
from domainbench.metrics.fmr import model_report

from .conftest import FAMILY, Zoo

CFG = SearchConfig(seed=3, budget=3, candidates=3, step_size=0.25)


def _search(kind: str, zoo: Zoo, tested: ModelUnderTest, oracle=None, cfg: SearchConfig = CFG,
            sl: slice = slice(None)) -> SearchResult:
    oracle = oracle or zoo.oracle
    b = zoo.batch
    images, labels, idx = b.images[sl], b.labels[sl], b.indices[sl]
    votes = oracle.votes(images)
    if kind == "greedy":
        return greedy_search(images, labels, idx, tested, oracle, votes, FAMILY, cfg)
    return gradient_search(images, labels, idx, tested, oracle, votes, cfg, FAMILY)


def _preds(tested: ModelUnderTest, images: np.ndarray) -> np.ndarray:
    return tested.logits(images).argmax(1).numpy()


@pytest.mark.parametrize("kind", ["greedy", "gradient"])
def test_never_returns_an_image_the_oracle_rejects(kind: str, zoo: Zoo) -> None:
    # the augmented model alone as oracle lets the search flip the plain model's predictions
    for oracle in (zoo.oracle, zoo.augmented_only):
        res = _search(kind, zoo, zoo.plain, oracle, SearchConfig(seed=0, budget=4, candidates=4, step_size=0.3))
        pos, images = res.returned()
        assert len(pos) == int(res.validated.sum()) > 0
        assert oracle.agrees(oracle.votes(images), zoo.batch.labels[pos]).all()  # re-scored from scratch
        assert (res.steps[~res.validated] == 0).all()
    assert res.steps.sum() > 0  # the search did perturb


@pytest.mark.parametrize("kind", ["greedy", "gradient"])
def test_tested_model_identical_to_a_single_member_oracle_has_fmr_100(kind: str, zoo: Zoo) -> None:
    res = _search(kind, zoo, zoo.plain, zoo.plain_only)
    labels = zoo.batch.labels
    r = model_report("plain", labels, _preds(zoo.plain, zoo.batch.images), _preds(zoo.plain, res.images), res.steps, res.validated)
    assert r.sa is not None and r.sa > 0.5
    assert r.fmr == pytest.approx(100.0)


@pytest.mark.parametrize("kind", ["greedy", "gradient"])
def test_constant_prediction_model_fmr_is_bounded_by_its_class_share(kind: str, zoo: Zoo) -> None:
    k = len(zoo.classes)
    const = 3

    def logits(images: np.ndarray) -> torch.Tensor:
        return torch.nn.functional.one_hot(torch.full((len(images),), const), k).float() * 5.0

    def torch_logits(x: torch.Tensor) -> torch.Tensor:
        return logits(np.zeros(len(x))) + 0.0 * x.sum(dim=(1, 2, 3))[:, None]

    tested = CallableTested("py:const", logits, torch_logits)
    labels = zoo.batch.labels
    res = _search(kind, zoo, tested)
    r = model_report("const", labels, _preds(tested, zoo.batch.images), _preds(tested, res.images), res.steps, res.validated)
    share = float((labels == const).mean())
    assert r.sa == pytest.approx(share) and r.fmr is not None
    assert r.fmr <= 100 * share / r.sa + 1e-9


@pytest.mark.parametrize("kind", ["greedy", "gradient"])
def test_budget_zero_returns_the_clean_images(kind: str, zoo: Zoo) -> None:
    res = _search(kind, zoo, zoo.plain, cfg=SearchConfig(seed=0, budget=0))
    assert np.array_equal(res.images, zoo.batch.images)
    assert (res.steps == 0).all() and all(o == [] for o in res.ops)
    pos, images = res.returned()
    assert np.array_equal(images, zoo.batch.images[pos])


@pytest.mark.parametrize("kind", ["greedy", "gradient"])
def test_same_seed_same_result_independent_of_batch_size(kind: str, zoo: Zoo) -> None:
    whole = _search(kind, zoo, zoo.plain)
    again = _search(kind, zoo, zoo.plain)
    # the same images in batches of 7 (and the model's own forward batches of 5)
    small = ZeroShotTested(ModelState(zoo.plain.state.name, zoo.plain.state.model, zoo.plain.state.classifier, 5))
    parts = [_search(kind, zoo, small, sl=slice(i, i + 7)) for i in range(0, len(zoo.batch.images), 7)]
    for other in (again, SearchResult(
        images=np.concatenate([p.images for p in parts]), steps=np.concatenate([p.steps for p in parts]),
        validated=np.concatenate([p.validated for p in parts]), oracle_clean=np.concatenate([p.oracle_clean for p in parts]),
        oracle_final=np.concatenate([p.oracle_final for p in parts]), ops=[o for p in parts for o in p.ops],
    )):
        assert np.array_equal(whole.images, other.images)
        assert np.array_equal(whole.steps, other.steps)
        assert np.array_equal(whole.oracle_final, other.oracle_final)
        assert whole.ops == other.ops
    assert whole.steps.sum() > 0

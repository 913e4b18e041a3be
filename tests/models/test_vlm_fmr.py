"""FMR takes generative VLMs as tested models (logits = class log-likelihoods) and in the oracle zoo."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from domainbench.fmr.oracle import load_oracle
from domainbench.fmr.tested import load_tested
from domainbench.models import create_model
from domainbench.models.generative import VLMOptions
from tests.models.tiny_vlms import save_tiny_llava

CLASSES = ["cat", "dog", "ankle boot"]


@pytest.fixture(scope="module")
def llava(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_llava(tmp_path_factory.mktemp("fmr") / "llava")


def test_generative_tested_model_logits_are_its_class_scores(llava: Path) -> None:
    ims = np.random.default_rng(0).integers(0, 256, (3, 28, 28), dtype=np.uint8)
    tested = load_tested(f"hf-vlm:{llava}", CLASSES, "cpu", 4, None, ims)
    direct = create_model(f"hf-vlm:{llava}", "cpu")
    direct.configure(CLASSES, VLMOptions())
    np.testing.assert_allclose(tested.logits(ims).numpy(), direct.classify(ims, 4).scores, atol=1e-5)
    assert tested.torch_logits is None  # no gradient path: the search runs without gradients


def test_generative_models_vote_in_the_oracle(llava: Path) -> None:
    ims = np.random.default_rng(1).integers(0, 256, (4, 28, 28), dtype=np.uint8)
    oracle = load_oracle([f"hf-vlm:{llava}", "embedded:fmnist-plain"], CLASSES, "cpu", 4, None)
    votes = oracle.votes(ims)
    direct = create_model(f"hf-vlm:{llava}", "cpu")
    direct.configure(CLASSES, VLMOptions())
    assert votes.shape == (4, 2) and votes[:, 0].tolist() == direct.classify(ims, 4).preds.tolist()


def test_an_unparsed_answer_abstains_from_the_vote() -> None:
    from domainbench.metrics.fmr import TIE, majority

    votes = np.array([[1, 1, -1], [2, -1, -1], [0, 1, -1], [-1, -1, -1]])
    assert majority(votes, 3).tolist() == [1, 2, TIE, TIE]


def test_fmr_asks_a_generative_model_with_the_runs_options(llava: Path) -> None:
    """FMR's tested models and oracle load with the run's per-model options (they once took the defaults)."""
    ims = np.random.default_rng(2).integers(0, 256, (3, 28, 28), dtype=np.uint8)
    options = {"score": "mean", "questions": ["What is this?", "Which animal or object is it?"]}
    tested = load_tested(f"hf-vlm:{llava}", CLASSES, "cpu", 4, None, ims, options=options)
    direct = create_model(f"hf-vlm:{llava}", "cpu")
    direct.configure(CLASSES, VLMOptions(questions=tuple(options["questions"]), score="mean"))
    asked = direct.classify(ims, 4).scores
    np.testing.assert_allclose(tested.logits(ims).numpy(), asked, atol=1e-5)
    direct.configure(CLASSES, VLMOptions())
    assert not np.allclose(asked, direct.classify(ims, 4).scores, atol=1e-3)  # the options changed the scores
    oracle = load_oracle([f"hf-vlm:{llava}", "embedded:fmnist-plain"], CLASSES, "cpu", 4, None,
                         options={f"hf-vlm:{llava}": options})
    assert oracle.members[0].model.options.score == "mean" and len(oracle.members[0].model.options.questions) == 2

"""VQA and retrieval under a plan's cells on manifests built from the bundled sample: the exported answers
re-scored independently give the reported numbers, retrieval equals clip_benchmark on the clean cell, and
every refusal comes before a model loads."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from domainbench.records.config import CorruptionChoice, DomainConfig
from domainbench.data.manifests import load_retrieval_manifest
from domainbench.data.task_samples import write_sample_manifests
from domainbench.engine.jobs import Job, run_job
from domainbench.engine.task_eval import evaluate_task
from domainbench.errors import UserInputError
from domainbench.metrics.task_report import RETRIEVAL_COLUMNS, VQA_COLUMNS
from tests.models.tiny_vlms import save_tiny_llava

DOMAIN = DomainConfig(domain="dim and noisy", corruptions=[CorruptionChoice(name="gaussian_noise", severities=[5])])


@pytest.fixture(scope="module")
def manifests(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return write_sample_manifests(tmp_path_factory.mktemp("task_sample"), images=6, seed=0)


def _independent_normalise(text: str) -> str:
    # what the exported answers are re-scored with: a separate, plain reading of the VQAv2 rules for the answers
    # a tiny model and class names produce (letters, digits, spaces and the punctuation of the class names)
    t = text.replace("\n", " ").replace("\t", " ").strip()
    punct = ";/[]\"{}()=+\\_-><@`,?!"
    comma = re.search(r"\d,\d", t) is not None
    for p in punct:
        t = t.replace(p, "" if (p + " " in text or " " + p in text or comma) else " ")
    t = re.sub(r"\.(?!\d)", "", t)
    numbers = dict(zip("none zero one two three four five six seven eight nine ten".split(),
                       "0 0 1 2 3 4 5 6 7 8 9 10".split()))
    words = [numbers.get(w, w) for w in t.lower().split()]
    return " ".join(w for w in words if w not in ("a", "an", "the"))


def test_vqa_end_to_end_rescored_from_the_predictions(manifests: tuple[Path, Path], tmp_path: Path) -> None:
    llava = save_tiny_llava(tmp_path / "llava")
    names = [f"hf-vlm:{llava}", "embedded:fmnist-plain"]
    vqa, _ = manifests
    # the contrastive model gets the yes/no and multiple-choice questions only
    closed = vqa.parent / "closed.jsonl"
    closed.write_text("".join(line + "\n" for line in vqa.read_text().splitlines()
                              if json.loads(line)["question"] != "What kind of garment is this?"))
    with pytest.raises(UserInputError, match=r"embedded:fmnist-plain is a contrastive model: .* 6 open question\(s\) "
                                             r"\(first: line 2 'What kind of garment is this\?'\)"):
        evaluate_task(DOMAIN, "vqa", vqa, names, image_size=32)
    res = evaluate_task(DOMAIN, "vqa", vqa, names[:1], image_size=32, max_new_tokens=4, resamples=1000)
    both = evaluate_task(DOMAIN, "vqa", closed, names, image_size=32, max_new_tokens=4, resamples=1000)
    assert [tuple(r) for r in res.rows] == [VQA_COLUMNS] * 2
    assert [(r["corruption"], r["severity"]) for r in res.rows] == [("clean", 0), ("gaussian_noise", 5)]
    for result in (res, both):
        for row in result.rows:
            preds = [p for p in result.predictions if (p["model"], p["corruption"]) == (row["model"], row["corruption"])]
            assert len(preds) == row["questions"] == 18 - (6 if result is both else 0)
            right = [float(_independent_normalise(p["answer"]) in {_independent_normalise(r) for r in p["references"]})
                     if _independent_normalise(p["answer"]) else 0.0 for p in preds]
            assert row["vqa_accuracy"] == pytest.approx(np.mean(right))
            flips = [_independent_normalise(p["answer"]) != _independent_normalise(p["clean_answer"]) for p in preds]
            if row["corruption"] == "clean":
                assert row["answer_flip_rate"] is None
            else:
                assert row["answer_flip_rate"] == pytest.approx(np.mean(flips))
            unanswered = [not _independent_normalise(p["answer"]) for p in preds]
            assert row["unanswered_rate"] == pytest.approx(np.mean(unanswered))
            assert row["vqa_accuracy_ci_low"] <= row["vqa_accuracy"] <= row["vqa_accuracy_ci_high"]
            mc = [p for p in preds if p["question"] == "Which of these is it?"]
            assert row["mc_accuracy"] == pytest.approx(np.mean([p["correct"] for p in mc]))
    # the contrastive model answered by prompt similarity: every answer is one of the candidates
    emb = [p for p in both.predictions if p["model"] == "embedded:fmnist-plain"]
    assert all(p["answer"] in ("yes", "no") for p in emb if p["question"] == "Is this a shoe?")
    assert {r["metric"] for r in both.paired} >= {"vqa_accuracy", "answer_flip_rate"}
    assert all("p_holm" in r for r in both.paired)


class _Texts(list):  # type: ignore[type-arg]
    """clip_benchmark's tokenizer output: moved with .to(device); our models tokenise plain strings themselves."""

    def to(self, _device: str) -> _Texts:
        return self


def test_retrieval_end_to_end_equals_clip_benchmark_on_the_clean_cell(manifests: tuple[Path, Path]) -> None:
    from clip_benchmark.metrics.zeroshot_retrieval import evaluate

    from domainbench.models import create_model

    _, retrieval = manifests
    names = ["embedded:fmnist-plain", "embedded:fmnist-augmented"]
    res = evaluate_task(DOMAIN, "retrieval", retrieval, names, image_size=28, resamples=1000)
    assert [tuple(r) for r in res.rows] == [RETRIEVAL_COLUMNS] * 4
    m = load_retrieval_manifest(retrieval)
    from domainbench.data import decode_files

    images = np.stack(decode_files(m.images, 28))  # type: ignore[arg-type]
    for name in names:
        model = create_model(name, "cpu")

        class Wrapped(torch.nn.Module):
            def encode_image(self, x: torch.Tensor) -> torch.Tensor:
                return model.embed_images(x.numpy()).float()

            def encode_text(self, t: list[str]) -> torch.Tensor:
                return model.encode_text(t).float()

        loader = [(torch.from_numpy(images), [list(r.captions) for r in m.rows])]
        expected = evaluate(Wrapped(), loader, _Texts, "cpu", amp=False, recall_k_list=[1, 5])
        row = next(r for r in res.rows if r["model"] == name and r["corruption"] == "clean")
        for metric, value in expected.items():
            assert row[metric] == pytest.approx(value, abs=1e-6), (name, metric)
        assert row["top1_change_rate"] is None
        noisy = next(r for r in res.rows if r["model"] == name and r["corruption"] == "gaussian_noise")
        changed = [p["top1_changed"] for p in res.predictions if p["model"] == name and p["corruption"] == "gaussian_noise"]
        assert noisy["top1_change_rate"] == pytest.approx(np.mean(changed))
    # the cell's pixels are the classification run's: the same seeded job on the same image indices
    job = Job(0, "gaussian_noise", 5)
    np.testing.assert_array_equal(run_job(job, images, np.arange(6), 0).images, run_job(job, images, np.arange(6), 0).images)
    with pytest.raises(UserInputError, match=r"hf-vlm:x is a generative model: --task retrieval needs"):
        evaluate_task(DOMAIN, "retrieval", retrieval, ["hf-vlm:x"])
    with pytest.raises(UserInputError, match=r"--task 'caption' is not one of vqa, retrieval"):
        evaluate_task(DOMAIN, "caption", retrieval, names)

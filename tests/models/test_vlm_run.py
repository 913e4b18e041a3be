"""`domainbench run --models hf-vlm:FOLDER,embedded:fmnist-plain` end to end on the bundled sample."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from domainbench.records.config import CorruptionChoice, DomainConfig, save
from domainbench.data import open_dataset
from domainbench.models.generative import DEFAULT_QUESTION, UNPARSED, parse_answer, softmax_confidence
from domainbench.store import open_store
from tests.cli_runner import run_cli
from tests.models.test_hf_vlm import plain_scores
from tests.models.tiny_vlms import save_tiny_llava

LIMIT = 4


@pytest.fixture(scope="module")
def llava(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_llava(tmp_path_factory.mktemp("vlm") / "llava")


def test_run_scores_the_sample_as_the_contract_says(llava: Path, home: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    domain = save(DomainConfig(domain="vlm e2e", corruptions=[CorruptionChoice(name="brightness", severities=[5])]),
                  tmp_path / "plan.toml")
    name = f"hf-vlm:{llava}"
    code, out, err = run_cli(["run", str(domain), "--models", f"{name},embedded:fmnist-plain", "--limit", str(LIMIT),
                              "--workers", "0", "--no-stability", "--no-threat", "--batch-size", "3"],
                             capsys, monkeypatch)
    assert code == 0, err
    store = open_store()
    units = {(u.model, u.corruption): u for u in store.find("units")}
    assert set(units) == {(m, c) for m in (name, "embedded:fmnist-plain") for c in ("clean", "brightness")}

    ds = open_dataset("sample").subset(LIMIT)
    batch = ds.load(np.arange(LIMIT))
    rgb = np.repeat(batch.images[..., None], 3, axis=-1) if batch.images.ndim == 3 else batch.images
    ref = plain_scores(llava, rgb, ds.classes, DEFAULT_QUESTION)
    clean = units[(name, "clean")]
    assert np.asarray(clean.preds).tolist() == ref.argmax(axis=1).tolist()
    assert clean.vlm is not None and clean.vlm.unparsed == 0
    np.testing.assert_allclose(np.asarray(clean.confidence, dtype=float), softmax_confidence(ref), atol=1e-5)
    corrupted = units[(name, "brightness")]
    assert corrupted.n == LIMIT and corrupted.vlm is not None and len(corrupted.confidence) == LIMIT
    assert corrupted.flips == sum(a != b for a, b in zip(corrupted.preds, clean.preds))
    assert units[("embedded:fmnist-plain", "clean")].vlm is None  # dual encoders store nothing new
    assert name in out  # the report lists the generative model beside the contrastive one

    run_id = store.list_runs()[0].run_id
    code, text, err = run_cli(["export", run_id, "--predictions", "--format", "json"], capsys, monkeypatch)
    assert code == 0, err
    rows = [r for r in json.loads(text)["rows"] if r["model"] == name and r["corruption"] == "clean"]
    assert [r["image"] for r in rows] == list(range(LIMIT))
    assert [r["prediction"] for r in rows] == [ds.classes[k] for k in ref.argmax(axis=1)]
    np.testing.assert_allclose([r["confidence"] for r in rows], softmax_confidence(ref), atol=1e-5)
    assert [r["label"] for r in rows] == [ds.classes[y] for y in batch.labels]


def plain_answers(folder: Path, ims: np.ndarray, question: str) -> list[str]:
    """Greedy decoding of at most 16 new tokens, one image at a time."""
    from transformers import AutoModelForImageTextToText, AutoProcessor

    processor = AutoProcessor.from_pretrained(folder, local_files_only=True)
    model = AutoModelForImageTextToText.from_pretrained(folder, local_files_only=True, dtype=torch.float32).eval()
    turn = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": question}]}]
    prompt = processor.apply_chat_template(turn, add_generation_prompt=True, tokenize=False)
    out = []
    with torch.no_grad():
        for im in ims:
            enc = processor(images=[im], text=[prompt], return_tensors="pt")
            ids = model.generate(**enc, max_new_tokens=16, do_sample=False, pad_token_id=processor.tokenizer.pad_token_id)
            out.append(processor.tokenizer.decode(ids[0, enc["input_ids"].shape[1]:], skip_special_tokens=True).strip())
    return out


def test_generate_mode_stores_answers_and_the_unparseable_rate(llava: Path, home: Path, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    domain = save(DomainConfig(domain="vlm e2e", corruptions=[CorruptionChoice(name="brightness", severities=[5])]),
                  tmp_path / "plan.toml")
    name = f"hf-vlm:{llava}"
    code, _, err = run_cli(["run", str(domain), "--models", name, "--limit", str(LIMIT), "--workers", "0",
                            "--no-stability", "--no-threat", "--vlm-mode", "generate", "--run-id", "gen"],
                           capsys, monkeypatch)
    assert code == 0, err
    ds = open_dataset("sample").subset(LIMIT)
    batch = ds.load(np.arange(LIMIT))
    answers = plain_answers(llava, np.repeat(batch.images[..., None], 3, axis=-1), DEFAULT_QUESTION)
    clean = open_store().units("gen", model=name, corruption="clean")[0]
    assert clean.vlm is not None and clean.vlm.answers == [a[:200] for a in answers]
    expected = [parse_answer(a, ds.classes) for a in answers]
    assert np.asarray(clean.preds).tolist() == expected
    assert clean.vlm.unparsed == sum(p == UNPARSED for p in expected)
    assert clean.confidence is None  # a free answer has no class scores
    code, text, err = run_cli(["export", "gen"], capsys, monkeypatch)
    assert code == 0, err
    rows = {(r["corruption"]): r for r in csv.DictReader(io.StringIO(text))}
    assert float(rows["clean"]["unparseable_rate"]) == pytest.approx(clean.vlm.unparsed / LIMIT)
    # an unparsed answer is wrong: top-1 accuracy counts only parsed, correct answers
    correct = sum(p == y for p, y in zip(expected, batch.labels))
    assert float(rows["clean"]["top1_accuracy"]) == pytest.approx(correct / LIMIT)


def test_bad_vlm_flags_are_one_line_errors(home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    domain = save(DomainConfig(domain="vlm e2e", corruptions=[CorruptionChoice(name="brightness", severities=[5])]),
                  tmp_path / "plan.toml")
    code, _, err = run_cli(["run", str(domain), "--models", "embedded:fmnist-plain", "--vlm-score", "max"],
                           capsys, monkeypatch)
    assert code == 2 and "--vlm-score" in err and len(err.strip().splitlines()) == 1
    code, _, err = run_cli(["run", str(domain), "--models", f"hf-vlm:{tmp_path / 'missing'}"], capsys, monkeypatch)
    assert code == 2 and "hf-vlm:" in err and len(err.strip().splitlines()) == 1
    assert open_store().find("runs") == []


def test_show_reports_the_spread_of_accuracy_across_questions(llava: Path, home: Path, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from domainbench.engine.vlm_units import question_spread

    domain = save(DomainConfig(domain="vlm e2e", corruptions=[CorruptionChoice(name="brightness", severities=[5])]),
                  tmp_path / "plan.toml")
    questions = ["What is this?", "Which piece of clothing is shown?"]
    code, _, err = run_cli(["run", str(domain), "--models", f"hf-vlm:{llava}", "--limit", str(LIMIT), "--workers", "0",
                            "--no-stability", "--no-threat", "--run-id", "qs", "--question", questions[0],
                            "--question", questions[1]], capsys, monkeypatch)
    assert code == 0, err
    ds = open_dataset("sample").subset(LIMIT)
    batch = ds.load(np.arange(LIMIT))
    rgb = np.repeat(batch.images[..., None], 3, axis=-1)
    per_q = [plain_scores(llava, rgb, ds.classes, q).argmax(axis=1) for q in questions]
    expected = [float((p == batch.labels).mean()) for p in per_q]
    got_questions, rows = question_spread(open_store(), "qs")
    clean = next(r for r in rows if r["corruption"] == "clean")
    assert got_questions == questions
    assert clean["accuracy"] == pytest.approx(expected) and clean["spread"] == pytest.approx(max(expected) - min(expected))
    code, out, err = run_cli(["show", "qs"], capsys, monkeypatch)
    assert code == 0, err
    assert "prompt sensitivity" in out and f"Q2: {questions[1]}" in out


def test_models_lists_generative_backends(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, _ = run_cli(["models", "hf-vlm:*"], capsys, monkeypatch)
    assert code == 0 and "hf-vlm:llava-hf/llava-1.5-7b-hf" in out and "hf-vlm:Qwen/Qwen2-VL-2B-Instruct" in out


def test_out_of_memory_halves_the_batch(llava: Path) -> None:
    from domainbench.engine.scoring import classify, load_models

    (ms,) = load_models([f"hf-vlm:{llava}"], ["cat", "dog"], "cpu", 8, None)
    real = ms.model.classify
    seen: list[int] = []

    def flaky(images: np.ndarray, batch_size: int):  # type: ignore[no-untyped-def]
        seen.append(batch_size)
        if batch_size > 2:
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
        return real(images, batch_size)

    ms.model.classify = flaky  # type: ignore[method-assign]
    images = np.random.default_rng(0).integers(0, 256, (3, 28, 28), dtype=np.uint8)
    scored = classify(ms, images)
    assert seen == [8, 4, 2] and ms.batch_size == 2 and len(scored.preds) == 3

"""Answering a manifest's questions: batched greedy generation against a plain one-pair loop, multiple choice by
log-likelihood, contrastive models by prompt similarity, and the refusals."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pytest
import torch

from domainbench.errors import UserInputError
from domainbench.models import create_model
from domainbench.models.vlm_scoring import build_prompt
from domainbench.models.vqa_answering import (
    CONTRASTIVE_PROMPT,
    Ask,
    answer_questions,
    check_model_for_task,
    embed_for_retrieval,
    generate_batch,
)
from tests.models.test_hf_vlm import images, plain_scores
from tests.models.tiny_vlms import save_tiny_llava, save_tiny_qwen2_vl

QUESTIONS = ["Is this a shoe?", "What kind of garment is this? Answer with the name of the object.", "Which?"]


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("vqa_vlms")
    return {"llava": save_tiny_llava(root / "llava"), "qwen2_vl": save_tiny_qwen2_vl(root / "qwen2_vl")}


@functools.lru_cache(maxsize=2)
def _plain(folder: Path) -> tuple[object, object]:
    from transformers import AutoModelForImageTextToText, AutoProcessor

    processor = AutoProcessor.from_pretrained(folder, local_files_only=True)
    model = AutoModelForImageTextToText.from_pretrained(folder, local_files_only=True, dtype=torch.float32).eval()
    return processor, model


def plain_generate(folder: Path, image: np.ndarray, question: str, max_new_tokens: int) -> tuple[str, int]:
    """One pair, no padding, no batching: the answer and how many tokens it took (EOS included)."""
    processor, model = _plain(folder)
    enc = processor(images=[image], text=[build_prompt(processor, question)], return_tensors="pt")  # type: ignore[operator]
    tok = processor.tokenizer  # type: ignore[attr-defined]
    with torch.no_grad():
        out = model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=False,  # type: ignore[attr-defined]
                             eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    new = out[0, enc["input_ids"].shape[1]:]
    return tok.decode(new, skip_special_tokens=True).strip(), int(new.numel())


@pytest.mark.parametrize("family", ["llava", "qwen2_vl"])
def test_batched_left_padded_generation_equals_the_plain_loop(folders: dict[str, Path], family: str) -> None:
    model = create_model(f"hf-vlm:{folders[family]}", "cpu")
    ims = images(3)
    asks = [Ask(i, q) for i in range(3) for q in QUESTIONS[:2]]  # prompts of two lengths: padding in every batch
    got = answer_questions(model, ims, asks, batch_size=4, max_new_tokens=5)
    for a, answer in zip(asks, got):
        expected, n_tokens = plain_generate(folders[family], ims[a.image], a.question, 5)
        assert answer == expected and n_tokens <= 5
    assert any(got)  # random weights still say something


def test_generation_stops_at_eos_per_row(folders: dict[str, Path]) -> None:
    model = create_model(f"hf-vlm:{folders['llava']}", "cpu")
    tok = model.processor.tokenizer  # type: ignore[attr-defined]
    word = tok.convert_tokens_to_ids(tok.tokenize(" cat")[0])
    calls = []

    def force(_module: torch.nn.Module, _inputs: object, logits: torch.Tensor) -> torch.Tensor:
        logits = logits.clone()
        logits[..., word] += 1e4  # every step says "cat" ...
        if not calls:  # ... except row 0's first step (the prefill): end of sequence
            logits[0, -1, tok.eos_token_id] += 1e5
        calls.append(logits.shape)
        return logits

    handle = model.model.lm_head.register_forward_hook(force)  # type: ignore[attr-defined]
    try:
        ims = images(2)
        got = generate_batch(model, list(ims), [build_prompt(model.processor, QUESTIONS[0])] * 2, 4)  # type: ignore[attr-defined]
    finally:
        handle.remove()
    assert got[0] == "" and got[1].split() == ["cat"] * 4  # row 0 stopped at once; row 1 ran to the bound
    assert len(calls) == 4  # the prefill and three cached one-token steps


def test_multiple_choice_is_the_best_option_by_log_likelihood(folders: dict[str, Path]) -> None:
    model = create_model(f"hf-vlm:{folders['llava']}", "cpu")
    ims = images(3)
    choices = ("Ankle boot", "Trouser", "cat")
    asks = [Ask(i, QUESTIONS[2], choices) for i in range(3)] + [Ask(1, QUESTIONS[0], ("yes", "no"))]
    got = answer_questions(model, ims, asks, batch_size=2)
    ref = plain_scores(folders["llava"], ims, list(choices), QUESTIONS[2])
    assert got[:3] == [choices[j] for j in ref.argmax(axis=1)]
    assert got[3] == ["yes", "no"][int(plain_scores(folders["llava"], ims[1:2], ["yes", "no"], QUESTIONS[0]).argmax())]


def test_contrastive_answers_by_prompt_similarity_and_refuses_open_questions() -> None:
    model = create_model("embedded:fmnist-plain", "cpu")
    from domainbench.data import load_sample

    ds = load_sample()
    ims = ds.arrays[:4]  # type: ignore[index]
    asks = [Ask(i, "Is this a shoe?", yes_no=True) for i in range(4)] + [Ask(2, "Which?", ("Trouser", "Bag", "Coat"))]
    got = answer_questions(model, ims, asks, batch_size=3)
    emb = model.embed_images(ims).float()
    for a, answer in zip(asks, got):
        cands = a.choices or ("yes", "no")
        text = model.encode_text([CONTRASTIVE_PROMPT.format(question=a.question, answer=c) for c in cands]).float()
        assert answer == cands[int(torch.argmax(text @ emb[a.image]))]
    with pytest.raises(UserInputError, match=r"embedded:fmnist-plain is a contrastive model: .* 1 open question\(s\) "
                                             r"\(first: What is it\?\); give them `choices`"):
        answer_questions(model, ims, [*asks, Ask(0, "What is it?")])


def test_refusals(folders: dict[str, Path]) -> None:
    vlm = create_model(f"hf-vlm:{folders['llava']}", "cpu")
    with pytest.raises(UserInputError, match=r"hf-vlm:.* is a generative model: --task retrieval needs image and text"):
        embed_for_retrieval(vlm, images(2), ["a"])
    with pytest.raises(UserInputError, match=r"--max-new-tokens must be a whole number from 1 to 256"):
        answer_questions(vlm, images(1), [Ask(0, "q")], max_new_tokens=0)
    check_model_for_task("embedded:x", False, "vqa", [])  # no open question: accepted
    with pytest.raises(UserInputError, match=r"openai-vlm:m@http://h/v1: VQA through an endpoint is not supported yet"):
        check_model_for_task("openai-vlm:m@http://h/v1", True, "vqa", [])
    clip = create_model("embedded:fmnist-plain", "cpu")
    from domainbench.data import load_sample

    ims = load_sample().arrays[:3]  # type: ignore[index]
    image_emb, caption_emb = embed_for_retrieval(clip, ims, ["a bag", "a coat"], batch_size=2)
    assert image_emb.shape[0] == 3 and caption_emb.shape[0] == 2
    np.testing.assert_allclose(np.linalg.norm(image_emb, axis=1), 1.0, atol=1e-5)

"""Models answering a manifest's questions about images (VQA), and embedding images and captions (retrieval).

Generative models (``hf-vlm:``):

- open and yes/no questions: greedy decoding of at most ``max_new_tokens`` new tokens, batched over
  (image, question) pairs: the prompts (the scoring contract's P, one per question) are left-padded so every
  row's new tokens start right after its own prompt, the keys/values are cached by ``generate``, and a row
  stops at the end-of-sequence token (later positions are padding and decode to nothing);
- multiple-choice questions: each option is scored as the continuation of P by the shared-prefix
  log-likelihood scorer classification uses (``vlm_scoring.score_shared_prefix``), and the answer is the
  best-scoring option, written as the manifest spells it.

Contrastive models (dual encoders) answer yes/no and multiple-choice questions by prompt similarity: each
candidate answer a (``yes``/``no``, or each choice) becomes the text ``CONTRASTIVE_PROMPT`` =
``"Q: {question} A: {answer}"``, and the answer is the candidate whose text embedding is closest (cosine)
to the image's. They cannot answer open questions, and a manifest holding any is refused before a model
runs. Retrieval needs image and text embeddings: generative models are refused for it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from domainbench.errors import UserInputError
from domainbench.models.base import VisionLanguageModel
from domainbench.records.model_backends import capabilities_of
from domainbench.models.generative import MAX_NEW_TOKENS, is_generative
from domainbench.models.vlm_scoring import build_prompt, continuation_ids, hwc_images, score_shared_prefix, to_model

CONTRASTIVE_PROMPT = "Q: {question} A: {answer}"
YES_NO_ANSWERS = ("yes", "no")
#: the largest --max-new-tokens accepted: answers are short, and the bound keeps a run's time predictable
MAX_NEW_TOKENS_LIMIT = 256


@dataclass(frozen=True)
class Ask:
    """One question to put to a model: the index of its image in the batch, its text and its kind."""

    image: int
    question: str
    choices: tuple[str, ...] | None = None
    yes_no: bool = False

    @property
    def open(self) -> bool:
        return not self.choices and not self.yes_no


def check_max_new_tokens(value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_NEW_TOKENS_LIMIT:
        raise UserInputError(f"--max-new-tokens must be a whole number from 1 to {MAX_NEW_TOKENS_LIMIT} (answers are "
                             f"short; {MAX_NEW_TOKENS} is the default), got {value!r}")
    return value


def check_model_for_task(model_name: str, generative: bool, task: str, open_questions: Sequence[str] = ()) -> None:
    """Refuse a model that cannot do ``task`` with one line naming the model and the fix."""
    if task == "retrieval" and generative:
        raise UserInputError(f"{model_name} is a generative model: --task retrieval needs image and text embeddings; "
                             "use a contrastive model (embedded:, open_clip:, hf:, local:)")
    if task == "vqa" and capabilities_of(model_name).remote:
        raise UserInputError(f"{model_name}: VQA through an endpoint is not supported yet; use an hf-vlm: model (or "
                             "a contrastive one for yes/no and multiple-choice questions)")
    if task == "vqa" and not generative and open_questions:
        first = open_questions[0]
        raise UserInputError(f"{model_name} is a contrastive model: it answers yes/no and multiple-choice questions "
                             f"only, and the manifest has {len(open_questions)} open question(s) (first: {first}); "
                             "give them `choices` or an answer_type of yes/no, or use a generative model "
                             "(hf-vlm:, openai-vlm:)")


def answer_questions(model: VisionLanguageModel, images: np.ndarray, asks: Sequence[Ask], batch_size: int = 8,
                     max_new_tokens: int = MAX_NEW_TOKENS) -> list[str]:
    """The model's answer to each question about ``images`` (uint8 (N, H, W[, 3])), in the order asked."""
    check_max_new_tokens(max_new_tokens)
    if is_generative(model):
        check_model_for_task(model.name, True, "vqa")
        if not hasattr(model, "processor") or not hasattr(model, "model"):
            raise UserInputError(f"{model.name}: VQA with this backend is not supported yet; use an hf-vlm: model")
        return _generative_answers(model, images, asks, max(1, batch_size), max_new_tokens)
    open_ = [a.question for a in asks if a.open]
    check_model_for_task(model.name, False, "vqa", open_)
    return _contrastive_answers(model, images, asks, max(1, batch_size))


def _generative_answers(model: Any, images: np.ndarray, asks: Sequence[Ask], batch_size: int,
                        max_new_tokens: int) -> list[str]:
    ims = hwc_images(images, model.name)
    out: list[str] = [""] * len(asks)
    free = [i for i, a in enumerate(asks) if not a.choices]
    for start in range(0, len(free), batch_size):
        chunk = free[start : start + batch_size]
        answers = generate_batch(model, [ims[asks[i].image] for i in chunk],
                                 [build_prompt(model.processor, asks[i].question) for i in chunk], max_new_tokens)
        for i, a in zip(chunk, answers):
            out[i] = a
    # multiple choice: one prefix forward per image for all questions sharing text and options
    groups: dict[tuple[str, tuple[str, ...]], list[int]] = defaultdict(list)
    for i, a in enumerate(asks):
        if a.choices:
            groups[(a.question, a.choices)].append(i)
    for (question, choices), members in groups.items():
        prompt = build_prompt(model.processor, question)
        conts = continuation_ids(model.processor, prompt, choices)
        for start in range(0, len(members), batch_size):
            chunk = members[start : start + batch_size]
            scores = score_shared_prefix(model.model, model.processor, [ims[asks[i].image] for i in chunk], prompt,
                                         conts, class_batch=batch_size, device=model.device)
            for i, row in zip(chunk, scores):
                out[i] = choices[int(np.argmax(row))]
    return out


def generate_batch(model: Any, images: Sequence[np.ndarray], prompts: Sequence[str], max_new_tokens: int) -> list[str]:
    """Greedy answers of (image, prompt) pairs in one left-padded ``generate`` call."""
    tok = getattr(model.processor, "tokenizer", model.processor)
    enc = model.processor(images=list(images), text=list(prompts), return_tensors="pt", padding=True,
                          padding_side="left")
    enc = to_model(enc, model.model, model.device)
    eos = getattr(tok, "eos_token_id", None)
    pad = getattr(tok, "pad_token_id", None)
    with torch.inference_mode():
        seqs = model.model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=False, num_beams=1,
                                    eos_token_id=eos, pad_token_id=pad if pad is not None else eos)
    new = seqs[:, enc["input_ids"].shape[1]:]
    return [t.strip() for t in tok.batch_decode(new, skip_special_tokens=True)]


def _contrastive_answers(model: VisionLanguageModel, images: np.ndarray, asks: Sequence[Ask],
                         batch_size: int) -> list[str]:
    image_emb = []
    with torch.inference_mode():
        for start in range(0, len(images), batch_size):
            pix = model.preprocess(images[start : start + batch_size]).to(model.device)
            image_emb.append(model.encode_image(pix).float().cpu())
    emb = torch.cat(image_emb) if image_emb else torch.zeros((0, 1))
    candidates = [a.choices if a.choices else YES_NO_ANSWERS for a in asks]
    texts = sorted({CONTRASTIVE_PROMPT.format(question=a.question, answer=c) for a, cs in zip(asks, candidates)
                    for c in cs})
    with torch.inference_mode():
        text_emb = torch.cat([model.encode_text(texts[s : s + 256]).float().cpu() for s in range(0, len(texts), 256)])
    row = {t: i for i, t in enumerate(texts)}
    out = []
    for a, cs in zip(asks, candidates):
        idx = [row[CONTRASTIVE_PROMPT.format(question=a.question, answer=c)] for c in cs]
        sims = text_emb[idx] @ emb[a.image]
        out.append(cs[int(torch.argmax(sims))])
    return out


def embed_for_retrieval(model: VisionLanguageModel, images: np.ndarray, captions: Sequence[str],
                        batch_size: int = 64, caption_embeddings: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(image embeddings, caption embeddings) as float32 arrays; generative models are refused.

    ``caption_embeddings``: the model's embeddings of ``captions`` from an earlier cell (captions are never
    corrupted, so every cell reuses the clean cell's instead of encoding them again)."""
    check_model_for_task(model.name, is_generative(model), "retrieval")
    with torch.inference_mode():
        ims = [model.encode_image(model.preprocess(images[s : s + batch_size]).to(model.device)).float().cpu()
               for s in range(0, len(images), batch_size)]
        if caption_embeddings is not None:
            return torch.cat(ims).numpy(), caption_embeddings
        txt = [model.encode_text(list(captions[s : s + batch_size])).float().cpu()
               for s in range(0, len(captions), batch_size)]
    return torch.cat(ims).numpy(), torch.cat(txt).numpy()


__all__ = [
    "CONTRASTIVE_PROMPT",
    "Ask",
    "answer_questions",
    "check_max_new_tokens",
    "check_model_for_task",
    "embed_for_retrieval",
    "generate_batch",
]

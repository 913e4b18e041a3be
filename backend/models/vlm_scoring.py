"""Log-likelihood classification with a generative VLM: the prompt contract and shared-prefix scoring.

The contract (docs/generative-vlms.md), per image, question and class:

* prompt P = the processor's chat template over one user turn [image, question] with
  ``add_generation_prompt=True``; without a chat template ``"USER: <image>\\n{question} ASSISTANT:"``
  with the processor's image token;
* continuation = ``" " + class name`` (no space when P ends in whitespace);
* the continuation tokens are those of tokenise(P + continuation) after the first len(tokenise(P))
  (lm-eval-harness's ``_encode_pair``); the model reads tokenise(P) + continuation tokens;
* score = sum of the continuation tokens' log-probabilities (``mean``: divided by their count).

The image tokens are special tokens, so the text after them tokenises the same whatever their
number: the continuation tokens are computed once per (question, class) from the text alone,
and the image + prompt prefix is run once per image. Its keys/values are cached and every class
continuation is scored from them in padded batches (right padding: with causal attention the
padding never reaches a real position). :func:`score_naive` is the per-(image, class) forward
the benchmark compares against.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from domainbench.models.hub_common import as_uint8_nchw

FALLBACK_PROMPT = "USER: {image}\n{question} ASSISTANT:"


def image_token(processor: Any) -> str:
    token = getattr(processor, "image_token", None)
    return token if isinstance(token, str) and token else "<image>"


def build_prompt(processor: Any, question: str) -> str:
    """P: the chat template applied to [image, question] with the generation prompt, or the fallback."""
    if getattr(processor, "chat_template", None):
        messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": question}]}]
        return processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return FALLBACK_PROMPT.format(image=image_token(processor), question=question)


def continuation_text(prompt: str, classname: str) -> str:
    return classname if prompt[-1:].isspace() else " " + classname


def _tokenizer(processor: Any) -> Any:
    return getattr(processor, "tokenizer", processor)


def continuation_ids(processor: Any, prompt: str, classes: Sequence[str]) -> list[list[int]]:
    """Each class's continuation tokens: tokenise(P + continuation)[len(tokenise(P)):]."""
    tok = _tokenizer(processor)
    n_prompt = len(tok(prompt)["input_ids"])
    out = []
    for c in classes:
        ids = list(tok(prompt + continuation_text(prompt, c))["input_ids"][n_prompt:])
        if not ids:
            raise ValueError(f"class name {c!r} tokenises to nothing after the prompt; give a non-empty class name")
        out.append(ids)
    return out


def hwc_images(images: np.ndarray | torch.Tensor, name: str) -> list[np.ndarray]:
    """uint8 (N, H, W[, C]) -> a list of RGB (H, W, 3) arrays, what every image processor accepts."""
    x = as_uint8_nchw(images, name).permute(0, 2, 3, 1).cpu().numpy()
    return [np.ascontiguousarray(im) for im in x]


def to_model(enc: Any, model: Any, device: torch.device) -> dict[str, Any]:
    """Processor outputs on the model's device, float ones (pixels) in the model's dtype (bf16/fp16 on a GPU)."""
    dtype = next(model.parameters()).dtype
    return {k: (v.to(device, dtype=dtype) if v.is_floating_point() else v.to(device)) if isinstance(v, torch.Tensor)
            else v for k, v in dict(enc).items()}


def _pad_id(processor: Any) -> int:
    tok = _tokenizer(processor)
    for attr in ("pad_token_id", "eos_token_id"):
        v = getattr(tok, attr, None)
        if isinstance(v, int):
            return v
    return 0


def _logprobs(logits: torch.Tensor) -> torch.Tensor:
    return logits.float().log_softmax(dim=-1)


def _reduce(total: float, count: int, how: str) -> float:
    return total / count if how == "mean" else total


def _row_cache(cache: Any, row: int, repeats: int, config: Any) -> Any:
    """A new cache holding one prefix of a batched cache, repeated ``repeats`` times."""
    from transformers import DynamicCache

    layers = []
    for entry in cache:
        k, v = entry[0], entry[1]
        if k is None or v is None:
            layers.append((None, None))
            continue
        k = k[row : row + 1].expand(repeats, *k.shape[1:])
        v = v[row : row + 1].expand(repeats, *v.shape[1:])
        layers.append((k, v, *entry[2:]) if len(entry) > 2 and entry[2] is not None else (k, v))
    return DynamicCache(layers, config=config)


def _positions(model: Any, start: int, length: int, row: int, b: int, device: torch.device) -> torch.Tensor:
    """Position ids of continuation tokens after a cached prefix of ``start`` tokens.

    Models with multimodal rotary positions (Qwen2-VL: 3 position axes) shift text positions by
    the ``rope_deltas`` the prefix forward recorded per image; the others count on from ``start``.
    """
    pos = torch.arange(start, start + length, device=device)
    deltas = getattr(getattr(model, "model", None), "rope_deltas", None)
    if isinstance(deltas, torch.Tensor):
        pos = pos + deltas[row].to(device).reshape(-1)[0]
        return pos.view(1, 1, -1).expand(3, b, -1)
    return pos.view(1, -1).expand(b, -1)


@torch.inference_mode()
def score_shared_prefix(
    model: Any,
    processor: Any,
    images: Sequence[np.ndarray],
    prompt: str,
    conts: Sequence[Sequence[int]],
    class_batch: int,
    reduce: str = "sum",
    device: torch.device | None = None,
) -> np.ndarray:
    """(N, C) class scores: the image + prompt prefix once per image, continuations from its cache.

    ``images`` are the (H, W, 3) uint8 arrays scored together in one prefix forward (a batch of
    equal-length prefixes; images whose prefixes differ in length go one by one).
    """
    device = device or next(model.parameters()).device
    enc = processor(images=list(images), text=[prompt] * len(images), return_tensors="pt")
    mask = enc.get("attention_mask")
    if len(images) > 1 and mask is not None and not bool(mask.all()):
        # prefixes of different lengths (image-size dependent token counts): no padding inside a cache
        return np.concatenate([score_shared_prefix(model, processor, [im], prompt, conts, class_batch, reduce, device)
                               for im in images])
    enc = to_model(enc, model, device)
    out = model(**enc, use_cache=True)
    prefix_len = enc["input_ids"].shape[1]
    first = _logprobs(out.logits[:, -1])  # (N, V): the first continuation token's distribution
    pad = _pad_id(processor)
    scores = np.zeros((len(images), len(conts)), dtype=np.float64)
    for i in range(len(images)):
        for j0 in range(0, len(conts), class_batch):
            chunk = conts[j0 : j0 + class_batch]
            b, t = len(chunk), max(len(c) for c in chunk)
            ids = torch.full((b, t), pad, dtype=torch.long)
            cmask = torch.zeros((b, t), dtype=torch.long)
            for r, c in enumerate(chunk):
                ids[r, : len(c)] = torch.tensor(c)
                cmask[r, : len(c)] = 1
            tail = ids.to(device)
            lp_first = first[i, tail[:, 0]]  # (b,)
            total = lp_first.clone()
            if t > 1:
                attn = torch.cat([torch.ones((b, prefix_len), dtype=torch.long), cmask], dim=1).to(device)
                cache = _row_cache(out.cache, i, b, model.config)
                # only the first t-1 tokens need to be read: the last one is scored, never conditioned on
                o = model(input_ids=tail[:, :-1], attention_mask=attn[:, :-1], cache=cache, use_cache=True,
                          position_ids=_positions(model, prefix_len, t - 1, i, b, device))
                lp = _logprobs(o.logits).gather(-1, tail[:, 1:, None])[..., 0]  # (b, t-1)
                total = total + (lp * cmask[:, 1:].to(device)).sum(dim=1)
            counts = cmask.sum(dim=1)
            for r in range(b):
                scores[i, j0 + r] = _reduce(float(total[r]), int(counts[r]), reduce)
    return scores


def _extend_per_token(v: Any, ids_shape: torch.Size, length: int) -> Any:
    """A per-token input (token types of Qwen2-VL) grown to ``length`` with text tokens' type 0."""
    if isinstance(v, torch.Tensor) and v.ndim == 2 and v.shape == ids_shape:
        return torch.cat([v, v.new_zeros((v.shape[0], length - v.shape[1]))], dim=1)
    return v


@torch.inference_mode()
def score_naive(model: Any, processor: Any, image: np.ndarray, prompt: str, classes: Sequence[str],
                reduce: str = "sum", device: torch.device | None = None) -> np.ndarray:
    """(C,) scores of one image, one full forward per class (the contract, without sharing)."""
    device = device or next(model.parameters()).device
    ctx = processor(images=[image], text=[prompt], return_tensors="pt")
    n_ctx = ctx["input_ids"].shape[1]
    out = np.zeros(len(classes), dtype=np.float64)
    for j, c in enumerate(classes):
        whole = processor(images=[image], text=[prompt + continuation_text(prompt, c)], return_tensors="pt")
        cont = whole["input_ids"][0, n_ctx:]
        ids = torch.cat([ctx["input_ids"][0], cont])[None]
        inputs = {k: _extend_per_token(v, ctx["input_ids"].shape, ids.shape[1]) for k, v in ctx.items()
                  if k not in ("input_ids", "attention_mask")}
        inputs = to_model(inputs, model, device)
        logits = model(input_ids=ids.to(device), attention_mask=torch.ones_like(ids).to(device), **inputs).logits[0]
        lp = _logprobs(logits)
        total = sum(float(lp[n_ctx - 1 + k, tok]) for k, tok in enumerate(cont.tolist()))
        out[j] = _reduce(total, len(cont), reduce)
    return out


__all__ = [
    "FALLBACK_PROMPT",
    "build_prompt",
    "continuation_ids",
    "continuation_text",
    "hwc_images",
    "image_token",
    "score_naive",
    "score_shared_prefix",
    "to_model",
]

"""``hf-vlm:NAME_OR_DIR`` - generative VLMs through transformers (LLaVA, Qwen2-VL, SmolVLM, PaliGemma, ...).

NAME is a hub repository id read from the local HF cache only, or a ``save_pretrained`` folder
holding the model (``config.json`` + weights) and its processor (``processor_config.json`` /
``preprocessor_config.json`` + tokenizer files). Loaded with ``AutoProcessor`` and
``AutoModelForImageTextToText``: every family the installed transformers maps there works.

Classification is by log-likelihood of each class name after the prompt (see
:mod:`domainbench.models.vlm_scoring` for the contract) or, with ``--vlm-mode generate``, by
parsing a greedy answer. Image embeddings for stability and the PD threat are the vision
tower's pooled output where the tower has one (CLIP/SigLIP towers: LLaVA, PaliGemma), otherwise
the mean over each image's tokens of the features the vision encoder hands the language model
(``get_image_features``: Qwen2-VL, Idefics3/SmolVLM).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from domainbench.errors import ModelUnavailableError, UserInputError
from domainbench.models.generative import (
    ANSWER_CHARS,
    MAX_NEW_TOKENS,
    GenerativeVLM,
    VLMOptions,
    VLMResult,
    parse_answer,
)
from domainbench.models.hub_common import as_uint8_nchw, cached_repo, cuda_autocast_dtype, offline, unavailable, unit_rows
from domainbench.models.vlm_scoring import build_prompt, continuation_ids, hwc_images, score_shared_prefix, to_model

#: hub ids of the families this backend is tested against (any AutoModelForImageTextToText one loads)
KNOWN_MODELS: list[str] = [
    "llava-hf/llava-1.5-7b-hf",
    "llava-hf/llava-v1.6-mistral-7b-hf",
    "llava-hf/llava-onevision-qwen2-0.5b-ov-hf",
    "Qwen/Qwen2-VL-2B-Instruct",
    "Qwen/Qwen2.5-VL-3B-Instruct",
    "HuggingFaceTB/SmolVLM-256M-Instruct",
    "HuggingFaceTB/SmolVLM-Instruct",
    "HuggingFaceM4/Idefics3-8B-Llama3",
    "google/paligemma-3b-mix-224",
]

#: processor outputs that describe the text, not the images
_TEXT_INPUTS = ("input_ids", "attention_mask", "token_type_ids", "mm_token_type_ids")
_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def supported_model_types() -> list[str]:
    """Model types the installed transformers loads with AutoModelForImageTextToText."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES

    return sorted(MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES)


def resolve_dtype(dtype: str, device: torch.device) -> torch.dtype:
    """``auto``: bf16/fp16 on a GPU (whichever it computes natively), float32 on a CPU."""
    if dtype == "auto":
        return cuda_autocast_dtype(device) if device.type == "cuda" else torch.float32
    return _DTYPES[dtype]


class HFGenerativeVLM(GenerativeVLM):
    """A transformers image-text-to-text model with its processor."""

    def __init__(self, name: str, model: torch.nn.Module, processor: Any, device: torch.device) -> None:
        self.name = name
        self.device = device
        self.model = model.eval()
        self.processor = processor
        self.family: str = model.config.model_type
        self.configure(["?"], VLMOptions())  # replaced by the engine's configure(classes, options)

    def configure(self, classes: Sequence[str], options: VLMOptions) -> None:
        super().configure(classes, options)
        if options.mode == "choice":
            raise UserInputError(
                f"{self.name}: --vlm-mode choice is for openai-vlm: endpoints; local models score every "
                "class name directly (--vlm-mode loglik, the default) or answer freely (--vlm-mode generate)"
            )
        dtype = resolve_dtype(options.dtype, self.device)
        if next(self.model.parameters()).dtype != dtype:
            self.model.to(dtype)
        self.prompts = [build_prompt(self.processor, q) for q in options.questions]
        self.conts = [continuation_ids(self.processor, p, self.classes) for p in self.prompts]

    # -- images ---------------------------------------------------------------------------
    def preprocess(self, images: np.ndarray) -> torch.Tensor:
        # the processor needs the images themselves (token counts depend on their size): uint8 through
        return as_uint8_nchw(images, self.name)

    def encode_image(self, pixels: torch.Tensor) -> torch.Tensor:
        """uint8 (N, 3, H, W) -> L2-normalised vision-tower embeddings (see the module docstring)."""
        images = [np.ascontiguousarray(im) for im in pixels.permute(0, 2, 3, 1).cpu().numpy()]
        # through the whole processor, as classification sees the images (it groups them per prompt)
        enc = self.processor(images=images, text=[self.prompts[0]] * len(images), return_tensors="pt")
        inputs = to_model({k: v for k, v in enc.items() if isinstance(v, torch.Tensor) and k not in _TEXT_INPUTS},
                          self.model, self.device)
        with torch.inference_mode():
            return unit_rows(self._pooled(inputs, len(images)))

    def _pooled(self, inputs: dict[str, torch.Tensor], n: int) -> torch.Tensor:
        tower = getattr(getattr(self.model, "model", None), "vision_tower", None)
        if tower is not None and set(inputs) == {"pixel_values"}:
            pooled = getattr(tower(pixel_values=inputs["pixel_values"]), "pooler_output", None)
            if isinstance(pooled, torch.Tensor) and pooled.ndim == 2 and len(pooled) == n:
                return pooled
        feats = self.model.get_image_features(**inputs)
        feats = getattr(feats, "pooler_output", feats)
        if isinstance(feats, (list, tuple)):
            return torch.stack([f.reshape(-1, f.shape[-1]).mean(dim=0) for f in feats])
        if feats.ndim == 3:
            return feats.mean(dim=1)
        # every image's tokens in one (sum of tokens, D) block: equal-size images have equal counts
        return feats.reshape(n, -1, feats.shape[-1]).mean(dim=1)

    # -- classification ------------------------------------------------------------------------
    def classify(self, images: np.ndarray | torch.Tensor, batch_size: int) -> VLMResult:
        ims = hwc_images(images, self.name)
        if self.options.mode == "generate":
            return self._generate(ims, batch_size)
        per_q = [self._scores(ims, p, c, batch_size) for p, c in zip(self.prompts, self.conts)]
        scores = np.mean(per_q, axis=0)  # the question ensemble averages the class scores
        per_question = np.stack([s.argmax(axis=1) for s in per_q]) if len(per_q) > 1 else None
        return VLMResult(scores.argmax(axis=1).astype(np.int64), scores=scores, per_question=per_question)

    def _scores(self, ims: list[np.ndarray], prompt: str, conts: list[list[int]], batch_size: int) -> np.ndarray:
        out = []
        for i in range(0, len(ims), max(1, batch_size)):
            out.append(score_shared_prefix(self.model, self.processor, ims[i : i + batch_size], prompt, conts,
                                           class_batch=max(1, batch_size), reduce=self.options.score,
                                           device=self.device))
        return np.concatenate(out) if out else np.zeros((0, len(conts)))

    def answer(self, ims: list[np.ndarray], prompt: str) -> list[str]:
        """Greedy answers (at most MAX_NEW_TOKENS new tokens) of a batch of images to one prompt."""
        tok = getattr(self.processor, "tokenizer", self.processor)
        # left padding: every row's new tokens start right after its own prompt
        enc = self.processor(images=ims, text=[prompt] * len(ims), return_tensors="pt", padding=True,
                             padding_side="left")
        enc = to_model(enc, self.model, self.device)
        with torch.inference_mode():
            out = self.model.generate(**enc, max_new_tokens=MAX_NEW_TOKENS, do_sample=False,
                                      pad_token_id=getattr(tok, "pad_token_id", None) or getattr(tok, "eos_token_id", None))
        new = out[:, enc["input_ids"].shape[1]:]
        return [t.strip() for t in tok.batch_decode(new, skip_special_tokens=True)]

    def _generate(self, ims: list[np.ndarray], batch_size: int) -> VLMResult:
        per_q_answers: list[list[str]] = []
        for prompt in self.prompts:
            answers: list[str] = []
            for i in range(0, len(ims), max(1, batch_size)):
                answers += self.answer(ims[i : i + batch_size], prompt)
            per_q_answers.append(answers)
        per_q = np.array([[parse_answer(a, self.classes) for a in ans] for ans in per_q_answers], dtype=np.int64)
        return VLMResult(per_q[0], answers=[a[:ANSWER_CHARS] for a in per_q_answers[0]],
                         per_question=per_q if len(per_q) > 1 else None)


    # -- clips ----------------------------------------------------------------------------------
    def video_prompts(self) -> list[str] | None:
        """The prompts with a video in place of the image, or None where the model takes no video: it needs a
        video processor, a video token in its config and a chat template that places the video (Qwen2-VL)."""
        if getattr(self.processor, "video_processor", None) is None or not getattr(self.processor, "chat_template", None):
            return None
        token = getattr(self.processor, "video_token", None)
        if getattr(self.model.config, "video_token_id", None) is None or not isinstance(token, str):
            return None
        prompts = []
        for q in self.options.questions:
            messages = [{"role": "user", "content": [{"type": "video"}, {"type": "text", "text": q}]}]
            prompt = self.processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
            if token not in prompt:
                return None
            prompts.append(prompt)
        return prompts

    def accepts_video(self) -> bool:
        return self.video_prompts() is not None

    def classify_videos(self, clips: Sequence[np.ndarray]) -> VLMResult:
        """One answer per clip, its sampled frames (T, H, W, 3) given together as one video input: by the
        log-likelihood of each class name after the video prompt (the image contract's score, one full forward
        per class) or, with ``--vlm-mode generate``, a greedy answer parsed to a class."""
        prompts = self.video_prompts()
        if prompts is None:
            raise UserInputError(f"{self.name}: this model takes no video input; its clips are answered frame by frame")
        videos = [np.ascontiguousarray(hwc_images(c, self.name)) for c in clips]
        if self.options.mode == "generate":
            per_q_answers = [[self._answer_video(v, p) for v in videos] for p in prompts]
            per_q = np.array([[parse_answer(a, self.classes) for a in ans] for ans in per_q_answers], dtype=np.int64)
            return VLMResult(per_q[0], answers=[a[:ANSWER_CHARS] for a in per_q_answers[0]],
                             per_question=per_q if len(per_q) > 1 else None)
        per_q_scores = [np.array([self._video_scores(v, p) for v in videos]).reshape(len(videos), len(self.classes))
                        for p in prompts]
        scores = np.mean(per_q_scores, axis=0)
        per_question = np.stack([s.argmax(axis=1) for s in per_q_scores]) if len(per_q_scores) > 1 else None
        return VLMResult(scores.argmax(axis=1).astype(np.int64), scores=scores, per_question=per_question)

    @torch.inference_mode()
    def _video_scores(self, video: np.ndarray, prompt: str) -> np.ndarray:
        ctx = self.processor(videos=[video], text=[prompt], return_tensors="pt")
        n_ctx = ctx["input_ids"].shape[1]
        out = np.zeros(len(self.classes), dtype=np.float64)
        for j, cont in enumerate(continuation_ids(self.processor, prompt, self.classes)):
            ids = torch.cat([ctx["input_ids"][0], torch.tensor(cont, dtype=ctx["input_ids"].dtype)])[None]
            extra = {k: torch.cat([v, v.new_zeros((1, len(cont)))], dim=1) for k, v in ctx.items()
                     if k in ("mm_token_type_ids", "token_type_ids")}  # the continuation is text
            inputs = to_model({k: v for k, v in ctx.items() if k not in _TEXT_INPUTS} | extra, self.model, self.device)
            logits = self.model(input_ids=ids.to(self.device), attention_mask=torch.ones_like(ids).to(self.device),
                                **inputs).logits[0].float()
            lp = torch.log_softmax(logits, dim=-1)
            total = float(sum(lp[n_ctx - 1 + k, t] for k, t in enumerate(cont)))
            out[j] = total / len(cont) if self.options.score == "mean" else total
        return out

    def _answer_video(self, video: np.ndarray, prompt: str) -> str:
        tok = getattr(self.processor, "tokenizer", self.processor)
        enc = to_model(self.processor(videos=[video], text=[prompt], return_tensors="pt"), self.model, self.device)
        with torch.inference_mode():
            out = self.model.generate(**enc, max_new_tokens=MAX_NEW_TOKENS, do_sample=False,
                                      pad_token_id=getattr(tok, "pad_token_id", None) or getattr(tok, "eos_token_id", None))
        return tok.batch_decode(out[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)[0].strip()


def _has_processor(folder: Path) -> bool:
    return any((folder / f).is_file() for f in ("processor_config.json", "preprocessor_config.json"))


def _check_config_json(path: Path, name: str) -> None:
    """A saved model's config.json must be a JSON object naming its model_type (transformers fails otherwise)."""
    import json

    try:
        doc = json.loads(path.read_bytes().decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise UserInputError(f"{name}: {path} is not JSON ({type(e).__name__}: {str(e)[:120]}); save the model "
                             "again with model.save_pretrained(FOLDER)") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("model_type"), str) or not doc["model_type"]:
        raise UserInputError(f"{name}: {path} names no model_type, so transformers cannot tell which model it is; "
                             "save the model again with model.save_pretrained(FOLDER)")


def load_hf_vlm(source: str | Path, device: torch.device, name: str) -> HFGenerativeVLM:
    """Load a saved folder or a cached hub repo id, offline, as a generative VLM."""
    from transformers import AutoConfig, AutoModelForImageTextToText, AutoProcessor

    if not str(source).strip():  # Path("") is the working directory: say what is missing instead
        raise UserInputError(f"{name}: give a model after hf-vlm:, a hub id (hf-vlm:llava-hf/llava-1.5-7b-hf) or a "
                             "folder saved with save_pretrained (hf-vlm:./my-model)")
    src = Path(source).expanduser()
    repo_id: str | None = None
    if src.is_dir():
        if not (src / "config.json").is_file():
            raise UserInputError(f"{name}: folder {str(src)!r} has no config.json; save the model there with "
                                 "model.save_pretrained(FOLDER)")
        _check_config_json(src / "config.json", name)
        if not _has_processor(src):
            raise UserInputError(f"{name}: folder {str(src)!r} has no processor (processor_config.json or "
                                 "preprocessor_config.json); save it beside the model with "
                                 "AutoProcessor.from_pretrained(ID).save_pretrained(FOLDER)")
        where = str(src)
    else:
        repo_id = where = cached_repo(name, str(source), "hf-vlm:llava-hf/llava-1.5-7b-hf")
    try:
        with offline():
            config = AutoConfig.from_pretrained(where, local_files_only=True)
            families = supported_model_types()
            if config.model_type not in families:
                raise UserInputError(
                    f"{name}: model type {config.model_type!r} is not an image-text-to-text model this "
                    f"transformers loads (it loads {', '.join(families[:12])}, ...); contrastive models go "
                    "through hf: or open_clip:"
                )
            dtype = resolve_dtype("auto", device)
            model = AutoModelForImageTextToText.from_pretrained(where, local_files_only=True, dtype=dtype)
            processor = AutoProcessor.from_pretrained(where, local_files_only=True)
    except (OSError, ImportError) as e:
        first = str(e).strip().splitlines()[0][:300] if str(e).strip() else type(e).__name__
        if isinstance(e, ImportError):
            raise ModelUnavailableError(f"{name}: loading needs a package that is not installed ({first}); "
                                        "install it and retry") from e
        raise unavailable(name, repo_id, extra=f"transformers said: {first}") from e
    if getattr(processor, "image_processor", None) is None or getattr(processor, "tokenizer", None) is None:
        raise UserInputError(f"{name}: the processor in {where!r} lacks an image processor or a tokenizer; save "
                             "the model's full processor (AutoProcessor) beside it")
    return HFGenerativeVLM(name, model.to(device), processor, device)


def create_hf_vlm(spec: str, device: torch.device) -> GenerativeVLM:
    return load_hf_vlm(spec, device, f"hf-vlm:{spec}")


__all__ = ["KNOWN_MODELS", "HFGenerativeVLM", "create_hf_vlm", "load_hf_vlm", "resolve_dtype", "supported_model_types"]

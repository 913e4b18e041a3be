"""``hf:NAME`` - CLIP, SigLIP and ALIGN dual encoders through transformers.

NAME is a hub repository id (``openai/clip-vit-base-patch32``) read from the local HF cache
only (``local_files_only=True``), or a folder written by ``save_pretrained`` (``config.json``,
weights, tokenizer files, ``preprocessor_config.json``); ``local:PATH`` lands here too.

The model family (``config.model_type``) decides the text settings, never the caller:

========  =========================================  ===========================================
family    padding / length                           why
========  =========================================  ===========================================
clip      longest in batch, truncate at the text     causal attention + EOS pooling: padding is
          tower's ``max_position_embeddings`` (77)   invisible to the embedding
siglip    ``max_length`` = ``max_position_embeddings`` trained on texts padded to 64 tokens with
          (64), ``input_ids`` only (no mask)         no attention mask; it pools the last
                                                      position, so other padding changes results
align     ``max_length`` 64 (AlignProcessor's        the setting ALIGN's processor applies
          default), with attention mask
========  =========================================  ===========================================

Images go through the checkpoint's own image processor (transformers' torchvision backend,
batched on uint8 tensors), so resize/crop/normalisation are the family's and the checkpoint's.

Logit scale: CLIP ``exp(logit_scale)``; SigLIP ``exp(logit_scale)`` plus ``logit_bias`` (its
probabilities are ``sigmoid(scale * cos + bias)``; the argmax over classes does not depend on
either); ALIGN ``1 / temperature``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from domainbench.errors import ModelUnavailableError, UserInputError
from domainbench.models import register_model
from domainbench.models.base import VisionLanguageModel
from domainbench.models.hub_common import as_uint8_nchw, autocast_for, cached_repo, offline, unavailable, unit_rows

KNOWN_MODELS: list[str] = [
    "openai/clip-vit-base-patch32",
    "openai/clip-vit-base-patch16",
    "openai/clip-vit-large-patch14",
    "openai/clip-vit-large-patch14-336",
    "laion/CLIP-ViT-B-32-laion2B-s34B-b79K",
    "google/siglip-base-patch16-224",
    "google/siglip-base-patch16-384",
    "google/siglip-large-patch16-384",
    "google/siglip-so400m-patch14-384",
    "kakaobrain/align-base",
]


@dataclass(frozen=True)
class TextRule:
    """How a family's texts are tokenised: what the model was trained with."""

    padding: str  # "longest" or "max_length"
    #: fixed length; None = the text tower's max_position_embeddings
    max_length: int | None
    #: tokenizer outputs passed to the model (others, e.g. a mask SigLIP never saw, are dropped)
    inputs: tuple[str, ...]


TEXT_RULES: dict[str, TextRule] = {
    "clip": TextRule("longest", None, ("input_ids", "attention_mask")),
    "siglip": TextRule("max_length", None, ("input_ids",)),
    "align": TextRule("max_length", 64, ("input_ids", "attention_mask", "token_type_ids")),
}


class HFDualEncoder(VisionLanguageModel):
    """A transformers CLIPModel / SiglipModel / AlignModel with its processor and text rule."""

    def __init__(
        self, name: str, model: torch.nn.Module, image_processor: Any, tokenizer: Any, device: torch.device
    ) -> None:
        self.name = name
        self.device = device
        self.model = model.eval()
        self.family: str = model.config.model_type
        self.image_processor = image_processor
        self.tokenizer = tokenizer
        rule = TEXT_RULES[self.family]
        self.text_rule = rule
        positions = int(model.config.text_config.max_position_embeddings)
        self.text_max_length = min(rule.max_length, positions) if rule.max_length else positions
        with torch.no_grad():
            if self.family == "align":
                self.logit_scale = float(1.0 / model.temperature.item())
            else:
                self.logit_scale = float(model.logit_scale.exp().item())
            bias = getattr(model, "logit_bias", None)
            self.logit_bias = None if bias is None else float(bias.item())

    device_preprocess = True

    def preprocess(self, images: np.ndarray) -> torch.Tensor:
        return self.preprocess_tensor(images)

    def preprocess_tensor(self, images: np.ndarray | torch.Tensor) -> torch.Tensor:
        # the torchvision backend works on the tensors' device; off the CPU it resizes in
        # float, without PIL's rounding between the passes (see open_clip_backend.resize_uint8)
        x = as_uint8_nchw(images, self.name)
        out = self.image_processor(images=x, return_tensors="pt")["pixel_values"]
        return out.float().contiguous()

    def encode_image(self, pixels: torch.Tensor) -> torch.Tensor:
        with torch.no_grad(), autocast_for(self.device):
            out = self.model.get_image_features(pixel_values=pixels)
        return unit_rows(_features(out))

    def tokenize(self, texts: Sequence[str]) -> dict[str, torch.Tensor]:
        """The family's tokenisation (see the module table); exposed for tests and debugging."""
        enc = self.tokenizer(
            list(texts),
            padding=self.text_rule.padding,
            truncation=True,
            max_length=self.text_max_length,
            return_tensors="pt",
        )
        return {k: v for k, v in enc.items() if k in self.text_rule.inputs}

    def encode_text(self, texts: Sequence[str]) -> torch.Tensor:
        enc = {k: v.to(self.device, non_blocking=True) for k, v in self.tokenize(texts).items()}
        with torch.no_grad(), autocast_for(self.device):
            out = self.model.get_text_features(**enc)
        return unit_rows(_features(out))


def _features(out: Any) -> torch.Tensor:
    # transformers >= 5 returns a model output whose pooler_output is the projected embedding
    return out if isinstance(out, torch.Tensor) else out.pooler_output


def _model_class(model_type: str) -> type:
    import transformers

    return {
        "clip": transformers.CLIPModel,
        "siglip": transformers.SiglipModel,
        "align": transformers.AlignModel,
    }[model_type]


def load_hf_model(source: str | Path, device: torch.device, name: str) -> HFDualEncoder:
    """Load a saved folder or a cached hub repo id, offline, with its family's settings."""
    from transformers import AutoConfig, AutoImageProcessor, AutoTokenizer

    src = Path(source).expanduser()
    repo_id: str | None = None
    if src.is_dir():
        if not (src / "config.json").is_file():
            raise UserInputError(f"{name}: folder {str(src)!r} has no config.json (not a save_pretrained folder)")
        where = str(src)
    else:
        repo_id = where = cached_repo(name, str(source), "hf:openai/clip-vit-base-patch32")
    try:
        with offline():
            config = AutoConfig.from_pretrained(where, local_files_only=True)
            if config.model_type not in TEXT_RULES:
                raise UserInputError(
                    f"{name}: model type {config.model_type!r} is not supported by the hf: backend "
                    f"(supported: {', '.join(sorted(TEXT_RULES))}); a generative VLM (LLaVA, Qwen2-VL, ...) loads as "
                    f"hf-vlm:{source}; anything else: wrap it yourself, see backend/models/base.py"
                )
            # float32 master weights whatever the checkpoint's dtype: CPU runs need them, and
            # on CUDA encode_* autocasts to half precision
            model = _model_class(config.model_type).from_pretrained(
                where, local_files_only=True, dtype=torch.float32
            )
            image_processor = AutoImageProcessor.from_pretrained(where, local_files_only=True)
            tokenizer = AutoTokenizer.from_pretrained(where, local_files_only=True)
    except (OSError, ImportError) as e:
        # missing weights/tokenizer/processor files, or a tokenizer needing an absent package
        first = str(e).strip().splitlines()[0][:300] if str(e).strip() else type(e).__name__
        if isinstance(e, ImportError):
            raise ModelUnavailableError(
                f"{name}: loading needs a package that is not installed ({first}); install it "
                "(SigLIP's tokenizer needs `sentencepiece`)"
            ) from e
        raise unavailable(name, repo_id, extra=f"transformers said: {first}") from e
    model = model.to(device)
    return HFDualEncoder(name, model, image_processor, tokenizer, device)


@register_model("hf", known=KNOWN_MODELS)
def create_hf(spec: str, device: torch.device) -> VisionLanguageModel:
    return load_hf_model(spec, device, f"hf:{spec}")


__all__ = ["KNOWN_MODELS", "TEXT_RULES", "HFDualEncoder", "TextRule", "load_hf_model"]

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

Images are preprocessed with the checkpoint's own image processor settings (resize, centre
crop, rescale, normalise, EfficientNet's offset and ``include_top``), reproduced by
:class:`HFImagePreprocess` as batched torch ops on the batch's device with PIL's resize
rounding and pass order: within one grey level of transformers' PIL-backend processor
(tests/models/test_hub_backends.py). transformers' own torchvision backend resizes in float
off the CPU (up to ~15 levels away) and always resizes the width first (up to 6 levels
measured where Pillow 13 resizes the height first); it still runs processors with settings that are not
reproduced (a resample filter other than bilinear or bicubic, other size rules, padding).

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
from torchvision.transforms import InterpolationMode

from domainbench.errors import ModelUnavailableError, UserInputError
from domainbench.models.base import VisionLanguageModel
from domainbench.models.hub_common import as_uint8_nchw, autocast_for, cached_repo, offline, unavailable, unit_rows
from domainbench.models.open_clip_backend import BatchPreprocess, _resize_crop_sizes

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


#: transformers' image processors whose settings HFImagePreprocess reproduces (torchvision
#: backends and their "...Pil" twins); EfficientNet's is ALIGN's
_PROCESSORS = ("CLIPImageProcessor", "SiglipImageProcessor", "EfficientNetImageProcessor")
#: PILImageResampling values -> torch filters with PIL's antialiasing
_FILTERS = {2: InterpolationMode.BILINEAR, 3: InterpolationMode.BICUBIC}


class HFImagePreprocess(BatchPreprocess):
    """A CLIP, SigLIP or EfficientNet (ALIGN) image processor's transform on uint8 batches.

    As transformers' PIL backend: resize (``shortest_edge``: the short side, the long one
    truncated; ``height``/``width``: squashed), centre crop at offsets rounded down (padding
    with zeros, the larger half first), then ``x * rescale_factor`` (minus 1 with
    ``rescale_offset``), ``(x - mean) / std`` and, with ``include_top``, ``/ std`` again.
    """

    floor_offsets = True

    def __init__(
        self,
        name: str,
        resize: tuple[tuple[int, int], str] | None,
        crop: tuple[int, int] | None,
        interpolation: InterpolationMode,
        scale: torch.Tensor,
        shift: torch.Tensor,
    ) -> None:
        #: ((h, w), open_clip resize mode: "shortest" or "squash") or None: no resize
        self.resize = resize
        self.crop = crop
        self.interpolation = interpolation
        super().__init__(name, scale, shift)

    @classmethod
    def from_processor(cls, processor: Any, name: str) -> HFImagePreprocess | None:
        """The processor's transform; None where its settings are not ones reproduced here."""

        def get(key: str, default: Any = None) -> Any:
            value = getattr(processor, key, None)
            return default if value is None else value

        resample = get("resample", 2)  # the PIL backend's default: bilinear (PILImageResampling is an int)
        if (type(processor).__name__.removesuffix("Pil") not in _PROCESSORS or not isinstance(resample, int)
                or resample not in _FILTERS or get("do_pad")):
            return None
        resize = None
        if get("do_resize", False):  # transformers' order of the size rules
            size = processor.size
            if size.shortest_edge and not size.longest_edge:
                resize = ((size.shortest_edge, size.shortest_edge), "shortest")
            elif size.height and size.width and not size.shortest_edge and not (size.max_height and size.max_width):
                resize = ((size.height, size.width), "squash")
            else:
                return None
        crop = None
        if get("do_center_crop", False):
            crop_size = processor.crop_size
            if not (crop_size and crop_size.height and crop_size.width):
                return None
            crop = (crop_size.height, crop_size.width)
        mean = torch.as_tensor(get("image_mean", 0.0), dtype=torch.float64).expand(3)
        std = torch.as_tensor(get("image_std", 1.0), dtype=torch.float64).expand(3)
        # x * scale - shift, composed step by step
        rescale = get("do_rescale", False)
        scale = torch.full((3,), float(get("rescale_factor", 1.0)) if rescale else 1.0, dtype=torch.float64)
        shift = torch.full((3,), 1.0 if rescale and get("rescale_offset", False) else 0.0, dtype=torch.float64)
        if get("do_normalize", False):
            scale, shift = scale / std, (shift + mean) / std
        if get("include_top", False):
            scale, shift = scale / std, shift / std
        return cls(name, resize, crop, _FILTERS[int(resample)], scale, shift)

    def plan(self, h: int, w: int) -> tuple[tuple[int, int], tuple[int, int] | None]:
        resized = (h, w) if self.resize is None else _resize_crop_sizes(h, w, *self.resize)[0]
        return resized, self.crop


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
        #: None: the processor's settings are not reproduced, so the processor itself runs
        self._preprocess = HFImagePreprocess.from_processor(image_processor, name)
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
        if self._preprocess is not None:
            return self._preprocess(images)
        # transformers' torchvision backend, on the tensors' device (see the module doc)
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


def create_hf(spec: str, device: torch.device) -> VisionLanguageModel:
    return load_hf_model(spec, device, f"hf:{spec}")


__all__ = ["KNOWN_MODELS", "TEXT_RULES", "HFDualEncoder", "HFImagePreprocess", "TextRule", "load_hf_model"]

"""The interface every vision-language model implements, and the zero-shot classifier.

A model owns its preprocessing and tokenizer: callers hand it uint8 images and plain
strings, never tensors they shaped themselves. To plug in your own model, subclass
:class:`VisionLanguageModel` (or duck-type it) and register a factory::

    from domainbench.models import register_model

    @register_model("mine")          # usable as --models mine:anything
    def create_mine(spec: str, device: str) -> VisionLanguageModel:
        return MyWrapper(spec, device)
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # imported where a model computes: reading results names this class without torch
    import torch


class VisionLanguageModel(ABC):
    """A dual encoder: images and texts into one embedding space."""

    #: full prefixed name, e.g. ``open_clip:ViT-B-32/openai``
    name: str
    device: torch.device
    #: multiplier applied to cosine similarities to make logits (only affects calibration)
    logit_scale: float = 100.0
    #: True when ``preprocess_tensor`` runs on ``self.device``; callers then send every batch
    #: there as uint8, so images corrupted on the host or on the device get the same preprocessing
    device_preprocess: bool = False

    @abstractmethod
    def preprocess(self, images: np.ndarray) -> torch.Tensor:
        """uint8 images (N, H, W, 3) or (N, H, W) -> float tensor (N, C, h, w) on CPU."""

    def preprocess_tensor(self, images: torch.Tensor) -> torch.Tensor:
        """uint8 images (N, H, W, C) or (N, H, W) on ``self.device`` -> float pixels on ``self.device``.

        This default is the host path (a copy down and the pixels back up); backends that can
        preprocess with torch ops on the device override it and set ``device_preprocess``.
        """
        return self.preprocess(images.cpu().numpy()).to(self.device, non_blocking=True)

    @abstractmethod
    def encode_image(self, pixels: torch.Tensor) -> torch.Tensor:
        """Preprocessed pixels (already on ``self.device``) -> L2-normalised (N, D)."""

    @abstractmethod
    def encode_text(self, texts: Sequence[str]) -> torch.Tensor:
        """Strings -> L2-normalised (T, D) on ``self.device``."""

    def embed_images(self, images: np.ndarray) -> torch.Tensor:
        """Convenience: preprocess, move and encode in one call (no batching)."""
        import torch

        with torch.inference_mode():
            pix = self.preprocess(images).to(self.device, non_blocking=True)
            return self.encode_image(pix)


DEFAULT_TEMPLATES: tuple[str, ...] = (
    "a photo of a {}.",
    "a blurry photo of a {}.",
    "a low resolution photo of a {}.",
    "a photo of the {}.",
    "a cropped photo of a {}.",
)


def build_classifier(
    model: VisionLanguageModel,
    classnames: Sequence[str],
    templates: Sequence[str] = DEFAULT_TEMPLATES,
    batch_size: int = 256,
) -> torch.Tensor:
    """Text classifier (C, D): the normalised mean of each class's template embeddings.

    All C×T prompts are encoded in batches, so building it costs ceil(C·T / batch) calls.
    """
    if not classnames:
        raise ValueError("no class names given: a zero-shot classifier needs at least one class")
    import torch

    from domainbench.records.label_sets import resolve_templates

    templates = resolve_templates(templates) or DEFAULT_TEMPLATES
    prompts = [t.format(c) for c in classnames for t in templates]
    with torch.inference_mode():
        chunks = [model.encode_text(prompts[i : i + batch_size]) for i in range(0, len(prompts), batch_size)]
        emb = torch.cat(chunks).float().reshape(len(classnames), len(templates), -1)
        emb = torch.nn.functional.normalize(emb, dim=-1).mean(dim=1)
        return torch.nn.functional.normalize(emb, dim=-1)

"""Models' preprocessing as torch operations on float images, for the gradient search."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F


def differentiable_pixels(model: Any, x: torch.Tensor | None) -> torch.Tensor | None:
    """The model's preprocessing as torch ops on float (N, H, W, C) in [0, 1]; None if unknown.

    With ``x=None`` it only answers whether the model has such a path. The embedded models'
    preprocessing (luma, resize, normalise) is reproduced here in float arithmetic; open_clip
    models' through their preprocessing config (``TorchImagePreprocess.float_pixels``).
    """
    from domainbench.models.embedded import EmbeddedModel
    from domainbench.models.open_clip_backend import OpenClipModel

    if isinstance(model, OpenClipModel):
        return torch.empty(0) if x is None else model._preprocess.float_pixels(x)
    if not isinstance(model, EmbeddedModel):
        return None
    if x is None:
        return torch.empty(0)
    if x.shape[-1] == 3:
        w = torch.tensor([0.299, 0.587, 0.114], dtype=x.dtype, device=x.device)
        x = (x * w).sum(-1, keepdim=True)
    x = x.permute(0, 3, 1, 2)
    size = model.config.image_size
    if x.shape[-2:] != (size, size):
        x = F.interpolate(x, size=(size, size), mode="bilinear", antialias=True, align_corners=False)
    return (x - model.config.mean) / model.config.std


def differentiable_embedding(model: Any, pixels: torch.Tensor) -> torch.Tensor:
    """Unit image embeddings with the autograd graph kept (``encode_image`` runs under no_grad
    for the open_clip backend)."""
    from domainbench.models.hub_common import autocast_for
    from domainbench.models.open_clip_backend import OpenClipModel

    if isinstance(model, OpenClipModel):
        with autocast_for(model.device):
            return F.normalize(model.model.encode_image(pixels).float(), dim=-1)
    return F.normalize(model.encode_image(pixels).float(), dim=-1)

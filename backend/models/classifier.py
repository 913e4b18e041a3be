"""Plain classifiers as models: logits over their own classes, no text tower, no image embeddings.

Two built-in backends (``domainbench.records.model_backends``):

* ``torchvision:CONFIG.json``: a torchvision classifier built from a config
  ``{"arch": "resnet18", "classes": [...], "weights": "state_dict.pt", "mean": [...], "std": [...]}``
  (``weights`` optional: relative to the config's folder);
* ``py:MODULE:ATTR``: a Python callable ``f(images uint8 (N,H,W[,C])) -> logits (N, C)``; a
  ``classes`` attribute, when present, must equal the dataset's classes, and an optional
  ``torch_logits`` attribute (float images (N,H,W,C) in [0, 1] -> logits) enables FMR's
  gradient search.

They cannot classify zero-shot (an FMR oracle refuses them); in a corruption run they are scored
by their logits, and stability (which needs image embeddings) is n/a for them.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from domainbench.errors import UserInputError


class ClassifierModel:
    """A model that turns uint8 images into logits over its classes (``classes``: None when it does not say)."""

    kind = "classifier"

    def __init__(self, name: str, fn: Callable[[np.ndarray], Any], device: torch.device,
                 classes: Sequence[str] | None = None,
                 grad_fn: Callable[[torch.Tensor], torch.Tensor] | None = None) -> None:
        self.name = name
        self.fn = fn
        self.device = device
        self.classes = None if classes is None else list(classes)
        self.grad_fn = grad_fn

    def __repr__(self) -> str:
        return f"ClassifierModel({self.name!r})"

    def logits(self, images: np.ndarray) -> torch.Tensor:
        """uint8 images -> float32 (N, C) logits on the CPU, without gradients."""
        with torch.inference_mode():
            out = self.fn(images)
        return torch.as_tensor(np.asarray(out.detach().cpu() if isinstance(out, torch.Tensor) else out), dtype=torch.float32)

    @property
    def torch_logits(self) -> Callable[[torch.Tensor], torch.Tensor] | None:
        """Differentiable float (N, H, W, C) in [0, 1] -> (N, C), or None."""
        return self.grad_fn


def _float_nchw(x: torch.Tensor, mean: Sequence[float], std: Sequence[float]) -> torch.Tensor:
    """float (N,H,W[,C]) in [0, 1] -> normalised (N, 3, H, W): grey images are replicated to RGB."""
    if x.ndim == 3:
        x = x[..., None]
    x = x.permute(0, 3, 1, 2)
    if x.shape[1] == 1:
        x = x.expand(-1, 3, -1, -1)
    m = torch.tensor(mean, dtype=x.dtype, device=x.device).view(1, -1, 1, 1)
    s = torch.tensor(std, dtype=x.dtype, device=x.device).view(1, -1, 1, 1)
    return (x - m) / s


def create_torchvision(spec: str, device: torch.device) -> ClassifierModel:
    import torchvision

    path = Path(spec).expanduser()
    if not path.is_file():
        raise UserInputError(f"torchvision:{spec}: config file {str(path)!r} does not exist; give a JSON config "
                             '{"arch": "resnet18", "classes": [...], "weights": "state_dict.pt"}')
    try:
        cfg = json.loads(path.read_text())
        arch, classes = cfg["arch"], list(cfg["classes"])
    except (ValueError, KeyError, TypeError) as e:
        raise UserInputError(f"torchvision:{spec}: the config needs \"arch\" and \"classes\" ({e})") from e
    try:
        net = torchvision.models.get_model(arch, weights=None, num_classes=len(classes))
    except ValueError as e:
        raise UserInputError(f"torchvision:{spec}: unknown architecture {arch!r} ({e})") from e
    if cfg.get("weights"):
        wpath = (path.parent / cfg["weights"]).expanduser()
        if not wpath.is_file():
            raise UserInputError(f"torchvision:{spec}: weights file {str(wpath)!r} does not exist")
        net.load_state_dict(torch.load(wpath, map_location="cpu", weights_only=True))
    net.eval().requires_grad_(False).to(device)
    mean = cfg.get("mean", [0.485, 0.456, 0.406])
    std = cfg.get("std", [0.229, 0.224, 0.225])

    def grad_fn(x: torch.Tensor) -> torch.Tensor:
        return net(_float_nchw(x.to(device), mean, std)).float().cpu()

    def fn(images: np.ndarray) -> torch.Tensor:
        return grad_fn(torch.from_numpy(np.ascontiguousarray(images)).float() / 255.0)

    return ClassifierModel(f"torchvision:{spec}", fn, device, classes, grad_fn)


def create_callable(spec: str, device: torch.device) -> ClassifierModel:
    module, _, attr = spec.partition(":")
    if not module or not attr:
        raise UserInputError(f"py:{spec}: name a callable as py:MODULE:ATTR (e.g. py:mypkg.models:classify)")
    try:
        fn = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as e:
        raise UserInputError(f"py:{spec}: cannot import it ({e}); check the module name and PYTHONPATH") from e
    if not callable(fn):
        raise UserInputError(f"py:{spec} is a {type(fn).__name__}, not a callable returning logits")
    # the callable runs where it runs: the device is the one the run asked for, for the run record
    return ClassifierModel(f"py:{spec}", fn, device, getattr(fn, "classes", None), getattr(fn, "torch_logits", None))


__all__ = ["ClassifierModel", "create_callable", "create_torchvision"]

"""Model registry: prefixed names -> factories (the open_clip ``factory.py`` pattern).

``create_model("embedded:fmnist-plain")``, ``create_model("open_clip:ViT-B-32/openai")``,
``create_model("hf:google/siglip-base-patch16-224")``, ``create_model("local:/path")``.
"""

from __future__ import annotations

import difflib
import fnmatch
from collections.abc import Callable

import torch

from backend.errors import UserInputError
from backend.models.base import DEFAULT_TEMPLATES, VisionLanguageModel, build_classifier

Factory = Callable[[str, torch.device], VisionLanguageModel]
_BACKENDS: dict[str, Factory] = {}
# names listed by list_models(); a backend may accept more than it lists
_KNOWN: dict[str, list[str]] = {}


def register_model(prefix: str, known: list[str] | None = None) -> Callable[[Factory], Factory]:
    def deco(fn: Factory) -> Factory:
        _BACKENDS[prefix] = fn
        _KNOWN[prefix] = list(known or [])
        return fn

    return deco


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    if isinstance(device, torch.device):
        return device
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise UserInputError(f"device {device!r} requested but no CUDA GPU is visible; use --device cpu")
    return torch.device(device)


def _load_backends() -> None:
    # imported lazily: open_clip and transformers are slow to import and not always needed
    from backend.models import embedded  # noqa: F401

    for mod in ("backend.models.open_clip_backend", "backend.models.hf_backend", "backend.models.local_backend"):
        try:
            __import__(mod)
        except ModuleNotFoundError as e:
            if e.name != mod:
                raise


def list_models(pattern: str = "*") -> list[str]:
    """Known model names matching a shell wildcard, e.g. ``list_models("open_clip:ViT-L*")``."""
    _load_backends()
    names = [f"{p}:{n}" for p, ns in _KNOWN.items() for n in ns]
    return sorted(n for n in names if fnmatch.fnmatch(n, pattern))


def create_model(name: str, device: str | torch.device = "auto") -> VisionLanguageModel:
    _load_backends()
    prefix, sep, rest = name.partition(":")
    if not sep or prefix not in _BACKENDS:
        close = difflib.get_close_matches(name, list_models(), n=3)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise UserInputError(
            f"unknown model {name!r}: a model name is PREFIX:NAME with PREFIX one of "
            f"{', '.join(sorted(_BACKENDS))} (see `domainbench models`).{hint}"
        )
    return _BACKENDS[prefix](rest, resolve_device(device))


__all__ = [
    "DEFAULT_TEMPLATES",
    "VisionLanguageModel",
    "build_classifier",
    "create_model",
    "list_models",
    "register_model",
    "resolve_device",
]

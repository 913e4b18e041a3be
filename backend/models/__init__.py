"""Model registry: prefixed names -> backends (the open_clip ``factory.py`` pattern).

``create_model("embedded:fmnist-plain")``, ``create_model("open_clip:ViT-B-32/openai")``,
``create_model("hf:google/siglip-base-patch16-224")``, ``create_model("local:/path")``.

A backend is registered under its prefix with ``@register_model(prefix, known=[...])``; the
built-in backend modules do that on import, and are imported on first use (open_clip and
transformers are slow to import). The package itself imports no torch (listing runs imports the
result records, which name this package's plain parts, and must not pay torch's start-up); the interface
(``VisionLanguageModel``, ``build_classifier``) is loaded from ``models.base`` on first use. Plug-ins come from the entry-point group
``domainbench.models``: the entry point's name is the prefix and it names a factory
``f(spec, device) -> VisionLanguageModel``, a ``ModelBackend``, or a module that calls
``register_model`` on import.
"""

from __future__ import annotations

import difflib
import fnmatch
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

from domainbench.corruptions.named_registry import Registry
from domainbench.errors import UserInputError

if TYPE_CHECKING:
    import torch

    from domainbench.models.base import DEFAULT_TEMPLATES, VisionLanguageModel, build_classifier

Factory = Callable[[str, "torch.device"], "VisionLanguageModel"]
ENTRY_POINT_GROUP = "domainbench.models"


class UnknownModelError(UserInputError):
    """A model name whose prefix no backend owns (or a model backend clash or a broken plug-in)."""


@dataclass(frozen=True)
class ModelBackend:
    """The factory behind one prefix, and the names ``list_models`` shows (it may accept more)."""

    create: Factory
    known: tuple[str, ...] = ()


def _adopt(registry: Registry[Any], obj: Any, origin: str, name: str) -> None:
    if isinstance(obj, ModuleType):
        return  # a backend module registers itself with @register_model on import
    if isinstance(obj, ModelBackend):
        registry.register(name, obj, origin=origin)
    elif callable(obj):
        registry.register(name, ModelBackend(obj, tuple(getattr(obj, "known", ()))), origin=origin)
    else:
        raise UnknownModelError(f"{origin} gave {type(obj).__name__}; expected a model factory, a ModelBackend or a module")


MODEL_BACKENDS: Registry[ModelBackend] = Registry(
    "model backend",
    error=UnknownModelError,
    group=ENTRY_POINT_GROUP,
    builtins=("domainbench.models.embedded",),
    optional_builtins=("domainbench.models.open_clip_backend", "domainbench.models.hf_backend", "domainbench.models.local_backend",
                       "domainbench.models.hf_vlm_backend", "domainbench.models.openai_vlm_backend"),
    adopt=_adopt,
    listing="see `domainbench models`",
)


def register_model(prefix: str, known: Sequence[str] | None = None, *, replace: bool = False) -> Callable[[Factory], Factory]:
    """Register a factory for ``PREFIX:NAME`` models; a prefix already taken raises unless ``replace=True``."""
    if not isinstance(prefix, str) or not prefix or ":" in prefix:
        raise UnknownModelError(f"a model backend prefix must be a non-empty name without ':', got {prefix!r}")

    def deco(fn: Factory) -> Factory:
        MODEL_BACKENDS.register(prefix, ModelBackend(fn, tuple(known or ())), replace=replace)
        return fn

    return deco


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    import torch

    if isinstance(device, torch.device):
        return device
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise UserInputError(f"device {device!r} requested but no CUDA GPU is visible; use --device cpu")
    return torch.device(device)


def list_models(pattern: str = "*") -> list[str]:
    """Known model names matching a shell wildcard, e.g. ``list_models("open_clip:ViT-L*")``."""
    names = [f"{prefix}:{n}" for prefix, backend in MODEL_BACKENDS.items() for n in backend.known]
    return sorted(n for n in names if fnmatch.fnmatch(n, pattern))


def create_model(name: str, device: str | torch.device = "auto") -> VisionLanguageModel:
    prefix, sep, rest = name.partition(":")
    if not sep or prefix not in MODEL_BACKENDS:
        # close matches among full model names: users mistype the name more often than the prefix
        close = difflib.get_close_matches(name, list_models(), n=3)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise UnknownModelError(
            f"unknown model {name!r}: a model name is PREFIX:NAME with PREFIX one of "
            f"{', '.join(MODEL_BACKENDS.names())} (see `domainbench models`).{hint}"
        )
    return MODEL_BACKENDS.get(prefix).create(rest, resolve_device(device))


#: names ``models.base`` defines, imported from there (with torch) when first asked for
_FROM_BASE = ("DEFAULT_TEMPLATES", "VisionLanguageModel", "build_classifier")


def __getattr__(name: str) -> Any:
    if name in _FROM_BASE:
        from domainbench.models import base

        return getattr(base, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DEFAULT_TEMPLATES",
    "ENTRY_POINT_GROUP",
    "MODEL_BACKENDS",
    "ModelBackend",
    "UnknownModelError",
    "VisionLanguageModel",
    "build_classifier",
    "create_model",
    "list_models",
    "register_model",
    "resolve_device",
]

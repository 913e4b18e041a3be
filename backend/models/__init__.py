"""Model registry: prefixed names -> backends (the open_clip ``factory.py`` pattern).

``create_model("embedded:fmnist-plain")``, ``create_model("open_clip:ViT-B-32/openai")``,
``create_model("hf:google/siglip-base-patch16-224")``, ``create_model("local:/path")``.

The backends themselves are plain data declared in ``domainbench.records.model_backends`` (capabilities, options
schema, and the ``"module:attr"`` of the loader, imported on first use: open_clip and transformers are
slow to import). The package itself imports no torch (listing runs imports the result records, which name
this package's plain parts, and must not pay torch's start-up); the interface (``VisionLanguageModel``,
``build_classifier``) is loaded from ``models.base`` on first use. Plug-ins come from the entry-point group
``domainbench.models`` (see ``domainbench.records.model_backends``) or call ``register_model``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from domainbench.errors import UserInputError
from domainbench.records.model_backends import (
    ENTRY_POINT_GROUP,
    MODEL_BACKENDS,
    Capabilities,
    Factory,
    ModelBackend,
    ModelOptions,
    UnknownModelError,
    backend_of,
    capabilities_of,
    list_models,
    register_model,
    validate_options,
)

if TYPE_CHECKING:
    import torch

    from domainbench.models.base import DEFAULT_TEMPLATES, VisionLanguageModel, build_classifier


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    import torch

    if isinstance(device, torch.device):
        return device
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise UserInputError(f"device {device!r} requested but no CUDA GPU is visible; use --device cpu")
    return torch.device(device)


def create_model(name: str, device: str | torch.device = "auto", options: Mapping[str, Any] | None = None) -> VisionLanguageModel:
    """The model called ``name`` on ``device``; ``options`` (checked against its backend's schema) go to
    the backend's factory as keywords, as open_clip's ``create_model(name, **kwargs)`` takes them."""
    backend = backend_of(name)
    rest = name.partition(":")[2]
    if not options:
        return backend.factory(rest, resolve_device(device))
    checked = validate_options(name, options)
    return backend.factory(rest, resolve_device(device), **checked.model_dump(include=set(options)))


#: names ``models.base`` defines, imported from there (with torch) when first asked for
_FROM_BASE = ("DEFAULT_TEMPLATES", "VisionLanguageModel", "build_classifier")


def __getattr__(name: str) -> Any:
    if name in _FROM_BASE:
        from domainbench.models import base

        return getattr(base, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "Capabilities",
    "DEFAULT_TEMPLATES",
    "ENTRY_POINT_GROUP",
    "Factory",
    "MODEL_BACKENDS",
    "ModelBackend",
    "ModelOptions",
    "UnknownModelError",
    "VisionLanguageModel",
    "backend_of",
    "build_classifier",
    "capabilities_of",
    "create_model",
    "list_models",
    "register_model",
    "resolve_device",
]

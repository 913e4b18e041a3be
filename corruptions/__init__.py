"""domainbench's corruption library: a registry of seeded, severity-graded image corruptions.

Public API::

    corruptions.names(pattern="*") -> list[str]
    corruptions.get(name) -> CorruptionSpec
    corruptions.catalogue() -> list[dict]
    corruptions.validate_params(name, params) -> dict
    corruptions.resolve_params(name, severity=None, params=None) -> dict
    corruptions.corrupt(image, name, severity=None, params=None, seed=0) -> np.ndarray
    corruptions.corrupt_batch(images, name, severity=None, params=None, seeds=0, return_drawn=False)
        -> np.ndarray, or (np.ndarray, drawn) with return_drawn=True (see corruptions.draws)
    corruptions.corrupt_composed(images, [(name, severity), ...], seeds) -> (np.ndarray, [drawn per step])
    corruptions.register(...), corruptions.load_module("my.module")
    corruptions.corrupt_clip(name, frames, severity, seed=..., fps=..., mode=None) -> np.ndarray
    corruptions.is_temporal(name) -> bool, corruptions.temporal_names() -> list[str]
        (clips: temporal corruptions and image corruptions frame by frame; see corruptions.clips)

``domainbench.corruptions.named_registry.Registry`` is the registry pattern the backend's model, dataset
and planner-provider registries share; this package imports nothing from ``backend``.
"""

from __future__ import annotations

from domainbench.corruptions.api import Drawn, corrupt, corrupt_batch, resolve_params, validate_params
from domainbench.corruptions.clips import corrupt_clip, is_temporal, temporal_names
from domainbench.corruptions.compose import MAX_STEPS, check_steps, corrupt_composed
from domainbench.corruptions.draws import record
from domainbench.corruptions.errors import CorruptionError
from domainbench.corruptions.named_registry import Registry
from domainbench.corruptions.registry import ENTRY_POINT_GROUP, REGISTRY, catalogue, get, load_module, names, register, specs, unregister
from domainbench.corruptions.seeding import derive_seed
from domainbench.corruptions.spec import FAMILIES, REFERENCE_SIZE, CorruptionSpec, Params

__all__ = [
    "ENTRY_POINT_GROUP",
    "FAMILIES",
    "MAX_STEPS",
    "REFERENCE_SIZE",
    "CorruptionError",
    "CorruptionSpec",
    "Drawn",
    "Params",
    "REGISTRY",
    "Registry",
    "catalogue",
    "check_steps",
    "corrupt",
    "corrupt_batch",
    "corrupt_clip",
    "corrupt_composed",
    "derive_seed",
    "get",
    "is_temporal",
    "load_module",
    "names",
    "record",
    "register",
    "resolve_params",
    "specs",
    "temporal_names",
    "unregister",
    "validate_params",
]

"""The corruption registry: built-in kernel modules and plug-ins, registered the same way.

A module provides corruptions by exposing ``CORRUPTIONS``, a list of ``CorruptionSpec``. The
built-in kernel modules (``domainbench.corruptions.kernels.*``) are loaded like plug-ins on the first
registry access; then the entry points of the group ``domainbench.corruptions``. An entry point
may name a module (with ``CORRUPTIONS``, or registering through ``register`` on import), a
``CorruptionSpec``, a list of specs, or a callable returning one of those.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType
from typing import Any

from domainbench.corruptions.errors import CorruptionError
from domainbench.corruptions.kernels import BUILTIN_MODULES
from domainbench.corruptions.named_registry import Registry
from domainbench.corruptions.spec import CorruptionSpec

ENTRY_POINT_GROUP = "domainbench.corruptions"


def _adopt(registry: Registry[Any], obj: Any, origin: str, name: str) -> None:
    """Register the specs a module, a spec, a list of specs or a callable gives."""
    if isinstance(obj, ModuleType):
        for spec in getattr(obj, "CORRUPTIONS", None) or []:
            _adopt(registry, spec, origin, name)
    elif isinstance(obj, CorruptionSpec):
        registry.register(obj.name, obj, origin=origin)
    elif isinstance(obj, (list, tuple)):
        for item in obj:
            _adopt(registry, item, origin, name)
    elif callable(obj):
        _adopt(registry, obj(), origin, name)
    else:
        raise CorruptionError(f"{origin} gave {type(obj).__name__}; expected a module, a CorruptionSpec, a list of specs or a callable")


#: other names a corruption is known by (ImageNet-C's, where ours differs) -> the registered name
ALIASES: dict[str, str] = {
    "elastic_transform": "elastic",
    "spatter": "lens_spatter",
    "jpeg": "jpeg_compression",
}


def _canonical(name: str) -> str:
    key = name.strip().lower().replace("-", "_").replace(" ", "_")
    return ALIASES.get(key, key)


def canonical_name(name: str) -> str:
    """The registered name ``name`` resolves to (aliases and spelling variants included)."""
    return get(name).name


REGISTRY: Registry[CorruptionSpec] = Registry(
    "corruption",
    error=CorruptionError,
    group=ENTRY_POINT_GROUP,
    builtins=BUILTIN_MODULES,
    adopt=_adopt,
    normalise=_canonical,
    listing="see corruptions.names() or `domainbench gallery`",
)


def register(spec: CorruptionSpec | None = None, /, *, replace: bool = False, **metadata: Any) -> Any:
    """Register a corruption.

    Two forms:
    - ``register(spec)`` with a ready ``CorruptionSpec``; returns its name.
    - ``@register(name=..., family=..., description=..., situations=[...], params_model=M,
      ladder={1: {...}, ..., 5: {...}}, ranges={...}, ordinal=True)`` on a kernel
      ``f(image, params, rng) -> image``; returns the kernel unchanged.
    A name already registered (built-ins included) raises unless ``replace=True``.
    """
    if spec is not None:
        if metadata:
            raise CorruptionError("register(spec) takes no other metadata; put it in the CorruptionSpec")
        if not isinstance(spec, CorruptionSpec):
            raise CorruptionError(f"register() expects a CorruptionSpec, got {type(spec).__name__}")
        REGISTRY.register(spec.name, spec, replace=replace)
        return spec.name

    def decorator(kernel: Any) -> Any:
        register(CorruptionSpec(apply=kernel, **metadata), replace=replace)
        return kernel

    return decorator


def unregister(name: str) -> None:
    """Remove a corruption (tests and plug-in development)."""
    REGISTRY.unregister(name)


def get(name: str) -> CorruptionSpec:
    """The spec of ``name``; an unknown name raises with close-name suggestions."""
    if not isinstance(name, str):
        raise CorruptionError(f"corruption name must be a string, got {type(name).__name__}")
    return REGISTRY.get(name)


def names(pattern: str = "*", *, temporal: bool | None = None) -> list[str]:
    """Registered corruption names matching a shell wildcard (all by default), sorted.

    ``temporal=False``: the image corruptions only (what applies to a still image);
    ``temporal=True``: the temporal ones only (clips; see ``domainbench.corruptions.clips``).
    """
    found = REGISTRY.names(pattern)
    if temporal is None:
        return found
    return [n for n in found if REGISTRY.get(n).temporal is bool(temporal)]


def specs() -> list[CorruptionSpec]:
    return [spec for _, spec in REGISTRY.items()]


def catalogue(names_: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """Name, family, description, situations, parameter schema with ranges and ladder per corruption."""
    chosen = names() if names_ is None else list(names_)
    return [get(n).catalogue_entry() for n in chosen]


def load_module(module: str) -> list[str]:
    """Import a module (dotted name or a ``.py`` path) that provides corruptions; returns the new names.

    This is what ``--corruptions-module`` calls. The module exposes ``CORRUPTIONS`` (a list of
    specs) or calls ``register`` on import.
    """
    before = set(names())
    try:
        if module.endswith(".py") or "/" in module or "\\" in module:
            path = Path(module)
            if not path.is_file():
                raise CorruptionError(f"corruptions module file {module!r} does not exist")
            mod_name = f"domainbench_user_corruptions_{path.stem}"
            loader_spec = importlib.util.spec_from_file_location(mod_name, path)
            if loader_spec is None or loader_spec.loader is None:
                raise CorruptionError(f"cannot import corruptions module file {module!r}")
            mod = importlib.util.module_from_spec(loader_spec)
            sys.modules[mod_name] = mod
            loader_spec.loader.exec_module(mod)
        else:
            mod = importlib.import_module(module)
    except CorruptionError:
        raise
    except ImportError as exc:
        raise CorruptionError(f"cannot import corruptions module {module!r}: {exc}; is it on PYTHONPATH?") from exc
    REGISTRY.load_module(mod, f"module {module}")
    return sorted(set(names()) - before)


__all__ = [
    "ALIASES",
    "ENTRY_POINT_GROUP",
    "canonical_name",
    "REGISTRY",
    "catalogue",
    "get",
    "load_module",
    "names",
    "register",
    "specs",
    "unregister",
]

"""The corruption registry: built-ins, user registrations, modules and entry points.

Entry points in the group ``domainbench.corruptions`` are loaded lazily on the first registry
access. An entry point may name a module (importing it registers its corruptions), a
``CorruptionSpec``, a list of specs, or a callable returning one of those.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import sys
import threading
from collections.abc import Callable, Iterable
from importlib.metadata import entry_points
from pathlib import Path
from types import ModuleType
from typing import Any

from corruptions.errors import CorruptionError
from corruptions.spec import CorruptionSpec, Kernel

ENTRY_POINT_GROUP = "domainbench.corruptions"

_REGISTRY: dict[str, CorruptionSpec] = {}
_LOCK = threading.RLock()
_state = {"builtins": False, "entry_points": False}


def _ensure_loaded() -> None:
    if _state["builtins"] and _state["entry_points"]:
        return
    with _LOCK:
        if not _state["builtins"]:
            _state["builtins"] = True
            importlib.import_module("corruptions.kernels")
        if not _state["entry_points"]:
            _state["entry_points"] = True
            for ep in entry_points(group=ENTRY_POINT_GROUP):
                try:
                    obj = ep.load()
                except Exception as exc:  # a broken plug-in must say which one
                    raise CorruptionError(f"could not load corruption plug-in entry point {ep.name!r} ({ep.value}): {exc}") from exc
                _register_object(obj, origin=f"entry point {ep.name!r}")


def _register_object(obj: Any, origin: str) -> list[str]:
    if isinstance(obj, ModuleType):
        return []
    if isinstance(obj, CorruptionSpec):
        return [register(obj)]
    if isinstance(obj, (list, tuple)):
        return [n for item in obj for n in _register_object(item, origin)]
    if callable(obj):
        return _register_object(obj(), origin)
    raise CorruptionError(f"{origin} gave {type(obj).__name__}; expected a module, a CorruptionSpec, a list of specs or a callable")


def register(
    spec: CorruptionSpec | None = None,
    /,
    *,
    replace: bool = False,
    **metadata: Any,
) -> Any:
    """Register a corruption.

    Two forms:
    - ``register(spec)`` with a ready ``CorruptionSpec``; returns its name.
    - ``@register(name=..., family=..., description=..., situations=[...], params_model=M,
      ladder={1: {...}, ..., 5: {...}}, ranges={...}, ordinal=True)`` on a kernel
      ``f(image, params, rng) -> image``; returns the kernel unchanged.
    A name already registered raises unless ``replace=True``.
    """
    if spec is not None:
        if metadata:
            raise CorruptionError("register(spec) takes no other metadata; put it in the CorruptionSpec")
        if not isinstance(spec, CorruptionSpec):
            raise CorruptionError(f"register() expects a CorruptionSpec, got {type(spec).__name__}")
        with _LOCK:
            if spec.name in _REGISTRY and not replace and _REGISTRY[spec.name] is not spec:
                raise CorruptionError(f"corruption {spec.name!r} is already registered; pass replace=True to override it")
            _REGISTRY[spec.name] = spec
        return spec.name

    def decorator(kernel: Kernel) -> Kernel:
        register(CorruptionSpec(apply=kernel, **metadata), replace=replace)
        return kernel

    return decorator


def unregister(name: str) -> None:
    """Remove a corruption (tests and plug-in development)."""
    with _LOCK:
        _REGISTRY.pop(name, None)


def get(name: str) -> CorruptionSpec:
    """The spec of ``name``; an unknown name raises with close-name suggestions."""
    _ensure_loaded()
    if not isinstance(name, str):
        raise CorruptionError(f"corruption name must be a string, got {type(name).__name__}")
    spec = _REGISTRY.get(name)
    if spec is None:
        spec = _REGISTRY.get(name.strip().lower().replace("-", "_").replace(" ", "_"))
    if spec is None:
        close = difflib.get_close_matches(name.lower(), list(_REGISTRY), n=4, cutoff=0.5)
        hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
        raise CorruptionError(
            f"unknown corruption {name!r}{hint} (see corruptions.names() or `domainbench gallery` for all {len(_REGISTRY)})"
        )
    return spec


def names() -> list[str]:
    """All registered corruption names, sorted."""
    _ensure_loaded()
    return sorted(_REGISTRY)


def specs() -> list[CorruptionSpec]:
    _ensure_loaded()
    return [_REGISTRY[n] for n in sorted(_REGISTRY)]


def catalogue(names_: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """Name, family, description, situations, parameter schema with ranges and ladder per corruption."""
    chosen = names() if names_ is None else list(names_)
    return [get(n).catalogue_entry() for n in chosen]


def load_module(module: str) -> list[str]:
    """Import a module (dotted name or a ``.py`` path) that registers corruptions; returns the new names.

    This is what ``--corruptions-module`` calls. A module may also expose ``CORRUPTIONS`` (a
    list of specs) instead of calling ``register`` itself.
    """
    _ensure_loaded()
    before = set(_REGISTRY)
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
    extra = getattr(mod, "CORRUPTIONS", None)
    if extra is not None:
        for spec in extra:
            if _REGISTRY.get(getattr(spec, "name", None)) is not spec:
                register(spec)
    return sorted(set(_REGISTRY) - before)


def builtin(*specs_: CorruptionSpec) -> None:
    """Register built-in specs (used by corruptions.kernels.*)."""
    for s in specs_:
        register(s)


KernelDecorator = Callable[[Kernel], Kernel]

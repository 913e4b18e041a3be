"""What a kernel drew: the scalar random values behind a corrupted image, kept for provenance.

A kernel that samples a value worth reporting (a blur direction, a rain slant, where an
occluder sits) passes it through :func:`record` right after drawing it::

    angle = record(rng, "angle", float(rng.uniform(0.0, 180.0)))

The generator the API hands to kernels (:class:`RecordingGenerator`) keeps the log, so the
stored unit says what was applied, not only the ladder's values. ``record`` returns the value
to apply: the drawn one, or the one the caller fixed for this image. The value is drawn either
way, so the generator's stream, and every later draw, is the same whether or not it is fixed.
Full per-pixel fields (noise, displacement maps) are not recorded.

Called with any other generator (a kernel used directly), ``record`` just returns the value.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

import numpy as np

from domainbench.corruptions.errors import CorruptionError

V = TypeVar("V")


class RecordingGenerator(np.random.Generator):
    """``numpy.random.default_rng(seed)`` (the same stream) plus the image's log of drawn values."""

    def __init__(self, seed: int, fixed: Mapping[str, Any] | None = None) -> None:
        super().__init__(np.random.PCG64(seed))
        self.fixed: dict[str, Any] = {k: v for k, v in (fixed or {}).items() if v is not None}
        self.drawn: dict[str, Any] = {}


def jsonable(value: Any) -> Any:
    """Python scalars and lists for numpy values (what a stored document can hold)."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value


def _like(drawn: V, fixed: Any, name: str) -> V:
    """``fixed`` in the type (and array dtype) of the value it replaces."""
    try:
        if isinstance(drawn, np.ndarray):
            out = np.asarray(fixed, dtype=drawn.dtype)
            if out.ndim != drawn.ndim:
                raise ValueError(f"expected {drawn.ndim} dimension(s), got {out.ndim}")
            return out  # type: ignore[return-value]
        if isinstance(drawn, (bool, np.bool_)):
            return type(drawn)(bool(fixed))  # type: ignore[return-value]
        return type(drawn)(fixed)  # type: ignore[call-arg]
    except (TypeError, ValueError) as exc:
        raise CorruptionError(f"fixed value for the drawn quantity {name!r} is unusable ({fixed!r}): {exc}") from None


def record(rng: np.random.Generator, name: str, value: V, index: int | None = None) -> V:
    """Log quantity ``name`` of this image as drawn (or as fixed by the caller); returns the value to apply.

    ``index`` is for a quantity drawn once per item (per occluder, per shadow): the image's
    entry is then a list with one value per item.
    """
    if not isinstance(rng, RecordingGenerator):
        return value
    fixed = rng.fixed.get(name)
    if index is not None:
        fixed = fixed[index] if isinstance(fixed, (list, tuple)) and index < len(fixed) else None
    applied = value if fixed is None else _like(value, fixed, name)
    if index is None:
        rng.drawn[name] = jsonable(applied)
    else:
        items = rng.drawn.setdefault(name, [])
        items.extend([None] * (index + 1 - len(items)))
        items[index] = jsonable(applied)
    return applied


__all__ = ["RecordingGenerator", "jsonable", "record"]

"""What a corruption is: metadata for the planner, a parameter schema, a severity ladder and a kernel.

Kernel contract (``apply``): ``apply(image, params, rng) -> image`` where ``image`` is a
C-contiguous uint8 array of shape (H, W, C) with C in {1, 3} (C = 1 only when the spec sets
``grayscale=True``; otherwise the API converts grey to RGB and back), ``params`` is the validated
parameter model and ``rng`` a ``numpy.random.Generator`` seeded from the caller's seed. All
randomness comes from ``rng``; the kernel returns a new uint8 array of the same shape.

Random values worth reporting are passed through ``domainbench.corruptions.draws.record(rng, name, value)``
and declared in ``draws`` (name -> the interval they are drawn from, or None when it depends on
the image or the parameters); ``corrupt_batch(..., return_drawn=True)`` returns them.

``apply_batch(images, params, rngs)`` (optional) does the same for (N, H, W, C) with one
generator per image. When present it is also used for single images (as a batch of one), so a
batch equals its images corrupted one by one by construction; a spec may then leave ``apply``
out, and gets that batch-of-one call as its ``apply``. A spec needs at least one of the two.

Temporal corruptions (``apply_clip``): ``apply_clip(frames, params, rng, fps) -> frames`` where
``frames`` is a C-contiguous uint8 array (T, H, W, 3) of one clip, ``fps`` its frame rate and
``rng`` one generator for the whole clip; it returns a new uint8 array of the same shape. A spec
with ``apply_clip`` is *temporal*: its state evolves across frames, so it has no still-image
kernel (``corrupt``/``corrupt_batch`` refuse it; ``domainbench.corruptions.clips.corrupt_clip``
applies it).

Size-dependent parameters (blur sigmas, kernel lengths, displacement amplitudes) are given in
pixels *at a 224-pixel short side* and scaled by ``min(H, W) / 224`` inside the kernel.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

import numpy as np
from annotated_types import Ge, Gt, Le, Lt
from pydantic import BaseModel, ConfigDict, ValidationError

from domainbench.corruptions.errors import CorruptionError

Family = Literal["noise", "blur", "weather", "digital", "geometric", "photometric", "occlusion", "sensor"]
FAMILIES: tuple[str, ...] = get_args(Family)
SEVERITIES: tuple[int, ...] = (1, 2, 3, 4, 5)
REFERENCE_SIZE = 224


def side_scale(h: int, w: int) -> float:
    """Factor from parameters given at a 224-pixel short side to an image of h x w pixels."""
    return min(h, w) / REFERENCE_SIZE

#: ladder version of a corruption whose spec does not say (and of units stored before versions existed)
DEFAULT_LADDER_VERSION = 1

Kernel = Callable[[np.ndarray, Any, np.random.Generator], np.ndarray]
BatchKernel = Callable[[np.ndarray, Any, list[np.random.Generator]], np.ndarray]
ClipKernel = Callable[[np.ndarray, Any, np.random.Generator, float], np.ndarray]


class Params(BaseModel):
    """Base of every parameter model: frozen, unknown fields rejected."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def field_bounds(model: type[BaseModel], name: str) -> tuple[float | None, float | None]:
    """(lower, upper) bounds declared on a field with ``Field(ge=..., le=...)`` (or gt/lt)."""
    lo: float | None = None
    hi: float | None = None
    for meta in model.model_fields[name].metadata:
        if isinstance(meta, Ge):
            lo = float(meta.ge)
        elif isinstance(meta, Gt):
            lo = float(meta.gt)
        elif isinstance(meta, Le):
            hi = float(meta.le)
        elif isinstance(meta, Lt):
            hi = float(meta.lt)
    return lo, hi


def _describe_field(model: type[BaseModel], name: str) -> str:
    lo, hi = field_bounds(model, name)
    kind = model.model_fields[name].annotation
    kind_name = getattr(kind, "__name__", str(kind))
    if lo is not None or hi is not None:
        return f"{kind_name} in [{_fmt(lo)}, {_fmt(hi)}]"
    return kind_name


def _fmt(value: float | None) -> str:
    if value is None:
        return "-inf"
    return f"{value:g}"


def validate_against(name: str, model: type[BaseModel], params: Mapping[str, Any]) -> BaseModel:
    """Validate ``params`` with ``model``; errors name the parameter and its allowed range."""
    if not isinstance(params, Mapping):
        raise CorruptionError(f"parameters of corruption {name!r} must be a dict, got {type(params).__name__}")
    unknown = sorted(set(params) - set(model.model_fields))
    if unknown:
        allowed = ", ".join(f"{k} ({_describe_field(model, k)})" for k in model.model_fields)
        raise CorruptionError(
            f"corruption {name!r} has no parameter(s) {', '.join(map(repr, unknown))}; its parameters are: {allowed}"
        )
    try:
        return model.model_validate(dict(params))
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            loc = err["loc"][0] if err["loc"] else "?"
            if isinstance(loc, str) and loc in model.model_fields:
                got = params.get(loc, "<missing>")
                problems.append(f"parameter {loc!r} = {got!r} is invalid: allowed {_describe_field(model, loc)}")
            else:
                problems.append(err["msg"])
        raise CorruptionError(f"corruption {name!r}: " + "; ".join(problems)) from None


def _single_from_batch(apply_batch: BatchKernel) -> Kernel:
    def apply(image: np.ndarray, params: Any, rng: np.random.Generator) -> np.ndarray:
        return apply_batch(image[None], params, [rng])[0]

    return apply


def temporal_refusal(name: str) -> str:
    return (f"corruption {name!r} is temporal (it changes across the frames of a clip) and does not apply to a still "
            f"image; apply it to a clip with domainbench.corruptions.clips.corrupt_clip, or choose an image corruption")


def _refuse_still(name: str) -> Kernel:
    def apply(image: np.ndarray, params: Any, rng: np.random.Generator) -> np.ndarray:
        raise CorruptionError(temporal_refusal(name))

    return apply


@dataclass(frozen=True)
class CorruptionSpec:
    """One corruption: planner-facing metadata, parameter schema, severity ladder and kernel.

    ``ladder[s]`` gives the parameters of severity ``s`` (1..5). ``ranges`` is the continuous
    parameter domain used by the stability metrics, each entry ordered (weakest, strongest), so
    the first value may be larger than the second (e.g. JPEG quality). ``ordinal`` is False for
    corruptions whose severity is not a distortion scale (flips). Parameters not in ``ranges``
    keep their severity-3 value in ``continuous_params``. ``draws`` names the random values the
    kernel records (see the module docstring). ``ladder_version`` numbers the severity ladder and
    kernel behaviour: it is bumped whenever what "severity s" produces changes (version 2: the
    ImageNet-C corruptions recalibrated to ``imagecorruptions`` 1.1.2), and the engine stores it
    on every unit, so results computed under different ladders are never taken for the same cell.
    """

    name: str
    family: Family
    description: str
    situations: list[str]
    params_model: type[Params]
    ladder: dict[int, dict[str, Any]]
    apply: Kernel | None = None
    ranges: dict[str, tuple[float, float]] = field(default_factory=dict)
    ordinal: bool = True
    apply_batch: BatchKernel | None = None
    grayscale: bool = True
    backend: str = "numpy"
    draws: dict[str, tuple[float, float] | None] = field(default_factory=dict)
    ladder_version: int = DEFAULT_LADDER_VERSION
    apply_clip: ClipKernel | None = None

    @property
    def temporal(self) -> bool:
        """True for a corruption of whole clips (state across frames); it has no still-image kernel."""
        return self.apply_clip is not None

    def __post_init__(self) -> None:
        if not self.name.isidentifier() or self.name != self.name.lower():
            raise CorruptionError(f"corruption name {self.name!r} must be snake_case (lowercase identifier)")
        if isinstance(self.ladder_version, bool) or not isinstance(self.ladder_version, int) or self.ladder_version < 1:
            raise CorruptionError(f"corruption {self.name!r}: ladder_version must be a positive integer")
        if self.family not in FAMILIES:
            raise CorruptionError(f"corruption {self.name!r}: family {self.family!r} is not one of {FAMILIES}")
        if not self.description.strip() or not self.situations:
            raise CorruptionError(f"corruption {self.name!r} needs a description and at least one situation")
        if self.apply_clip is not None:
            if self.apply is not None or self.apply_batch is not None:
                raise CorruptionError(f"corruption {self.name!r}: a temporal corruption (apply_clip) takes no still-image kernel")
            object.__setattr__(self, "apply", _refuse_still(self.name))
        if self.apply is None:
            if self.apply_batch is None:
                raise CorruptionError(f"corruption {self.name!r} needs a kernel: give apply, apply_batch (or both), or apply_clip")
            object.__setattr__(self, "apply", _single_from_batch(self.apply_batch))
        if not (isinstance(self.params_model, type) and issubclass(self.params_model, BaseModel)):
            raise CorruptionError(f"corruption {self.name!r}: params_model must be a pydantic model class")
        ladder = {int(k): dict(v) for k, v in self.ladder.items()}
        if sorted(ladder) != list(SEVERITIES):
            raise CorruptionError(f"corruption {self.name!r}: ladder must have severities 1..5, got {sorted(ladder)}")
        resolved = {s: validate_against(self.name, self.params_model, p).model_dump() for s, p in ladder.items()}
        object.__setattr__(self, "ladder", resolved)
        object.__setattr__(self, "situations", list(self.situations))
        ranges = {k: (float(a), float(b)) for k, (a, b) in self.ranges.items()}
        for key, (a, b) in ranges.items():
            if key not in self.params_model.model_fields:
                raise CorruptionError(f"corruption {self.name!r}: range for unknown parameter {key!r}")
            for end in (a, b):
                validate_against(self.name, self.params_model, {**resolved[3], key: self._cast(key, end)})
        object.__setattr__(self, "ranges", ranges)
        draws: dict[str, tuple[float, float] | None] = {}
        for key, interval in self.draws.items():
            if not (isinstance(key, str) and key.isidentifier()):
                raise CorruptionError(f"corruption {self.name!r}: drawn quantity name {key!r} must be an identifier")
            draws[key] = None if interval is None else (float(interval[0]), float(interval[1]))
        object.__setattr__(self, "draws", draws)

    def _cast(self, key: str, value: float) -> Any:
        if self.params_model.model_fields[key].annotation is int:
            return int(round(value))
        return float(value)

    def severity_params(self, severity: int) -> dict[str, Any]:
        """The parameters of severity 1..5."""
        if isinstance(severity, bool) or not isinstance(severity, (int, np.integer)) or int(severity) not in SEVERITIES:
            raise CorruptionError(f"severity must be an integer 1..5, got {severity!r} (corruption {self.name!r})")
        return dict(self.ladder[int(severity)])

    def continuous_params(self, m: int) -> list[dict[str, Any]]:
        """``m`` parameter sets equally spaced across ``ranges``, weakest to strongest."""
        if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 1:
            raise CorruptionError(f"m must be a positive integer, got {m!r}")
        base = self.ladder[3]
        if not self.ranges:
            return [dict(base) for _ in range(m)]
        ts = np.linspace(0.0, 1.0, int(m)) if m > 1 else np.array([1.0])
        out = []
        for t in ts:
            point = dict(base)
            for key, (a, b) in self.ranges.items():
                point[key] = self._cast(key, a + float(t) * (b - a))
            out.append(validate_against(self.name, self.params_model, point).model_dump())
        return out

    def validate(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """Fully resolved parameters or a CorruptionError; parameters left out take their severity-3 value."""
        if not isinstance(params, Mapping):
            raise CorruptionError(f"parameters of corruption {self.name!r} must be a dict, got {type(params).__name__}")
        validate_against(self.name, self.params_model, {**self.ladder[3], **params})  # names unknown keys first
        return validate_against(self.name, self.params_model, {**self.ladder[3], **params}).model_dump()

    def schema(self) -> dict[str, Any]:
        """Parameter schema for prompts and UIs: type, bounds, default, description per parameter."""
        out: dict[str, Any] = {}
        for key, info in self.params_model.model_fields.items():
            lo, hi = field_bounds(self.params_model, key)
            out[key] = {
                "type": getattr(info.annotation, "__name__", str(info.annotation)),
                "min": lo,
                "max": hi,
                "default": info.default if info.default is not None else None,
                "description": info.description or "",
            }
            if key in self.ranges:
                out[key]["continuous_range"] = list(self.ranges[key])
        return out

    def catalogue_entry(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "family": self.family,
            "description": self.description,
            "situations": list(self.situations),
            "ordinal": self.ordinal,
            "grayscale": self.grayscale,
            "parameters": self.schema(),
            # Interval parameters are named *_range by project convention.
            "ranges": {f"{k}_range": list(v) for k, v in self.ranges.items()},
            "ladder": {str(s): dict(p) for s, p in self.ladder.items()},
            "backend": self.backend,
            "ladder_version": self.ladder_version,
            "temporal": self.temporal,
        }

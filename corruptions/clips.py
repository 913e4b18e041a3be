"""Corrupt a clip: temporal corruptions (state across frames) and image corruptions frame by frame.

Public API::

    corrupt_clip(name, frames, severity, *, seed, fps, mode=None) -> np.ndarray
    is_temporal(name) -> bool
    temporal_names() -> list[str]
    clip_params(name, severity) -> dict | None

``frames`` is a uint8 array (T, H, W, 3); the result is a new array of the same shape and dtype
(``frame_drop`` repeats the last kept frame in place of a dropped one, so T never changes).

A temporal corruption (``CorruptionSpec.apply_clip``) gets one generator for the whole clip,
``numpy.random.default_rng(seed)``; ``mode`` must be None for it. An image corruption is applied
frame by frame in one of two modes:

- ``"independent"`` (the default): frame ``t`` is corrupted with seed ``derive_seed(seed, t)``,
  a new draw per frame (sensor noise, which is new in every exposure);
- ``"static"``: every frame with ``seed`` itself, one draw for the whole clip (the same noise
  field, blur direction, occluder boxes on every frame: dirt or a scratch on the lens).

Severity: 0 is the identity (a bit-exact copy); an integer 1..5 is the ladder's step; a float in
[1, 5] between two steps interpolates every numeric parameter linearly between them (integer
parameters rounded), the continuous scale between the ladder's steps. Everything is a pure function of
(name, frames, severity, seed, fps, mode): the same pixels in every process.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

from domainbench.corruptions.api import MIN_SIDE, corrupt_batch
from domainbench.corruptions.draws import RecordingGenerator
from domainbench.corruptions.errors import CorruptionError
from domainbench.corruptions.registry import get, names
from domainbench.corruptions.seeding import check_seed, derive_seed
from domainbench.corruptions.spec import SEVERITIES, CorruptionSpec, validate_against

MODES: tuple[str, ...] = ("independent", "static")
DEFAULT_MODE = "independent"


def is_temporal(name: str) -> bool:
    """True when ``name`` is a temporal corruption (applies to clips only); unknown names raise."""
    return get(name).temporal


def temporal_names() -> list[str]:
    """The registered temporal corruptions, sorted."""
    return names(temporal=True)


def _check_severity(spec: CorruptionSpec, severity: Any) -> float:
    if isinstance(severity, bool) or not isinstance(severity, numbers.Real) or not math.isfinite(float(severity)):
        raise CorruptionError(f"severity of corruption {spec.name!r} must be a number 0..5, got {severity!r}")
    value = float(severity)
    if value != 0.0 and not SEVERITIES[0] <= value <= SEVERITIES[-1]:
        raise CorruptionError(
            f"severity of corruption {spec.name!r} must be 0 (no corruption) or in [1, 5] (1..5 the ladder's steps, "
            f"a float between them interpolates), got {severity!r}"
        )
    return value


def _interpolated(spec: CorruptionSpec, severity: float) -> dict[str, Any]:
    lo, hi = math.floor(severity), math.ceil(severity)
    if lo == hi:
        return spec.severity_params(int(lo))
    t = severity - lo
    a, b = spec.ladder[lo], spec.ladder[hi]
    point: dict[str, Any] = {}
    for key, va in a.items():
        vb = b[key]
        if isinstance(va, bool) or not isinstance(va, numbers.Real) or not isinstance(vb, numbers.Real):
            point[key] = va  # a choice, not a scale: the lower step's
        elif spec.params_model.model_fields[key].annotation is int:
            point[key] = int(round(va + t * (vb - va)))
        else:
            point[key] = float(va + t * (vb - va))
    return validate_against(spec.name, spec.params_model, point).model_dump()


def clip_params(name: str, severity: int | float) -> dict[str, Any] | None:
    """The parameters ``corrupt_clip`` applies at ``severity``; None at severity 0 (the identity)."""
    spec = get(name)
    value = _check_severity(spec, severity)
    return None if value == 0.0 else _interpolated(spec, value)


def _check_frames(frames: Any) -> np.ndarray:
    if not isinstance(frames, np.ndarray):
        raise CorruptionError(f"frames must be a numpy array (T, H, W, 3), got {type(frames).__name__}; "
                              "stack the clip's frames with np.stack(frames)")
    if frames.dtype != np.uint8:
        hint = " (scale floats in [0, 1] with (x * 255).round().astype(np.uint8))" if frames.dtype.kind == "f" else ""
        raise CorruptionError(f"frames must have dtype uint8, got {frames.dtype}{hint}")
    if frames.ndim != 4 or frames.shape[-1] != 3:
        hint = ""
        if frames.ndim == 3:
            hint = "; a grey clip needs np.repeat(frames[..., None], 3, axis=-1), a single image needs frames[None]"
        elif frames.ndim == 4 and frames.shape[-1] == 4:
            hint = "; drop the alpha channel with frames[..., :3]"
        raise CorruptionError(f"frames must have shape (T, H, W, 3) (RGB frames of one clip), got {frames.shape}{hint}")
    t, h, w = frames.shape[:3]
    if t < 1:
        raise CorruptionError(f"frames holds no frame (shape {frames.shape}); pass a clip of at least one frame")
    if h < MIN_SIDE or w < MIN_SIDE:
        raise CorruptionError(f"frames are {h}x{w}; corruptions need at least {MIN_SIDE}x{MIN_SIDE} pixels")
    return np.ascontiguousarray(frames)


def _check_fps(fps: Any) -> float:
    if isinstance(fps, bool) or not isinstance(fps, numbers.Real) or not math.isfinite(float(fps)) or float(fps) <= 0:
        raise CorruptionError(f"fps must be the clip's frame rate, a positive number of frames per second, got {fps!r}")
    return float(fps)


def _check_mode(spec: CorruptionSpec, mode: Any) -> str | None:
    if spec.temporal:
        if mode is not None:
            raise CorruptionError(
                f"corruption {spec.name!r} is temporal (one evolving draw per clip) and takes no mode, got mode={mode!r}; "
                f"leave mode out (modes {', '.join(MODES)} are for image corruptions)"
            )
        return None
    if mode is None:
        return DEFAULT_MODE
    if mode not in MODES:
        raise CorruptionError(f"mode of image corruption {spec.name!r} on a clip must be one of {', '.join(MODES)} "
                              f"('static': one draw for the whole clip, 'independent': a new draw per frame), got {mode!r}")
    return str(mode)


def frame_seeds(seed: int, n_frames: int, mode: str) -> list[int]:
    """The per-frame seeds of an image corruption applied to a clip in ``mode``."""
    if mode == "static":
        return [seed] * n_frames
    return [derive_seed(seed, t) for t in range(n_frames)]


def corrupt_clip(name: str, frames: np.ndarray, severity: int | float, *, seed: int, fps: float,
                 mode: str | None = None) -> np.ndarray:
    """Corrupt one clip (T, H, W, 3) uint8; returns a new array of the same shape (see the module docstring)."""
    spec = get(name)
    mode_ = _check_mode(spec, mode)
    value = _check_severity(spec, severity)
    seed = check_seed(seed)
    fps_ = _check_fps(fps)
    arr = _check_frames(frames)
    if value == 0.0:
        return arr.copy()
    params = _interpolated(spec, value)
    if spec.temporal:
        assert spec.apply_clip is not None
        model = spec.params_model.model_validate(params)
        out = spec.apply_clip(arr, model, RecordingGenerator(seed), fps_)
        if not isinstance(out, np.ndarray) or out.shape != arr.shape or out.dtype != np.uint8:
            got = f"{out.shape} {out.dtype}" if isinstance(out, np.ndarray) else type(out).__name__
            raise RuntimeError(f"clip kernel of corruption {spec.name!r} returned {got}, expected {arr.shape} uint8")
        return out.copy() if np.shares_memory(out, frames) else out
    assert mode_ is not None
    return corrupt_batch(arr, spec.name, params=params, seeds=frame_seeds(seed, arr.shape[0], mode_))


__all__ = ["DEFAULT_MODE", "MODES", "clip_params", "corrupt_clip", "frame_seeds", "is_temporal", "temporal_names"]

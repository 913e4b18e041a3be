"""Corrupt one image or a batch: input checks, parameter resolution, seeding, dispatch to kernels."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, overload

import numpy as np

from domainbench.corruptions.draws import RecordingGenerator
from domainbench.corruptions.errors import CorruptionError
from domainbench.corruptions.registry import get
from domainbench.corruptions.seeding import batch_seeds, check_seed
from domainbench.corruptions.spec import CorruptionSpec, temporal_refusal

# what a kernel drew, per quantity one entry per image (JSON-serialisable)
Drawn = dict[str, list[Any]]

MIN_SIDE = 16


def validate_params(name: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """Fully resolved, validated parameters; unknown or out-of-range ones raise CorruptionError.

    Parameters left out take their severity-3 value.
    """
    return get(name).validate(params)


def resolve_params(name: str, severity: int | None = None, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The parameters that ``corrupt`` applies for (severity) or (params); give exactly one."""
    spec = get(name)
    return _resolve(spec, severity, params)


def _resolve(spec: CorruptionSpec, severity: int | None, params: Mapping[str, Any] | None) -> dict[str, Any]:
    if (severity is None) == (params is None):
        raise CorruptionError(
            f"corruption {spec.name!r}: give exactly one of severity (1..5) or params (a dict), "
            f"got severity={severity!r} and params={params!r}"
        )
    if severity is not None:
        return spec.severity_params(severity)
    return spec.validate(params)  # type: ignore[arg-type]


def _check_image(image: Any, what: str, batch: bool) -> np.ndarray:
    """(N, H, W, C) uint8 C-contiguous view/copy of a checked image or batch, C in {1, 3}."""
    if not isinstance(image, np.ndarray):
        raise CorruptionError(f"{what} must be a numpy array, got {type(image).__name__}; convert with np.asarray(img)")
    if image.size == 0:
        raise CorruptionError(f"{what} is empty (shape {image.shape}); pass an image of at least {MIN_SIDE}x{MIN_SIDE}")
    if image.dtype != np.uint8:
        hint = " (scale floats in [0, 1] with (x * 255).round().astype(np.uint8))" if image.dtype.kind == "f" else ""
        raise CorruptionError(f"{what} must have dtype uint8, got {image.dtype}{hint}")
    lead = 1 if batch else 0
    ndim = image.ndim - lead
    if ndim not in (2, 3):
        shape_txt = "(N, H, W) or (N, H, W, C)" if batch else "(H, W) or (H, W, C)"
        raise CorruptionError(f"{what} must have shape {shape_txt}, got {image.shape}")
    if ndim == 3 and image.shape[-1] not in (1, 3):
        hint = "; drop the alpha channel with image[..., :3]" if image.shape[-1] == 4 else ""
        raise CorruptionError(f"{what} must have 1 or 3 channels (grey or RGB), got {image.shape[-1]}{hint}")
    h, w = image.shape[lead], image.shape[lead + 1]
    if h < MIN_SIDE or w < MIN_SIDE:
        raise CorruptionError(f"{what} is {h}x{w}; corruptions need at least {MIN_SIDE}x{MIN_SIDE} pixels")
    arr = image if batch else image[None]
    if ndim == 2:
        arr = arr[..., None]
    return np.ascontiguousarray(arr)


def _fixed_per_image(spec: CorruptionSpec, drawn: Mapping[str, Any] | None, n: int) -> list[dict[str, Any]]:
    """The caller's fixed drawn values, split by image (``drawn`` as ``corrupt_batch`` returns it)."""
    if not drawn:
        return [{} for _ in range(n)]
    if not isinstance(drawn, Mapping):
        raise CorruptionError(f"drawn must be a dict of per-image lists, got {type(drawn).__name__}")
    unknown = sorted(set(drawn) - set(spec.draws))
    if unknown:
        has = ", ".join(spec.draws) or "nothing"
        raise CorruptionError(f"corruption {spec.name!r} draws no {', '.join(map(repr, unknown))}; it draws: {has}")
    per_image: list[dict[str, Any]] = [{} for _ in range(n)]
    for key, values in drawn.items():
        if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or len(values) != n:
            raise CorruptionError(f"drawn[{key!r}] must be a list with one value per image ({n}), got {values!r}")
        interval = spec.draws[key]
        for i, value in enumerate(values):
            if value is None:
                continue
            if interval is not None and not isinstance(value, (list, tuple)):
                lo, hi = sorted(interval)
                if not lo <= float(value) <= hi:
                    raise CorruptionError(f"drawn[{key!r}][{i}] = {value!r} is outside the interval [{lo:g}, {hi:g}] it is drawn from")
            per_image[i][key] = value
    return per_image


def _run(
    spec: CorruptionSpec, images: np.ndarray, params: dict[str, Any], seeds: list[int], fixed: Mapping[str, Any] | None = None
) -> tuple[np.ndarray, Drawn]:
    """Apply ``spec`` to an (N, H, W, C) batch; C = 1 is routed through RGB for colour-only kernels."""
    if spec.temporal:
        raise CorruptionError(temporal_refusal(spec.name))
    model = spec.params_model.model_validate(params)
    rngs = [RecordingGenerator(s, f) for s, f in zip(seeds, _fixed_per_image(spec, fixed, len(seeds)))]
    grey_via_rgb = images.shape[-1] == 1 and not spec.grayscale
    work = np.repeat(images, 3, axis=-1) if grey_via_rgb else images
    if spec.apply_batch is not None:
        out = spec.apply_batch(work, model, rngs)
    else:
        out = np.stack([spec.apply(np.ascontiguousarray(img), model, rng) for img, rng in zip(work, rngs)])
    if out.shape != work.shape or out.dtype != np.uint8:
        raise RuntimeError(f"kernel of corruption {spec.name!r} returned {out.shape} {out.dtype}, expected {work.shape} uint8")
    if grey_via_rgb:
        import cv2  # imported here: reading stored runs loads this package (its registry) and never converts pixels

        out = np.stack([cv2.cvtColor(np.ascontiguousarray(o), cv2.COLOR_RGB2GRAY) for o in out])[..., None]
    keys = sorted({k for rng in rngs for k in rng.drawn})
    undeclared = sorted(set(keys) - set(spec.draws))
    if undeclared:
        raise RuntimeError(f"kernel of corruption {spec.name!r} recorded {undeclared} but its spec declares draws {sorted(spec.draws)}")
    return out, {k: [rng.drawn.get(k) for rng in rngs] for k in keys}


def corrupt(
    image: np.ndarray,
    name: str,
    severity: int | None = None,
    params: Mapping[str, Any] | None = None,
    seed: int = 0,
) -> np.ndarray:
    """Corrupt one uint8 image (H, W), (H, W, 1) or (H, W, 3), H, W >= 16, with severity 1..5 or explicit params.

    A pure function of its inputs: the same (image, name, parameters, seed) gives the same pixels
    in every process. The output has the input's shape and dtype.
    """
    spec = get(name)
    resolved = _resolve(spec, severity, params)
    seed = check_seed(seed)
    arr = _check_image(image, "image", batch=False)
    out = _run(spec, arr, resolved, [seed])[0][0]
    return out.reshape(image.shape)


@overload
def corrupt_batch(
    images: np.ndarray,
    name: str,
    severity: int | None = ...,
    params: Mapping[str, Any] | None = ...,
    seeds: int | Sequence[int] | np.ndarray = ...,
    return_drawn: Literal[False] = ...,
    drawn: Mapping[str, Sequence[Any]] | None = ...,
) -> np.ndarray: ...


@overload
def corrupt_batch(
    images: np.ndarray,
    name: str,
    severity: int | None = ...,
    params: Mapping[str, Any] | None = ...,
    seeds: int | Sequence[int] | np.ndarray = ...,
    *,
    return_drawn: Literal[True],
    drawn: Mapping[str, Sequence[Any]] | None = ...,
) -> tuple[np.ndarray, Drawn]: ...


def corrupt_batch(
    images: np.ndarray,
    name: str,
    severity: int | None = None,
    params: Mapping[str, Any] | None = None,
    seeds: int | Sequence[int] | np.ndarray = 0,
    return_drawn: bool = False,
    drawn: Mapping[str, Sequence[Any]] | None = None,
) -> np.ndarray | tuple[np.ndarray, Drawn]:
    """Corrupt an (N, H, W[, C]) uint8 batch; equals ``corrupt`` image by image with the same seeds.

    ``seeds`` is one int per image, or one int ``S`` from which image ``i`` gets
    ``corruptions.derive_seed(S, i)``.

    ``return_drawn=True`` returns ``(images, drawn)``: for each random value the kernel drew
    (``spec.draws``: a blur direction, a rain slant, occluder boxes) a list with one entry per
    image, JSON-serialisable; ``{}`` when it draws nothing worth recording. ``drawn`` (in the
    same shape; ``None`` entries are drawn as usual) applies those values instead of the ones
    the seeds would draw; the rest of each image's randomness still comes from its seed.
    """
    spec = get(name)
    resolved = _resolve(spec, severity, params)
    if isinstance(images, (list, tuple)):
        try:
            images = np.stack([np.asarray(i) for i in images])
        except ValueError as exc:
            raise CorruptionError(f"images in a batch must all have the same shape: {exc}") from None
    arr = _check_image(images, "images", batch=True)
    per_image = batch_seeds(seeds, arr.shape[0])
    out, applied = _run(spec, arr, resolved, per_image, drawn)
    out = out.reshape(images.shape)
    return (out, applied) if return_drawn else out

"""Photometric family: global intensity and colour changes (brightness, contrast, saturation, colour cast)."""

from __future__ import annotations

import numpy as np
from pydantic import Field

from corruptions.registry import builtin
from corruptions.spec import CorruptionSpec, Params

_LEVELS = np.arange(256, dtype=np.float64)


def _lut(values: np.ndarray) -> np.ndarray:
    return np.clip(np.rint(values), 0, 255).astype(np.uint8)


class BrightnessParams(Params):
    delta: float = Field(0.3, ge=-1.0, le=1.0, description="value added to every pixel as a fraction of 255 (negative darkens)")


def brightness_batch(images: np.ndarray, p: BrightnessParams, rngs: list[np.random.Generator]) -> np.ndarray:
    return _lut(_LEVELS + p.delta * 255.0)[images]


class ContrastParams(Params):
    factor: float = Field(0.2, ge=0.0, le=3.0, description="contrast factor around the image mean (1 = unchanged, < 1 flattens)")


def contrast_batch(images: np.ndarray, p: ContrastParams, rngs: list[np.random.Generator]) -> np.ndarray:
    n = images.shape[0]
    flat = images.reshape(n, -1)
    # integer sums make the mean exact, so a batch and its single images agree bit for bit
    means = flat.sum(axis=1, dtype=np.int64) / flat.shape[1]
    luts = _lut((_LEVELS[None, :] - means[:, None]) * p.factor + means[:, None])
    return np.take_along_axis(luts, flat.astype(np.intp), axis=1).reshape(images.shape)


builtin(
    CorruptionSpec(
        name="brightness",
        family="photometric",
        description="Raises the brightness of every pixel, washing out highlights, as in over-exposure or glare.",
        situations=[
            "over-exposed outdoor photo in midday sun",
            "snow field reflecting sunlight into the lens",
            "camera auto-exposure lagging after leaving a tunnel",
            "X-ray film over-exposed in the developer",
            "phone camera pointed towards a bright window",
        ],
        params_model=BrightnessParams,
        ladder={1: {"delta": 0.1}, 2: {"delta": 0.2}, 3: {"delta": 0.3}, 4: {"delta": 0.4}, 5: {"delta": 0.5}},
        ranges={"delta": (0.05, 0.6)},
        apply=lambda img, p, rng: brightness_batch(img[None], p, [rng])[0],
        apply_batch=brightness_batch,
        backend="numpy LUT",
    ),
    CorruptionSpec(
        name="contrast",
        family="photometric",
        description="Pulls every pixel towards the image mean, flattening contrast as in haze, a dirty lens or a poor display capture.",
        situations=[
            "photo taken through a hazy or dusty window",
            "faded scan of an old printed photograph",
            "overcast flat lighting in a warehouse",
            "screen photo with reflections washing out the image",
            "ultrasound image with low gain",
        ],
        params_model=ContrastParams,
        ladder={1: {"factor": 0.4}, 2: {"factor": 0.3}, 3: {"factor": 0.2}, 4: {"factor": 0.1}, 5: {"factor": 0.05}},
        ranges={"factor": (0.6, 0.03)},
        apply=lambda img, p, rng: contrast_batch(img[None], p, [rng])[0],
        apply_batch=contrast_batch,
        backend="numpy LUT (ImageNet-C contrast)",
    ),
)

"""Photometric family: global intensity and colour changes (brightness, contrast, saturation, colour cast)."""

from __future__ import annotations

import cv2
import numpy as np
from albumentations.augmentations.pixel import functional as apf
from pydantic import Field

from corruptions.draws import record
from corruptions.spec import CorruptionSpec, Params

_LEVELS = np.arange(256, dtype=np.float64)


def _lut(values: np.ndarray) -> np.ndarray:
    return np.clip(np.rint(values), 0, 255).astype(np.uint8)


class BrightnessParams(Params):
    delta: float = Field(0.3, ge=-1.0, le=1.0, description="value added to every pixel as a fraction of 255 (negative darkens)")


def _apply_luts(images: np.ndarray, luts: np.ndarray) -> np.ndarray:
    """cv2.LUT image by image (several times faster than numpy fancy indexing)."""
    out = np.empty_like(images)
    for i, img in enumerate(images):
        out[i] = cv2.LUT(img, luts[i]).reshape(img.shape)
    return out


def brightness_batch(images: np.ndarray, p: BrightnessParams, rngs: list[np.random.Generator]) -> np.ndarray:
    lut = _lut(_LEVELS + p.delta * 255.0)
    return _apply_luts(images, np.broadcast_to(lut, (images.shape[0], 256)))


class ContrastParams(Params):
    factor: float = Field(0.2, ge=0.0, le=3.0, description="contrast factor around the image mean (1 = unchanged, < 1 flattens)")


def contrast_batch(images: np.ndarray, p: ContrastParams, rngs: list[np.random.Generator]) -> np.ndarray:
    n = images.shape[0]
    flat = images.reshape(n, -1)
    # integer sums make the mean exact, so a batch and its single images agree bit for bit
    means = flat.sum(axis=1, dtype=np.int64) / flat.shape[1]
    luts = _lut((_LEVELS[None, :] - means[:, None]) * p.factor + means[:, None])
    return _apply_luts(images, luts)


CORRUPTIONS: list[CorruptionSpec] = [
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
        apply_batch=brightness_batch,
        backend="cv2.LUT",
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
        apply_batch=contrast_batch,
        backend="cv2.LUT (ImageNet-C contrast)",
    ),
]


class SaturateParams(Params):
    factor: float = Field(3.0, ge=0.0, le=20.0, description="saturation factor (1 = unchanged, 0 = grey, > 1 oversaturates)")


def saturate(img: np.ndarray, p: SaturateParams, rng: np.random.Generator) -> np.ndarray:
    return apf.adjust_saturation_torchvision(img, p.factor)


class ColorShiftParams(Params):
    magnitude: float = Field(0.2, ge=0.0, le=1.0, description="length of the zero-sum RGB offset as a fraction of 255")


def color_shift_batch(images: np.ndarray, p: ColorShiftParams, rngs: list[np.random.Generator]) -> np.ndarray:
    # unit vectors spanning the offsets that leave grey level unchanged on average
    basis = np.array([[1.0, -1.0, 0.0], [0.5, 0.5, -1.0]])
    basis /= np.linalg.norm(basis, axis=1, keepdims=True)
    angles = np.array([record(rng, "angle", rng.uniform(0.0, 2 * np.pi)) for rng in rngs])  # direction of the cast
    offsets = (np.cos(angles)[:, None] * basis[0] + np.sin(angles)[:, None] * basis[1]) * (p.magnitude * 255.0)
    offsets = np.rint(offsets).astype(np.int16)
    return np.clip(images.astype(np.int16) + offsets[:, None, None, :], 0, 255).astype(np.uint8)


CORRUPTIONS += [
    CorruptionSpec(
        name="saturate",
        family="photometric",
        description="Exaggerates colour saturation so colours look garish and clipped, as from aggressive in-camera processing.",
        situations=[
            "phone camera 'vivid' filter",
            "social media photo with a saturation filter",
            "badly calibrated consumer display photographed",
            "over-processed HDR landscape photo",
            "cheap action camera colour profile",
        ],
        params_model=SaturateParams,
        ladder={1: {"factor": 1.5}, 2: {"factor": 2.0}, 3: {"factor": 3.0}, 4: {"factor": 5.0}, 5: {"factor": 8.0}},
        ranges={"factor": (1.2, 10.0)},
        apply=saturate,
        grayscale=False,
        backend="albumentations adjust_saturation_torchvision",
    ),
    CorruptionSpec(
        name="color_shift",
        family="photometric",
        description="Adds a colour cast in a random hue direction, as from wrong white balance or tinted lighting.",
        situations=[
            "wrong white balance under tungsten or sodium street lights",
            "underwater photo with a blue-green cast",
            "tinted vehicle windscreen in front of a dashcam",
            "aged colour film with faded dyes",
            "operating theatre lights with a strong colour temperature",
        ],
        params_model=ColorShiftParams,
        ladder={
            1: {"magnitude": 0.08}, 2: {"magnitude": 0.14}, 3: {"magnitude": 0.2}, 4: {"magnitude": 0.28}, 5: {"magnitude": 0.38},
        },
        ranges={"magnitude": (0.04, 0.45)},
        apply_batch=color_shift_batch,
        grayscale=False,
        backend="numpy (RGBShift-like zero-sum offset)",
        draws={"angle": (0.0, 2 * np.pi)},  # radians
    ),
]

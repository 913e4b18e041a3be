"""Photometric family: global intensity and colour changes (brightness, contrast, saturation, colour cast)."""

from __future__ import annotations

import cv2
import numpy as np
from pydantic import Field

from domainbench.corruptions.draws import record
from domainbench.corruptions.kernels._common import to_uint8
from domainbench.corruptions.kernels._imagenet_c import IMAGENET_C_LADDER_VERSION, hsv_saturation_affine, hsv_value_shift
from domainbench.corruptions.spec import CorruptionSpec, Params

_LEVELS = np.arange(256, dtype=np.float64)


def _lut(values: np.ndarray) -> np.ndarray:
    return np.clip(np.rint(values), 0, 255).astype(np.uint8)


class BrightnessParams(Params):
    delta: float = Field(0.3, ge=-1.0, le=1.0, description="added to the HSV value (brightest channel) as a fraction of 255 (negative darkens)")


def _apply_luts(images: np.ndarray, luts: np.ndarray) -> np.ndarray:
    """cv2.LUT image by image (several times faster than numpy fancy indexing)."""
    out = np.empty_like(images)
    for i, img in enumerate(images):
        out[i] = cv2.LUT(img, luts[i]).reshape(img.shape)
    return out


def brightness_batch(images: np.ndarray, p: BrightnessParams, rngs: list[np.random.Generator]) -> np.ndarray:
    """ImageNet-C brightness: HSV value + delta, hue and saturation kept (grey images: every value + delta)."""
    if images.shape[-1] == 1:
        lut = _lut(_LEVELS + p.delta * 255.0)
        return _apply_luts(images, np.broadcast_to(lut, (images.shape[0], 256)))
    x = images.astype(np.float32) * np.float32(1 / 255.0)
    return to_uint8(hsv_value_shift(x, p.delta) * np.float32(255.0))


class ContrastParams(Params):
    factor: float = Field(0.2, ge=0.0, le=3.0, description="contrast factor around each channel's mean (1 = unchanged, < 1 flattens)")


def contrast_batch(images: np.ndarray, p: ContrastParams, rngs: list[np.random.Generator]) -> np.ndarray:
    """ImageNet-C contrast: every channel pulled towards its own mean (colour is kept)."""
    n, c = images.shape[0], images.shape[-1]
    flat = images.reshape(n, -1, c)
    # integer sums make the mean exact, so a batch and its single images agree bit for bit
    means = flat.sum(axis=1, dtype=np.int64) / flat.shape[1]  # (n, c)
    out = np.empty_like(images)
    for i in range(n):
        luts = _lut((_LEVELS[None, :] - means[i][:, None]) * p.factor + means[i][:, None])  # (c, 256)
        if c == 1:
            out[i] = cv2.LUT(images[i], luts[0]).reshape(images[i].shape)
        else:
            out[i] = cv2.LUT(images[i], np.ascontiguousarray(luts.T).reshape(256, 1, c))
    return out


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
        backend="numpy (ImageNet-C brightness: HSV value, as a per-pixel scale)",
        ladder_version=IMAGENET_C_LADDER_VERSION,
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
        backend="cv2.LUT per channel (ImageNet-C contrast)",
        ladder_version=IMAGENET_C_LADDER_VERSION,
    ),
]


class SaturateParams(Params):
    factor: float = Field(2.0, ge=0.0, le=50.0, description="HSV saturation factor (1 = unchanged, < 1 desaturates, > 1 oversaturates)")
    offset: float = Field(0.0, ge=-1.0, le=1.0, description="added to the HSV saturation after the factor")


def saturate(img: np.ndarray, p: SaturateParams, rng: np.random.Generator) -> np.ndarray:
    """ImageNet-C saturate: HSV saturation S -> clip(S * factor + offset, 0, 1)."""
    x = img.astype(np.float32) * np.float32(1 / 255.0)
    return to_uint8(hsv_saturation_affine(x, p.factor, p.offset) * np.float32(255.0))


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
        description="Changes colour saturation as ImageNet-C does: washed-out colours at severities 1-2, garish, clipped colours at 3-5, as from faded prints or aggressive in-camera processing.",
        situations=[
            "phone camera 'vivid' filter",
            "social media photo with a saturation filter",
            "badly calibrated consumer display photographed",
            "over-processed HDR landscape photo",
            "cheap action camera colour profile",
        ],
        params_model=SaturateParams,
        ladder={
            1: {"factor": 0.3, "offset": 0.0}, 2: {"factor": 0.1, "offset": 0.0}, 3: {"factor": 2.0, "offset": 0.0},
            4: {"factor": 5.0, "offset": 0.1}, 5: {"factor": 20.0, "offset": 0.2},
        },
        ranges={"factor": (1.5, 20.0)},
        apply=saturate,
        grayscale=False,
        backend="numpy (ImageNet-C saturate: HSV saturation without the HSV round trip)",
        ladder_version=IMAGENET_C_LADDER_VERSION,
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

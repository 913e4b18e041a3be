"""Sensor family: artefacts of the imaging chip and its optics (ISO noise, darkness, lens fall-off, banding)."""

from __future__ import annotations

import cv2
import numpy as np
from pydantic import Field

from domainbench.corruptions.draws import record
from domainbench.corruptions.kernels._common import apf, to_uint8
from domainbench.corruptions.spec import CorruptionSpec, Params


class IsoNoiseParams(Params):
    intensity: float = Field(0.3, ge=0.0, le=2.0, description="luminance noise strength")
    color_shift: float = Field(0.03, ge=0.0, le=0.5, description="hue noise strength")


def iso_noise(img: np.ndarray, p: IsoNoiseParams, rng: np.random.Generator) -> np.ndarray:
    return apf.iso_noise(img, p.color_shift, p.intensity, rng)


class LowLightParams(Params):
    gain: float = Field(0.3, ge=0.01, le=1.0, description="exposure multiplier in linear light (lower = darker)")
    noise: float = Field(0.02, ge=0.0, le=0.3, description="read-noise standard deviation as a fraction of 255")


def low_light_batch(images: np.ndarray, p: LowLightParams, rngs: list[np.random.Generator]) -> np.ndarray:
    # darken in linear light (gamma 2.2) so shadows crush as with a real under-exposed sensor
    linear = (images.astype(np.float32) / np.float32(255.0)) ** np.float32(2.2) * np.float32(p.gain)
    noise = np.stack([rng.standard_normal(images.shape[1:], dtype=np.float32) for rng in rngs])
    out = np.clip(linear, 0, 1) ** np.float32(1 / 2.2) * np.float32(255.0) + noise * np.float32(p.noise * 255.0)
    return to_uint8(out)


class ChromaticAberrationParams(Params):
    distortion: float = Field(0.07, ge=0.0, le=0.5, description="radial distortion of red (and opposite of blue) channel")


def chromatic_aberration(img: np.ndarray, p: ChromaticAberrationParams, rng: np.random.Generator) -> np.ndarray:
    # which fringe colour is outside is the random part
    sign = record(rng, "sign", 1.0 if rng.random() < 0.5 else -1.0)
    k = sign * p.distortion
    return apf.chromatic_aberration(img, k, 0.0, -k, 0.0, cv2.INTER_LINEAR)


class VignettingParams(Params):
    strength: float = Field(0.5, ge=0.0, le=1.0, description="fraction of light lost in the image corners")


def vignetting_batch(images: np.ndarray, p: VignettingParams, rngs: list[np.random.Generator]) -> np.ndarray:
    h, w = images.shape[1:3]
    ys = (np.arange(h, dtype=np.float32) - (h - 1) / 2) / np.float32((h - 1) / 2)
    xs = (np.arange(w, dtype=np.float32) - (w - 1) / 2) / np.float32((w - 1) / 2)
    r2 = (ys[:, None] ** 2 + xs[None, :] ** 2) / np.float32(2.0)  # 1 in the corners
    gain = (np.float32(1.0) - np.float32(p.strength) * r2 ** np.float32(1.5))[None, :, :, None]
    return to_uint8(images.astype(np.float32) * gain)


class RowNoiseParams(Params):
    sigma: float = Field(0.06, ge=0.0, le=0.5, description="std of the per-row offsets as a fraction of 255")


def row_noise_batch(images: np.ndarray, p: RowNoiseParams, rngs: list[np.random.Generator]) -> np.ndarray:
    n, h, w, c = images.shape
    rows = np.stack([rng.standard_normal(h, dtype=np.float32) for rng in rngs])
    cols = np.stack([rng.standard_normal(w, dtype=np.float32) for rng in rngs])
    scale = np.float32(p.sigma * 255.0)
    banding = rows[:, :, None, None] * scale + cols[:, None, :, None] * (scale * np.float32(0.3))
    return to_uint8(images.astype(np.float32) + banding)


CORRUPTIONS: list[CorruptionSpec] = [
    CorruptionSpec(
        name="iso_noise",
        family="sensor",
        description="Adds the coloured grain of a camera sensor pushed to high ISO, with noise in both brightness and hue.",
        situations=[
            "indoor event photo at ISO 6400",
            "smartphone night-mode shot",
            "baby monitor camera in a dim room",
            "wildlife camera trap at dusk",
            "concert photography under stage lights",
        ],
        params_model=IsoNoiseParams,
        ladder={
            1: {"intensity": 0.1, "color_shift": 0.01}, 2: {"intensity": 0.2, "color_shift": 0.02},
            3: {"intensity": 0.3, "color_shift": 0.03}, 4: {"intensity": 0.45, "color_shift": 0.04},
            5: {"intensity": 0.6, "color_shift": 0.05},
        },
        ranges={"intensity": (0.05, 0.7), "color_shift": (0.01, 0.05)},
        apply=iso_noise,
        grayscale=False,
        backend="albumentations pixel.functional.iso_noise",
    ),
    CorruptionSpec(
        name="low_light",
        family="sensor",
        description="Under-exposes the image and adds sensor read noise, as when photographing in dim light without a flash.",
        situations=[
            "night-time street scene without street lights",
            "indoor surveillance with lights off",
            "cave or mine inspection camera",
            "dashcam on an unlit country road",
            "dim warehouse aisle scanned by a robot",
        ],
        params_model=LowLightParams,
        ladder={
            1: {"gain": 0.6, "noise": 0.01}, 2: {"gain": 0.4, "noise": 0.015}, 3: {"gain": 0.25, "noise": 0.02},
            4: {"gain": 0.15, "noise": 0.025}, 5: {"gain": 0.08, "noise": 0.03},
        },
        ranges={"gain": (0.7, 0.05), "noise": (0.005, 0.035)},
        apply_batch=low_light_batch,
        backend="numpy (gamma-space exposure + Gaussian read noise)",
    ),
    CorruptionSpec(
        name="chromatic_aberration",
        family="sensor",
        description="Shifts the red and blue channels radially so edges get coloured fringes, typical of cheap lenses.",
        situations=[
            "cheap wide-angle webcam lens",
            "old zoom lens at its widest setting",
            "phone camera behind a scratched cover glass",
            "low-cost microscope objective",
            "high-contrast branches against a bright sky",
        ],
        params_model=ChromaticAberrationParams,
        ladder={
            1: {"distortion": 0.02}, 2: {"distortion": 0.04}, 3: {"distortion": 0.07}, 4: {"distortion": 0.1}, 5: {"distortion": 0.15},
        },
        ranges={"distortion": (0.01, 0.2)},
        apply=chromatic_aberration,
        grayscale=False,
        backend="albumentations pixel.functional.chromatic_aberration",
        draws={"sign": (-1.0, 1.0)},
    ),
    CorruptionSpec(
        name="vignetting",
        family="sensor",
        description="Darkens the image towards its corners, the light fall-off of wide apertures, lens hoods and cheap optics.",
        situations=[
            "wide-open lens on a low-light camera",
            "endoscope or borescope image",
            "microscope with misaligned illumination",
            "smartphone behind a too-small case opening",
            "dermatoscope photo of skin",
        ],
        params_model=VignettingParams,
        ladder={
            1: {"strength": 0.2}, 2: {"strength": 0.35}, 3: {"strength": 0.5}, 4: {"strength": 0.65}, 5: {"strength": 0.8},
        },
        ranges={"strength": (0.1, 0.9)},
        apply_batch=vignetting_batch,
        backend="numpy (radial gain)",
    ),
    CorruptionSpec(
        name="row_noise",
        family="sensor",
        description="Adds horizontal and vertical banding from uneven sensor read-out, like stripes across the image.",
        situations=[
            "CMOS sensor read-out noise in a night shot",
            "flatbed scanner with a dirty or uneven line sensor",
            "thermal infrared camera with fixed-pattern noise",
            "push-broom satellite imager striping",
            "electrical interference on a camera cable",
        ],
        params_model=RowNoiseParams,
        ladder={1: {"sigma": 0.02}, 2: {"sigma": 0.04}, 3: {"sigma": 0.06}, 4: {"sigma": 0.09}, 5: {"sigma": 0.12}},
        ranges={"sigma": (0.01, 0.15)},
        apply_batch=row_noise_batch,
        backend="numpy (per-row and per-column offsets)",
    ),
]

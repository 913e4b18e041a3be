"""Weather family: fog, frost, snow, rain and cloud cover, procedurally generated from the seed."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
from pydantic import Field

from domainbench.corruptions.draws import record
from domainbench.corruptions.errors import CorruptionError
from domainbench.corruptions.kernels import frost_photos
from domainbench.corruptions.kernels._common import apf, fractal_noise, luminance, size_scale, to_uint8
from domainbench.corruptions.kernels._imagenet_c import (
    IMAGENET_C_LADDER_VERSION,
    clipped_zoom,
    motion_trail,
    next_power_of_2,
    plasma_fractal,
)
from domainbench.corruptions.spec import CorruptionSpec, Params, side_scale


class FogParams(Params):
    density: float = Field(2.5, ge=0.0, le=5.0, description="fog thickness added on top of the image (ImageNet-C c0)")
    decay: float = Field(1.7, ge=1.1, le=4.0, description="roughness decay of the plasma fractal per octave (lower = patchier)")


def fog(img: np.ndarray, p: FogParams, rng: np.random.Generator) -> np.ndarray:
    """ImageNet-C fog: a diamond-square plasma fractal added, then rescaled by max / (max + density)."""
    h, w = img.shape[:2]
    plasma = plasma_fractal(next_power_of_2(max(h, w)), p.decay, rng)[:h, :w].astype(np.float32)
    x = img.astype(np.float32) / np.float32(255.0)
    peak = np.float32(x.max())
    x = x + np.float32(p.density) * plasma[..., None]
    return to_uint8(x * (peak / (peak + np.float32(p.density))) * np.float32(255.0))


class CloudParams(Params):
    coverage: float = Field(0.5, ge=0.0, le=1.0, description="fraction of the image covered by cloud")
    opacity: float = Field(0.9, ge=0.0, le=1.0, description="opacity of the thickest cloud")


def cloud_overlay(img: np.ndarray, p: CloudParams, rng: np.random.Generator) -> np.ndarray:
    h, w = img.shape[:2]
    field = fractal_noise(h, w, rng, base_cells=2, octaves=6, persistence=0.6)
    if p.coverage <= 0:
        return img.copy()
    threshold = np.float32(np.quantile(field, 1.0 - p.coverage)) if p.coverage < 1 else np.float32(-1.0)
    alpha = np.clip((field - threshold) / np.float32(0.15) + np.float32(0.35), 0, 1) * np.float32(p.opacity)
    cloud = np.float32(215.0) + np.float32(40.0) * field
    x = img.astype(np.float32)
    return to_uint8(x * (1 - alpha[..., None]) + cloud[..., None] * alpha[..., None])


class FrostParams(Params):
    image_weight: float = Field(0.7, ge=0.0, le=1.0, description="weight of the scene: out = image_weight * image + frost_weight * ice")
    frost_weight: float = Field(0.7, ge=0.0, le=1.0, description="weight of the ice layer")


#: the five frost photographs ImageNet-C draws from, summarised: mean RGB of a 224 crop, fine-detail
#: and coarse-variation standard deviations (grey levels); measured on the reference's images
_FROST_LOOKS = (
    ((78.7, 148.7, 164.7), 9.0, 11.7),
    ((198.4, 202.8, 212.1), 12.7, 12.8),
    ((198.4, 202.8, 212.1), 12.7, 12.8),
    ((144.6, 159.5, 172.3), 20.5, 13.9),
    ((101.2, 112.6, 124.4), 24.1, 21.5),
)


def frost_strokes(h: int, w: int, rng: np.random.Generator) -> np.ndarray:
    """The ice crystals' strokes of one image, (S, 2, 2) integer (x, y) end points, drawn in kernel order.

    The numpy and the device kernel both draw these, so their draws can never drift apart.
    """
    s = side_scale(h, w)
    n = int(round(400 * h * w / (224 * 224)))
    starts = rng.uniform(0, 1, (n, 2)) * np.array([w, h])
    angles = rng.uniform(0, np.pi, n)
    lengths = rng.uniform(3, 14, n) * s
    ends = starts + np.stack([np.cos(angles), np.sin(angles)], axis=1) * lengths[:, None]
    return np.stack([starts, ends], axis=1).round().astype(np.int32)


def _frost_texture(h: int, w: int, rng: np.random.Generator) -> np.ndarray:
    s = side_scale(h, w)
    base = fractal_noise(h, w, rng, base_cells=5, octaves=5, persistence=0.75)
    crystals = np.zeros((h, w), np.float32)
    cv2.polylines(crystals, list(frost_strokes(h, w, rng)), False, 1.0, thickness=1, lineType=cv2.LINE_AA)
    crystals = cv2.GaussianBlur(crystals, (0, 0), sigmaX=max(0.6 * s, 0.3))
    tex = np.maximum(np.float32(0.3) + np.float32(0.6) * base**np.float32(1.5), np.minimum(crystals, 1))
    return tex


_FINE_GAIN = 1.25


def _frost_layer(h: int, w: int, channels: int, rng: np.random.Generator) -> np.ndarray:
    """A procedural ice layer (grey levels, float32) with the colour and texture statistics of one of
    ImageNet-C's five frost photographs, drawn at random as the reference draws its photograph."""
    mean, fine_sd, coarse_sd = _FROST_LOOKS[int(record(rng, "look", int(rng.integers(0, len(_FROST_LOOKS)))))]
    tex = _frost_texture(h, w, rng)
    s = side_scale(h, w)
    coarse = cv2.GaussianBlur(tex, (0, 0), sigmaX=max(4.0 * s, 0.5))
    fine = tex - coarse
    # photographed ice has sharper crystals than this texture: its fine detail is weighted up by
    # _FINE_GAIN (lowering SSIM as the photographs do) and its coarse variation down to keep the energy
    fine_sd_eff = fine_sd * _FINE_GAIN
    coarse_sd_eff = float(np.sqrt(max(coarse_sd**2 + fine_sd**2 - fine_sd_eff**2, (0.5 * coarse_sd) ** 2)))
    fine *= np.float32(fine_sd_eff / max(float(fine.std()), 1e-6))
    coarse = (coarse - np.float32(coarse.mean())) * np.float32(coarse_sd_eff / max(float(coarse.std()), 1e-6))
    base = np.array(mean, np.float32)
    if channels == 1:
        base = np.array([base @ np.array([0.2989, 0.5870, 0.1140], np.float32)], np.float32)
    return base + (fine + coarse)[..., None]


def frost_source(rng: np.random.Generator) -> Path | None:
    """This image's texture source, recorded as ``texture``: the photographs' folder, or None for the procedural texture.

    A caller who fixes ``texture`` gets that source (replaying a stored unit), or an error where it is missing.
    """
    folder = frost_photos.photo_folder()
    available: frost_photos.TextureSource = "procedural" if folder is None else "imagenet-c"
    wanted = record(rng, "texture", available)
    if wanted not in ("imagenet-c", "procedural"):
        raise CorruptionError(f"frost texture {wanted!r} is neither 'imagenet-c' nor 'procedural'")
    if wanted == "imagenet-c" and folder is None:
        raise CorruptionError("frost texture 'imagenet-c' needs the reference's frost photographs: "
                              "pip install --no-deps imagecorruptions==1.1.2 (or set DOMAINBENCH_FROST_PHOTOS)")
    return folder if wanted == "imagenet-c" else None


def frost(img: np.ndarray, p: FrostParams, rng: np.random.Generator) -> np.ndarray:
    """ImageNet-C frost blend ``image_weight * image + frost_weight * ice``.

    The ice is a crop of one of the reference's frost photographs where they are installed
    (``frost_photos``; the reference's draws, resize and truncation), else a procedural layer.
    """
    h, w = img.shape[:2]
    folder = frost_source(rng)
    if folder is not None:
        ice = frost_photos.photo_crop(folder, h, w, rng)
        ice = frost_photos.grey(ice) if img.shape[-1] == 1 else ice
        return frost_photos.blend_truncated(img, ice, p.image_weight, p.frost_weight)
    layer = _frost_layer(h, w, img.shape[-1], rng)
    return to_uint8(np.float32(p.image_weight) * img.astype(np.float32) + np.float32(p.frost_weight) * layer)


class SnowParams(Params):
    mean: float = Field(0.55, ge=0.0, le=1.0, description="mean of the Gaussian snow field")
    spread: float = Field(0.3, ge=0.0, le=1.0, description="standard deviation of the snow field")
    zoom: float = Field(4.0, ge=1.0, le=10.0, description="enlargement of the snow field (flake size), at a 224-pixel short side")
    threshold: float = Field(0.9, ge=0.0, le=1.0, description="snow-field values below it hold no flake")
    radius: float = Field(12.0, ge=1.0, le=40.0, description="flake streak length 2 * radius + 1, pixels at 224")
    sigma: float = Field(8.0, ge=0.5, le=40.0, description="decay of the flake streak, pixels at 224")
    scene: float = Field(0.7, ge=0.0, le=1.0, description="weight of the scene against its whitened copy (lower = whiter)")


def snow(img: np.ndarray, p: SnowParams, rng: np.random.Generator) -> np.ndarray:
    """ImageNet-C snow: a zoomed, thresholded Gaussian field streaked by a one-sided motion trail,
    added twice (as is and rotated by 180 degrees) to a whitened scene."""
    full = snow_layer(img.shape[0], img.shape[1], p, rng)
    return snow_blend(img, full + full[::-1, ::-1], p)


def snow_layer(h: int, w: int, p: SnowParams, rng: np.random.Generator) -> np.ndarray:
    """The streaked flake field (h, w) float32 in [0, 1] of ImageNet-C snow (one copy, before its 180-degree twin)."""
    s = side_scale(h, w)
    field = rng.normal(p.mean, p.spread, (h, w)).astype(np.float32)
    layer = clipped_zoom(field[..., None], max(1.0, p.zoom * s))[..., 0]  # flakes no smaller than a pixel
    layer[layer < p.threshold] = 0
    layer = np.clip(layer, 0, 1)
    angle = record(rng, "angle", float(rng.uniform(-135.0, -45.0)))  # direction the flakes fall
    layer = motion_trail(layer, round(p.radius * s), max(p.sigma * s, 0.1), angle)
    layer = np.round(layer * 255) / np.float32(255.0)
    full = np.zeros((h, w), np.float32)
    full[: layer.shape[0], : layer.shape[1]] = layer[:h, :w]
    return full


def snow_blend(img: np.ndarray, flakes: np.ndarray, p: SnowParams) -> np.ndarray:
    """ImageNet-C snow's whitened scene plus the flakes (h, w) float32."""
    x = img.astype(np.float32) / np.float32(255.0)
    grey = luminance(img) / np.float32(255.0) if img.shape[-1] == 3 else x[..., 0]
    x = np.float32(p.scene) * x + np.float32(1 - p.scene) * np.maximum(x, (grey * np.float32(1.5) + np.float32(0.5))[..., None])
    x = x + flakes[..., None]
    return to_uint8(np.clip(x, 0, 1) * np.float32(255.0))


class RainParams(Params):
    drops: float = Field(650.0, ge=0.0, le=5000.0, description="number of rain streaks per 224x224 area")
    drop_length: float = Field(18.0, ge=1.0, le=80.0, description="streak length in pixels at 224")
    darkening: float = Field(0.8, ge=0.2, le=1.0, description="brightness multiplier of the overcast scene")


def rain_drops(h: int, w: int, p: RainParams, rng: np.random.Generator) -> tuple[int, int, np.ndarray]:
    """One image's streak slant and length (pixels) and drop positions ((D, 2) x, y), drawn and recorded in kernel order.

    The numpy and the device kernel both draw these, so their draws can never drift apart.
    """
    s = side_scale(h, w)
    length = max(1, int(round(p.drop_length * s)))
    # streak slant in pixels at 224, before scaling to this image
    slant = int(round(record(rng, "slant", rng.uniform(-10, 10)) * s))
    n = int(round(p.drops * h * w / (224 * 224)))
    xs = rng.integers(max(0, -slant), max(1, min(w, w - slant)), n)
    ys = rng.integers(0, max(1, h - length), n)
    return slant, length, np.stack([xs, ys], axis=1)


def rain(img: np.ndarray, p: RainParams, rng: np.random.Generator) -> np.ndarray:
    h, w = img.shape[:2]
    s = size_scale(img)
    slant, length, drops = rain_drops(h, w, p, rng)
    blur = max(1, int(round(3 * s)))
    return apf.add_rain(img, slant, length, 1, (200, 200, 200), blur, p.darkening, drops)


CORRUPTIONS: list[CorruptionSpec] = [
    CorruptionSpec(
        name="fog",
        family="weather",
        description="Overlays patchy white fog that lowers contrast, stronger in some regions than others.",
        situations=[
            "early-morning road fog in front of a dashcam",
            "coastal sea mist around a harbour camera",
            "smoke-filled room during a fire",
            "steam in an industrial kitchen or plant",
            "mountain hiking in low cloud",
        ],
        params_model=FogParams,
        ladder={
            1: {"density": 1.5, "decay": 2.0}, 2: {"density": 2.0, "decay": 2.0}, 3: {"density": 2.5, "decay": 1.7},
            4: {"density": 2.5, "decay": 1.5}, 5: {"density": 3.0, "decay": 1.4},
        },
        ranges={"density": (1.2, 3.2)},
        apply=fog,
        backend="ImageNet-C fog (diamond-square plasma fractal, vectorised)",
        ladder_version=IMAGENET_C_LADDER_VERSION,
    ),
    CorruptionSpec(
        name="cloud_overlay",
        family="weather",
        description="Covers parts of the image with thick white clouds, as in aerial and satellite imagery.",
        situations=[
            "satellite image with partial cloud cover",
            "aerial survey flight under broken clouds",
            "drone flying through low cloud",
            "mountain webcam with passing clouds",
            "steam plume drifting over an industrial camera",
        ],
        params_model=CloudParams,
        ladder={
            1: {"coverage": 0.15}, 2: {"coverage": 0.3}, 3: {"coverage": 0.45}, 4: {"coverage": 0.6}, 5: {"coverage": 0.75},
        },
        ranges={"coverage": (0.05, 0.85)},
        apply=cloud_overlay,
        backend="own fractal-noise cloud mask",
    ),
    CorruptionSpec(
        name="frost",
        family="weather",
        description="Blends in an icy crystalline texture, like viewing the scene through a frosted-over window or lens.",
        situations=[
            "outdoor camera housing frosted over on a winter morning",
            "car windscreen iced up",
            "freezer or cold-storage inspection camera",
            "ski goggles camera in sub-zero air",
            "window of an unheated building",
        ],
        params_model=FrostParams,
        ladder={
            1: {"image_weight": 1.0, "frost_weight": 0.4}, 2: {"image_weight": 0.8, "frost_weight": 0.6},
            3: {"image_weight": 0.7, "frost_weight": 0.7}, 4: {"image_weight": 0.65, "frost_weight": 0.7},
            5: {"image_weight": 0.6, "frost_weight": 0.75},
        },
        ranges={"frost_weight": (0.4, 0.75)},
        apply=frost,
        backend="ImageNet-C frost: crops of its frost photographs where imagecorruptions is installed "
                "(domainbench[imagenet-c]), else a procedural ice texture matched to them",
        draws={"look": (0.0, 4.0), "texture": None, "crop": None},
        ladder_version=IMAGENET_C_LADDER_VERSION,
    ),
    CorruptionSpec(
        name="snow",
        family="weather",
        description="Adds falling snowflakes streaked by motion and whitens the scene, as in a snowstorm.",
        situations=[
            "snowstorm seen by a traffic camera",
            "ski resort webcam during snowfall",
            "autonomous car in a blizzard",
            "snow flurries in front of a doorbell camera",
            "arctic research station camera",
        ],
        params_model=SnowParams,
        ladder={
            1: {"mean": 0.1, "spread": 0.3, "zoom": 3.0, "threshold": 0.5, "radius": 10.0, "sigma": 4.0, "scene": 0.8},
            2: {"mean": 0.2, "spread": 0.3, "zoom": 2.0, "threshold": 0.5, "radius": 12.0, "sigma": 4.0, "scene": 0.7},
            3: {"mean": 0.55, "spread": 0.3, "zoom": 4.0, "threshold": 0.9, "radius": 12.0, "sigma": 8.0, "scene": 0.7},
            4: {"mean": 0.55, "spread": 0.3, "zoom": 4.5, "threshold": 0.85, "radius": 12.0, "sigma": 8.0, "scene": 0.65},
            5: {"mean": 0.55, "spread": 0.3, "zoom": 2.5, "threshold": 0.85, "radius": 12.0, "sigma": 12.0, "scene": 0.55},
        },
        ranges={"threshold": (0.95, 0.8), "scene": (0.8, 0.55)},
        apply=snow,
        backend="ImageNet-C snow (cv2 zoom and one-kernel motion trail)",
        draws={"angle": (-135.0, -45.0)},
        ladder_version=IMAGENET_C_LADDER_VERSION,
    ),
    CorruptionSpec(
        name="rain",
        family="weather",
        description="Draws slanted rain streaks over a darkened overcast scene.",
        situations=[
            "heavy rain in front of a street surveillance camera",
            "dashcam driving through a downpour",
            "outdoor sports broadcast in the rain",
            "drone flight in drizzle",
            "harbour camera during a storm",
        ],
        params_model=RainParams,
        ladder={
            1: {"drops": 200.0, "drop_length": 10.0, "darkening": 0.9},
            2: {"drops": 400.0, "drop_length": 14.0, "darkening": 0.85},
            3: {"drops": 650.0, "drop_length": 18.0, "darkening": 0.8},
            4: {"drops": 900.0, "drop_length": 22.0, "darkening": 0.75},
            5: {"drops": 1300.0, "drop_length": 26.0, "darkening": 0.7},
        },
        ranges={"drops": (100.0, 1500.0), "drop_length": (8.0, 28.0), "darkening": (0.95, 0.65)},
        apply=rain,
        grayscale=False,
        backend="albumentations pixel.functional.add_rain",
        draws={"slant": (-10.0, 10.0)},
    ),
]

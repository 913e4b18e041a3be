"""Weather family: fog, frost, snow, rain and cloud cover, procedurally generated from the seed."""

from __future__ import annotations

import cv2
import numpy as np
from albumentations.augmentations.pixel import functional as apf
from pydantic import Field

from corruptions.draws import record
from corruptions.kernels._common import fractal_noise, luminance, size_scale, to_uint8
from corruptions.kernels.blur import motion_kernel
from corruptions.spec import CorruptionSpec, Params


class FogParams(Params):
    density: float = Field(1.5, ge=0.0, le=5.0, description="fog thickness added on top of the image (ImageNet-C c0)")
    roughness: float = Field(0.55, ge=0.2, le=0.9, description="persistence of the fractal fog (higher = patchier)")


def fog(img: np.ndarray, p: FogParams, rng: np.random.Generator) -> np.ndarray:
    h, w = img.shape[:2]
    plasma = fractal_noise(h, w, rng, base_cells=2, octaves=6, persistence=p.roughness)
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
    intensity: float = Field(0.62, ge=0.0, le=1.0, description="weight t of the ice layer: out = (1 - t/2) * image + t * ice")


def _frost_texture(h: int, w: int, rng: np.random.Generator) -> np.ndarray:
    s = min(h, w) / 224
    base = fractal_noise(h, w, rng, base_cells=5, octaves=5, persistence=0.75)
    crystals = np.zeros((h, w), np.float32)
    n = int(round(400 * h * w / (224 * 224)))
    starts = rng.uniform(0, 1, (n, 2)) * np.array([w, h])
    angles = rng.uniform(0, np.pi, n)
    lengths = rng.uniform(3, 14, n) * s
    ends = starts + np.stack([np.cos(angles), np.sin(angles)], axis=1) * lengths[:, None]
    lines = np.stack([starts, ends], axis=1).round().astype(np.int32)
    cv2.polylines(crystals, list(lines), False, 1.0, thickness=1, lineType=cv2.LINE_AA)
    crystals = cv2.GaussianBlur(crystals, (0, 0), sigmaX=max(0.6 * s, 0.3))
    tex = np.maximum(np.float32(0.3) + np.float32(0.6) * base**np.float32(1.5), np.minimum(crystals, 1))
    return tex


def frost(img: np.ndarray, p: FrostParams, rng: np.random.Generator) -> np.ndarray:
    h, w = img.shape[:2]
    tex = _frost_texture(h, w, rng)
    tint = np.array([0.86, 0.93, 1.0], np.float32) if img.shape[-1] == 3 else np.array([0.93], np.float32)
    layer = tex[..., None] * tint * np.float32(255.0)
    return to_uint8(np.float32(1 - p.intensity / 2) * img.astype(np.float32) + np.float32(p.intensity) * layer)


class SnowParams(Params):
    density: float = Field(0.04, ge=0.0, le=0.5, description="fraction of flake-grid cells holding a flake")
    flake_length: float = Field(10.0, ge=1.0, le=40.0, description="motion streak of falling flakes, px at 224")
    whiten: float = Field(0.2, ge=0.0, le=1.0, description="how much the scene is lightened by snow cover")


def snow(img: np.ndarray, p: SnowParams, rng: np.random.Generator) -> np.ndarray:
    h, w = img.shape[:2]
    s = size_scale(img)
    cell = max(1, int(round(2 * s)))
    grid = rng.random((-(-h // cell), -(-w // cell)), dtype=np.float32)
    flakes = (grid < np.float32(p.density)).astype(np.float32) * (np.float32(0.6) + np.float32(0.4) * grid / np.float32(max(p.density, 1e-6)))
    flakes = cv2.resize(flakes, (grid.shape[1] * cell, grid.shape[0] * cell), interpolation=cv2.INTER_NEAREST)[:h, :w]
    angle = record(rng, "angle", float(rng.uniform(45.0, 135.0)))  # direction the flakes fall
    flakes = cv2.filter2D(flakes, -1, motion_kernel(max(1.0, p.flake_length * s), angle), borderType=cv2.BORDER_REFLECT_101)
    flakes = np.clip(flakes * np.float32(1.8), 0, 1)
    x = img.astype(np.float32)
    bright = np.maximum(x, (luminance(img) * np.float32(1.5) + np.float32(0.5 * 255.0))[..., None])
    x = (np.float32(1 - p.whiten)) * x + np.float32(p.whiten) * bright
    return to_uint8(x + flakes[..., None] * np.float32(255.0))


class RainParams(Params):
    drops: float = Field(650.0, ge=0.0, le=5000.0, description="number of rain streaks per 224x224 area")
    drop_length: float = Field(18.0, ge=1.0, le=80.0, description="streak length in pixels at 224")
    darkening: float = Field(0.8, ge=0.2, le=1.0, description="brightness multiplier of the overcast scene")


def rain(img: np.ndarray, p: RainParams, rng: np.random.Generator) -> np.ndarray:
    h, w = img.shape[:2]
    s = size_scale(img)
    length = max(1, int(round(p.drop_length * s)))
    # streak slant in pixels at 224, before scaling to this image
    slant = int(round(record(rng, "slant", rng.uniform(-10, 10)) * s))
    n = int(round(p.drops * h * w / (224 * 224)))
    xs = rng.integers(max(0, -slant), max(1, min(w, w - slant)), n)
    ys = rng.integers(0, max(1, h - length), n)
    drops = np.stack([xs, ys], axis=1)
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
            1: {"density": 0.6}, 2: {"density": 0.9}, 3: {"density": 1.2}, 4: {"density": 1.6}, 5: {"density": 2.2},
        },
        ranges={"density": (0.3, 2.6)},
        apply=fog,
        backend="own fractal-noise fog (ImageNet-C fog formula)",
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
            1: {"intensity": 0.35}, 2: {"intensity": 0.5}, 3: {"intensity": 0.62}, 4: {"intensity": 0.72}, 5: {"intensity": 0.82},
        },
        ranges={"intensity": (0.25, 0.9)},
        apply=frost,
        backend="own procedural ice texture (ImageNet-C frost blend)",
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
            1: {"density": 0.015, "flake_length": 6.0, "whiten": 0.1}, 2: {"density": 0.025, "flake_length": 8.0, "whiten": 0.15},
            3: {"density": 0.04, "flake_length": 10.0, "whiten": 0.2}, 4: {"density": 0.06, "flake_length": 12.0, "whiten": 0.25},
            5: {"density": 0.08, "flake_length": 14.0, "whiten": 0.3},
        },
        ranges={"density": (0.01, 0.1), "flake_length": (5.0, 16.0), "whiten": (0.05, 0.35)},
        apply=snow,
        backend="own flake layer + line motion kernel (ImageNet-C snow)",
        draws={"angle": (45.0, 135.0)},
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

"""Geometric family: rotations, flips, perspective and smooth non-rigid warps.

Warps keep the output size; pixels mapped from outside the image are black for rigid
transforms (a tilted camera shows its frame) and reflected for local warps.
"""

from __future__ import annotations

import cv2
import numpy as np
from pydantic import Field

from domainbench.corruptions.draws import record
from domainbench.corruptions.kernels._common import agf, size_scale
from domainbench.corruptions.kernels._imagenet_c import IMAGENET_C_LADDER_VERSION
from domainbench.corruptions.spec import CorruptionSpec, Params


class RotationParams(Params):
    angle: float = Field(15.0, ge=-180.0, le=180.0, description="rotation in degrees, counter-clockwise")


def rotation(img: np.ndarray, p: RotationParams, rng: np.random.Generator) -> np.ndarray:
    h, w = img.shape[:2]
    quarter = p.angle / 90.0
    if quarter == round(quarter) and (h == w or int(round(quarter)) % 2 == 0):
        return np.ascontiguousarray(np.rot90(img, k=int(round(quarter)) % 4, axes=(0, 1)))
    matrix = cv2.getRotationMatrix2D(((w - 1) / 2.0, (h - 1) / 2.0), p.angle, 1.0)
    out = cv2.warpAffine(img, matrix, (w, h), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT, borderValue=0)
    return out.reshape(img.shape)


class NoParams(Params):
    pass


def hflip_batch(images: np.ndarray, p: NoParams, rngs: list[np.random.Generator]) -> np.ndarray:
    # cv2.flip per image: numpy's negative-stride copy along W is ~10x slower
    out = np.empty_like(images)
    for i, img in enumerate(images):
        out[i] = cv2.flip(img, 1).reshape(img.shape)
    return out


def vflip_batch(images: np.ndarray, p: NoParams, rngs: list[np.random.Generator]) -> np.ndarray:
    return np.ascontiguousarray(images[:, ::-1])


class PerspectiveParams(Params):
    scale: float = Field(0.09, ge=0.0, le=0.3, description="std of the corner jitter as a fraction of the image side")


def perspective(img: np.ndarray, p: PerspectiveParams, rng: np.random.Generator) -> np.ndarray:
    h, w = img.shape[:2]
    points = record(rng, "corners", agf.order_points(agf.generate_perspective_points((h, w), p.scale, rng)))
    matrix, max_w, max_h = agf.compute_perspective_params(points, (h, w))
    out = agf.perspective(img, matrix, max_w, max_h, 0, cv2.BORDER_CONSTANT, True, cv2.INTER_LINEAR)
    return out.reshape(img.shape)


class GridDistortionParams(Params):
    distort_limit: float = Field(0.3, ge=0.0, le=0.9, description="largest relative stretch of a grid cell")
    num_steps: int = Field(5, ge=2, le=20, description="grid cells per side")


def grid_distortion(img: np.ndarray, p: GridDistortionParams, rng: np.random.Generator) -> np.ndarray:
    h, w = img.shape[:2]
    steps_x = list(record(rng, "steps_x", 1.0 + rng.uniform(-p.distort_limit, p.distort_limit, p.num_steps + 1)))
    steps_y = list(record(rng, "steps_y", 1.0 + rng.uniform(-p.distort_limit, p.distort_limit, p.num_steps + 1)))
    norm = agf.normalize_grid_distortion_steps((h, w), p.num_steps, steps_x, steps_y)
    map_x, map_y = agf.generate_grid((h, w), norm["steps_x"], norm["steps_y"], p.num_steps)
    out = agf.remap(img, map_x, map_y, cv2.INTER_LINEAR, cv2.BORDER_REFLECT_101)
    return out.reshape(img.shape)


def _imagenet_c_elastic_rms(alpha: float, side: int = 224) -> float:
    """RMS displacement (px) of ImageNet-C's field: uniform(+-0.005 side) noise, Gaussian sigma 0.01 side
    (truncated at 3 sigma, reflected), times alpha; computed from the discrete kernel, not sampled."""
    sigma = 0.01 * side
    r = int(3 * sigma + 0.5)
    k = np.exp(-0.5 * (np.arange(-r, r + 1) / sigma) ** 2)
    k /= k.sum()
    noise_sd = 0.005 * side / np.sqrt(3.0)
    return float(alpha * noise_sd * np.sum(k**2))  # 2-D separable: sqrt(sum k^2)^2


ELASTIC_RMS = tuple(round(_imagenet_c_elastic_rms(250 * a), 3) for a in (0.05, 0.065, 0.085, 0.1, 0.12))


class ElasticParams(Params):
    alpha: float = Field(3.5, ge=0.0, le=30.0, description="RMS displacement in pixels at a 224-pixel short side")
    sigma: float = Field(10.0, ge=1.0, le=50.0, description="smoothness of the displacement field in pixels at 224")


def elastic(img: np.ndarray, p: ElasticParams, rng: np.random.Generator) -> np.ndarray:
    h, w = img.shape[:2]
    s = size_scale(img)
    fields = []
    for _ in range(2):
        noise = rng.uniform(-1.0, 1.0, (h, w)).astype(np.float32)
        smooth = cv2.GaussianBlur(noise, (0, 0), sigmaX=max(p.sigma * s, 0.5), borderType=cv2.BORDER_REFLECT_101)
        rms = float(np.sqrt(np.mean(smooth.astype(np.float64) ** 2)))
        fields.append(smooth * np.float32(p.alpha * s / max(rms, 1e-8)))
    xs, ys = np.meshgrid(np.arange(w, dtype=np.float32), np.arange(h, dtype=np.float32))
    out = agf.remap(img, xs + fields[0], ys + fields[1], cv2.INTER_LINEAR, cv2.BORDER_REFLECT_101)
    return out.reshape(img.shape)


class LensDistortionParams(Params):
    k: float = Field(0.18, ge=-0.8, le=0.8, description="radial distortion coefficient (positive = barrel)")


def lens_distortion(img: np.ndarray, p: LensDistortionParams, rng: np.random.Generator) -> np.ndarray:
    h, w = img.shape[:2]
    map_x, map_y = agf.get_camera_matrix_distortion_maps((h, w), p.k)
    out = agf.remap(img, map_x, map_y, cv2.INTER_LINEAR, cv2.BORDER_CONSTANT, 0)
    return out.reshape(img.shape)


_FLIP_LADDER = {s: {} for s in range(1, 6)}

CORRUPTIONS: list[CorruptionSpec] = [
    CorruptionSpec(
        name="rotation",
        family="geometric",
        description="Rotates the image about its centre, leaving black corners, as from a tilted or rolled camera.",
        situations=[
            "handheld phone photo taken at an angle",
            "drone banking during a turn",
            "scanned page placed crookedly on the scanner",
            "body-worn camera on a moving officer",
            "ship-mounted camera rolling in waves",
        ],
        params_model=RotationParams,
        ladder={1: {"angle": 5.0}, 2: {"angle": 10.0}, 3: {"angle": 15.0}, 4: {"angle": 22.0}, 5: {"angle": 30.0}},
        ranges={"angle": (2.0, 45.0)},
        apply=rotation,
        backend="np.rot90 for quarter turns, else cv2.warpAffine",
    ),
    CorruptionSpec(
        name="horizontal_flip",
        family="geometric",
        description="Mirrors the image left to right, as from a selfie camera or a mirrored video feed.",
        situations=[
            "front-facing selfie camera mirroring the scene",
            "video call feed shown mirrored",
            "photo of a scene reflected in a mirror or shop window",
            "dental intra-oral mirror photograph",
            "X-ray film loaded the wrong way round",
        ],
        params_model=NoParams,
        ladder=_FLIP_LADDER,
        ordinal=False,
        apply_batch=hflip_batch,
        backend="cv2.flip (albumentations hflip)",
    ),
    CorruptionSpec(
        name="vertical_flip",
        family="geometric",
        description="Turns the image upside down by mirroring it top to bottom, as from a camera mounted upside down.",
        situations=[
            "ceiling-mounted camera installed upside down",
            "reflection of a scene in still water",
            "microscope or telescope optics inverting the image",
            "aerial image with unknown orientation",
            "document scanned upside down",
        ],
        params_model=NoParams,
        ladder=_FLIP_LADDER,
        ordinal=False,
        apply_batch=vflip_batch,
        backend="numpy slicing (albumentations vflip)",
    ),
    CorruptionSpec(
        name="perspective",
        family="geometric",
        description="Warps the image as if seen from an oblique viewpoint, moving its four corners at random.",
        situations=[
            "photo of a document or screen taken at an angle",
            "traffic camera looking down at a slant",
            "robot camera viewing objects from a low angle",
            "photo of a whiteboard from the side of a room",
            "shelf-scanning camera in a supermarket aisle",
        ],
        params_model=PerspectiveParams,
        ladder={1: {"scale": 0.03}, 2: {"scale": 0.06}, 3: {"scale": 0.09}, 4: {"scale": 0.12}, 5: {"scale": 0.16}},
        ranges={"scale": (0.02, 0.2)},
        apply=perspective,
        backend="albumentations geometric.functional.perspective",
        draws={"corners": None},
    ),
    CorruptionSpec(
        name="grid_distortion",
        family="geometric",
        description="Stretches and squeezes the image along a coarse grid, like a wavy lens, flexible sheet or rolling shutter.",
        situations=[
            "image through a cheap wide-angle plastic lens",
            "photo of a curved or crumpled page",
            "rolling-shutter wobble from a vibrating mount",
            "heat shimmer distorting a distant scene",
            "flexible endoscope image",
        ],
        params_model=GridDistortionParams,
        ladder={
            1: {"distort_limit": 0.1}, 2: {"distort_limit": 0.2}, 3: {"distort_limit": 0.3}, 4: {"distort_limit": 0.4},
            5: {"distort_limit": 0.55},
        },
        ranges={"distort_limit": (0.05, 0.6)},
        apply=grid_distortion,
        backend="albumentations geometric.functional.generate_grid + remap",
        draws={"steps_x": None, "steps_y": None},
    ),
    CorruptionSpec(
        name="elastic",
        family="geometric",
        description="Bends the image with a smooth random displacement field, like tissue deformation or a rippling surface.",
        situations=[
            "soft tissue deforming under an ultrasound probe",
            "photo through a wobbling water surface",
            "handwriting on flexible or wrinkled material",
            "atmospheric turbulence in long-range surveillance",
            "cell microscopy with moving samples",
        ],
        params_model=ElasticParams,
        # ImageNet-C elastic_transform at 224: field smoothed with sigma 0.01 * side = 2.24 px, alpha
        # 250 * (0.05 .. 0.12) on uniform(+-0.005 * side) noise, i.e. these RMS displacements
        ladder={
            1: {"alpha": ELASTIC_RMS[0], "sigma": 2.24}, 2: {"alpha": ELASTIC_RMS[1], "sigma": 2.24},
            3: {"alpha": ELASTIC_RMS[2], "sigma": 2.24}, 4: {"alpha": ELASTIC_RMS[3], "sigma": 2.24},
            5: {"alpha": ELASTIC_RMS[4], "sigma": 2.24},
        },
        ranges={"alpha": (0.8, 2.8)},
        apply=elastic,
        backend="own smoothed displacement field + albumentations remap (ImageNet-C elastic_transform ladder)",
        ladder_version=IMAGENET_C_LADDER_VERSION,
    ),
    CorruptionSpec(
        name="lens_distortion",
        family="geometric",
        description="Bends straight lines outwards towards the edges, the barrel distortion of wide-angle and fisheye lenses.",
        situations=[
            "wide-angle action camera on a helmet",
            "fisheye security camera in a hallway",
            "car reversing camera",
            "peephole door viewer camera",
            "smartphone ultra-wide lens",
        ],
        params_model=LensDistortionParams,
        ladder={1: {"k": 0.05}, 2: {"k": 0.1}, 3: {"k": 0.18}, 4: {"k": 0.28}, 5: {"k": 0.4}},
        ranges={"k": (0.03, 0.45)},
        apply=lens_distortion,
        backend="albumentations get_camera_matrix_distortion_maps + remap",
    ),
]

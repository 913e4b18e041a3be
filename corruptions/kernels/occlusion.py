"""Occlusion family: things between the camera and the scene (shadows, objects, dirt on the lens)."""

from __future__ import annotations

import cv2
import numpy as np
from albumentations.augmentations.pixel import functional as apf
from pydantic import Field

from corruptions.draws import record
from corruptions.kernels._common import fractal_noise, to_uint8
from corruptions.spec import CorruptionSpec, Params


class ShadowParams(Params):
    num_shadows: int = Field(2, ge=1, le=6, description="number of shadow polygons")
    darkness: float = Field(0.5, ge=0.0, le=1.0, description="fraction of light removed inside a shadow")
    size: float = Field(0.35, ge=0.05, le=0.8, description="shadow radius as a fraction of the short side")


def shadow(img: np.ndarray, p: ShadowParams, rng: np.random.Generator) -> np.ndarray:
    h, w = img.shape[:2]
    polys = []
    for i in range(p.num_shadows):
        centre = rng.uniform(0, 1, 2) * np.array([w, h])
        k = int(rng.integers(5, 9))
        angles = np.sort(rng.uniform(0, 2 * np.pi, k))
        radii = rng.uniform(0.6, 1.4, k) * p.size * min(h, w)
        pts = centre + np.stack([np.cos(angles), np.sin(angles)], axis=1) * radii[:, None]
        # the polygon (x, y vertices) says all that was drawn for this shadow
        polys.append(record(rng, "polygons", pts.round().astype(np.int32), index=i))
    return apf.add_shadow(img, polys, np.full(p.num_shadows, p.darkness)).reshape(img.shape)


class OccluderParams(Params):
    area: float = Field(0.15, ge=0.0, le=0.8, description="fraction of the image covered by the occluding rectangles")
    num_holes: int = Field(3, ge=1, le=20, description="number of occluding rectangles")


def occluder(img: np.ndarray, p: OccluderParams, rng: np.random.Generator) -> np.ndarray:
    h, w = img.shape[:2]
    out = img.copy()
    each = p.area * h * w / p.num_holes
    for i in range(p.num_holes):
        aspect = float(np.exp(rng.uniform(np.log(0.5), np.log(2.0))))
        rh = int(min(h, max(1, round(np.sqrt(each * aspect)))))
        rw = int(min(w, max(1, round(np.sqrt(each / aspect)))))
        y = int(rng.integers(0, h - rh + 1))
        x = int(rng.integers(0, w - rw + 1))
        y, x, rh, rw = (int(v) for v in record(rng, "boxes", np.array([y, x, rh, rw]), index=i))  # top, left, height, width
        shade = record(rng, "shades", rng.integers(0, 80, img.shape[-1]), index=i)  # dark, not always pure black
        out[y : y + rh, x : x + rw] = shade.astype(np.uint8)
    return out


class LensSpatterParams(Params):
    coverage: float = Field(0.15, ge=0.0, le=0.8, description="fraction of the lens covered by dirt")
    opacity: float = Field(0.85, ge=0.0, le=1.0, description="opacity of the dirt")


def lens_spatter(img: np.ndarray, p: LensSpatterParams, rng: np.random.Generator) -> np.ndarray:
    h, w = img.shape[:2]
    if p.coverage <= 0:
        return img.copy()
    field = fractal_noise(h, w, rng, base_cells=6, octaves=4, persistence=0.5)
    threshold = np.float32(np.quantile(field, 1.0 - p.coverage))
    alpha = np.clip((field - threshold) / np.float32(0.04), 0, 1)
    alpha = cv2.GaussianBlur(alpha, (0, 0), sigmaX=max(1.0, min(h, w) / 224)) * np.float32(p.opacity)
    mud = np.array([88, 70, 50], np.float32) if img.shape[-1] == 3 else np.array([72], np.float32)
    mud = mud * (np.float32(0.8) + np.float32(0.4) * field[..., None])
    a = alpha[..., None]
    return to_uint8(img.astype(np.float32) * (1 - a) + mud * a)


CORRUPTIONS: list[CorruptionSpec] = [
    CorruptionSpec(
        name="shadow",
        family="occlusion",
        description="Casts irregular dark shadows over parts of the scene, as from trees, buildings or people blocking the light.",
        situations=[
            "tree shadows across a road seen by a dashcam",
            "shadow of the photographer over a document",
            "building shadows in satellite imagery",
            "surgeon's hands shadowing the operating field",
            "shelf shadows in a supermarket product photo",
        ],
        params_model=ShadowParams,
        ladder={
            1: {"num_shadows": 1, "darkness": 0.35}, 2: {"num_shadows": 1, "darkness": 0.5},
            3: {"num_shadows": 2, "darkness": 0.5}, 4: {"num_shadows": 2, "darkness": 0.65},
            5: {"num_shadows": 3, "darkness": 0.75},
        },
        ranges={"darkness": (0.25, 0.8)},
        apply=shadow,
        backend="albumentations pixel.functional.add_shadow",
        draws={"polygons": None},
    ),
    CorruptionSpec(
        name="occluder",
        family="occlusion",
        description="Hides rectangular parts of the scene behind dark objects, as when something blocks the camera's view.",
        situations=[
            "pedestrians and cars blocking a surveillance view",
            "shelf labels and price tags covering products",
            "surgical instruments covering anatomy in an endoscope",
            "sticker or tape on part of a camera lens",
            "redaction boxes on a scanned document",
        ],
        params_model=OccluderParams,
        ladder={1: {"area": 0.05}, 2: {"area": 0.1}, 3: {"area": 0.15}, 4: {"area": 0.22}, 5: {"area": 0.3}},
        ranges={"area": (0.02, 0.35)},
        apply=occluder,
        backend="numpy (CoarseDropout-like rectangles)",
        draws={"boxes": None, "shades": (0.0, 79.0)},
    ),
    CorruptionSpec(
        name="lens_spatter",
        family="occlusion",
        description="Spatters blotches of mud or dirt on the lens that partly hide the scene.",
        situations=[
            "mud-splashed car camera after an off-road drive",
            "agricultural robot camera covered in dust",
            "construction site camera with dirty housing",
            "underwater camera with sediment on the port",
            "bicycle helmet camera splashed by puddles",
        ],
        params_model=LensSpatterParams,
        ladder={
            1: {"coverage": 0.05}, 2: {"coverage": 0.1}, 3: {"coverage": 0.15}, 4: {"coverage": 0.22}, 5: {"coverage": 0.3},
        },
        ranges={"coverage": (0.02, 0.35)},
        apply=lens_spatter,
        backend="own fractal-noise mud mask",
    ),
]

"""Occlusion family: things between the camera and the scene (shadows, objects, dirt on the lens)."""

from __future__ import annotations

import cv2
import numpy as np
from pydantic import Field

from domainbench.corruptions.draws import record
from domainbench.corruptions.kernels._common import apf, size_scale, to_uint8
from domainbench.corruptions.kernels._imagenet_c import IMAGENET_C_LADDER_VERSION, gaussian_nearest
from domainbench.corruptions.spec import CorruptionSpec, Params


class ShadowParams(Params):
    num_shadows: int = Field(2, ge=1, le=6, description="number of shadow polygons")
    darkness: float = Field(0.5, ge=0.0, le=1.0, description="fraction of light removed inside a shadow")
    size: float = Field(0.35, ge=0.05, le=0.8, description="shadow radius as a fraction of the short side")


def shadow_polygons(h: int, w: int, p: ShadowParams, rng: np.random.Generator) -> list[np.ndarray]:
    """One image's shadow polygons ((k, 2) integer x, y vertices), drawn and recorded in kernel order.

    The numpy and the device kernel both draw these, so their draws can never drift apart.
    """
    polys = []
    for i in range(p.num_shadows):
        centre = rng.uniform(0, 1, 2) * np.array([w, h])
        k = int(rng.integers(5, 9))
        angles = np.sort(rng.uniform(0, 2 * np.pi, k))
        radii = rng.uniform(0.6, 1.4, k) * p.size * min(h, w)
        pts = centre + np.stack([np.cos(angles), np.sin(angles)], axis=1) * radii[:, None]
        # the polygon (x, y vertices) says all that was drawn for this shadow
        polys.append(record(rng, "polygons", pts.round().astype(np.int32), index=i))
    return polys


def shadow(img: np.ndarray, p: ShadowParams, rng: np.random.Generator) -> np.ndarray:
    h, w = img.shape[:2]
    polys = shadow_polygons(h, w, p, rng)
    return apf.add_shadow(img, polys, np.full(p.num_shadows, p.darkness)).reshape(img.shape)


class OccluderParams(Params):
    area: float = Field(0.15, ge=0.0, le=0.8, description="fraction of the image covered by the occluding rectangles")
    num_holes: int = Field(3, ge=1, le=20, description="number of occluding rectangles")


def occluder_boxes(h: int, w: int, channels: int, p: OccluderParams,
                   rng: np.random.Generator) -> list[tuple[int, int, int, int, np.ndarray]]:
    """The boxes (top, left, height, width, shade) of one image, drawn and recorded in kernel order.

    The numpy and the device kernel both paint these, so their draws can never drift apart.
    """
    boxes = []
    each = p.area * h * w / p.num_holes
    for i in range(p.num_holes):
        aspect = float(np.exp(rng.uniform(np.log(0.5), np.log(2.0))))
        rh = int(min(h, max(1, round(np.sqrt(each * aspect)))))
        rw = int(min(w, max(1, round(np.sqrt(each / aspect)))))
        y = int(rng.integers(0, h - rh + 1))
        x = int(rng.integers(0, w - rw + 1))
        y, x, rh, rw = (int(v) for v in record(rng, "boxes", np.array([y, x, rh, rw]), index=i))
        shade = record(rng, "shades", rng.integers(0, 80, channels), index=i)  # dark, not always pure black
        boxes.append((y, x, rh, rw, shade.astype(np.uint8)))
    return boxes


def occluder(img: np.ndarray, p: OccluderParams, rng: np.random.Generator) -> np.ndarray:
    h, w = img.shape[:2]
    out = img.copy()
    for y, x, rh, rw, shade in occluder_boxes(h, w, img.shape[-1], p, rng):
        out[y : y + rh, x : x + rw] = shade
    return out


class LensSpatterParams(Params):
    mean: float = Field(0.65, ge=0.0, le=1.0, description="mean of the Gaussian liquid field")
    spread: float = Field(0.3, ge=0.0, le=1.0, description="standard deviation of the liquid field")
    smoothing: float = Field(2.0, ge=0.5, le=10.0, description="Gaussian sigma smoothing the field (drop size), pixels at 224")
    threshold: float = Field(0.68, ge=0.0, le=1.0, description="field values below it stay clean")
    intensity: float = Field(0.5, ge=0.0, le=3.0, description="water: strength of the drop highlights; mud: blur sigma of the mud mask (pixels at 224)")
    mud: bool = Field(False, description="mud (opaque brown blotches) instead of water drops")


_WATER = np.array([175, 238, 238], np.float32) / np.float32(255.0)  # pale turquoise, in the reference's channel order
_MUD = np.array([63, 42, 20], np.float32) / np.float32(255.0)  # mud brown (RGB)


def _smoothed_noise_sd(sigma: float) -> float:
    """Standard deviation left of unit white noise after ``gaussian_nearest(sigma)`` (2-D: the sum of the 1-D taps squared)."""
    r = max(1, int(4.0 * sigma + 0.5))
    taps = cv2.getGaussianKernel(2 * r + 1, sigma).ravel()
    return float(np.sum(taps**2))


def smoothed_noise_gain(sigma: float, scale: float) -> float:
    """Factor taking the spread of noise smoothed at ``sigma * scale`` to that of noise smoothed at ``sigma`` (224 px)."""
    return _smoothed_noise_sd(sigma) / _smoothed_noise_sd(sigma * scale)


def _water_strength(liquid: np.ndarray, p: LensSpatterParams) -> np.ndarray:
    """The reference's edge-lit drop strength (H, W) float32 in [0, intensity], from the thresholded field."""
    layer = (liquid * 255).astype(np.uint8)
    dist = 255 - cv2.Canny(layer, 50, 150)
    dist = cv2.distanceTransform(dist, cv2.DIST_L2, 5)
    _, dist = cv2.threshold(dist, 20, 20, cv2.THRESH_TRUNC)
    dist = cv2.blur(dist, (3, 3)).astype(np.uint8)
    dist = cv2.equalizeHist(dist)
    ker = np.array([[-2, -1, 0], [-1, 1, 1], [0, 1, 2]])
    dist = cv2.filter2D(dist, cv2.CV_8U, ker)
    dist = cv2.blur(dist, (3, 3)).astype(np.float32)
    m = layer.astype(np.float32) * dist
    m /= max(float(m.max()), 1e-12)
    m *= np.float32(p.intensity)
    return m


def lens_spatter(img: np.ndarray, p: LensSpatterParams, rng: np.random.Generator) -> np.ndarray:
    """ImageNet-C spatter: water drops (edge-lit, bright turquoise) or, with ``mud``, brown mud blotches.

    Below a 224-pixel short side the drops are drawn at 224 and the drop layer is shrunk onto the
    image (the reference's pixel-sized edge filters would otherwise act on sub-pixel drops and
    reorder the severities); above it the field is drawn at the image's size, its smoothing scaled.
    """
    h, w = img.shape[:2]
    s = size_scale(img)
    work_s = max(s, 1.0)
    work_h, work_w = (h, w) if s >= 1.0 else (max(h, int(round(h / s))), max(w, int(round(w / s))))
    x = img.astype(np.float32) / np.float32(255.0)
    liquid = rng.normal(p.mean, p.spread, (work_h, work_w)).astype(np.float32)
    liquid = gaussian_nearest(liquid, p.smoothing * work_s)
    if work_s != 1.0:
        # smoothing white noise over more pixels leaves less of its spread: rescale the deviations to
        # what the 224-pixel field keeps, so the threshold covers the same share of any image
        liquid = np.float32(p.mean) + (liquid - np.float32(p.mean)) * np.float32(smoothed_noise_gain(p.smoothing, work_s))
    liquid[liquid < p.threshold] = 0
    if not p.mud:
        m = _water_strength(liquid, p)
    else:
        m = gaussian_nearest((liquid > p.threshold).astype(np.float32), p.intensity * work_s)
        m[m < 0.8] = 0
    if (work_h, work_w) != (h, w):
        m = cv2.resize(m, (w, h), interpolation=cv2.INTER_AREA)
    if not p.mud:
        add = m[..., None] * _WATER
        if img.shape[-1] == 1:
            add = np.clip(add, 0, 1) @ np.array([0.2989, 0.5870, 0.1140], np.float32)
            add = add[..., None]
        return to_uint8(np.clip(x + add, 0, 1) * np.float32(255.0))
    colour = _MUD if img.shape[-1] == 3 else np.array([_MUD @ np.array([0.2989, 0.5870, 0.1140], np.float32)], np.float32)
    x = x * (1 - m[..., None]) + colour * m[..., None]
    return to_uint8(np.clip(x, 0, 1) * np.float32(255.0))


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
        description="Spatters the lens with liquid (ImageNet-C spatter): bright water drops at severities 1-3, brown mud blotches at 4-5, partly hiding the scene.",
        situations=[
            "mud-splashed car camera after an off-road drive",
            "rain drops on an outdoor camera's lens",
            "construction site camera with dirty housing",
            "underwater camera with sediment on the port",
            "bicycle helmet camera splashed by puddles",
        ],
        params_model=LensSpatterParams,
        ladder={
            1: {"mean": 0.65, "spread": 0.3, "smoothing": 4.0, "threshold": 0.69, "intensity": 0.6, "mud": False},
            2: {"mean": 0.65, "spread": 0.3, "smoothing": 3.0, "threshold": 0.68, "intensity": 0.6, "mud": False},
            3: {"mean": 0.65, "spread": 0.3, "smoothing": 2.0, "threshold": 0.68, "intensity": 0.5, "mud": False},
            4: {"mean": 0.65, "spread": 0.3, "smoothing": 1.0, "threshold": 0.65, "intensity": 1.5, "mud": True},
            5: {"mean": 0.67, "spread": 0.4, "smoothing": 1.0, "threshold": 0.65, "intensity": 1.5, "mud": True},
        },
        ranges={"threshold": (0.72, 0.64)},
        apply=lens_spatter,
        backend="ImageNet-C spatter (cv2 Canny / distance transform for water, blurred mask for mud)",
        # 3: below 224 px the drops are drawn at 224 and shrunk, above it the smoothed field keeps the
        # 224-pixel spread (the same severity covers the same share of any image; 224 px unchanged)
        ladder_version=IMAGENET_C_LADDER_VERSION + 1,
    ),
]

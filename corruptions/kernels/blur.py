"""Blur family: optical defocus, camera/object motion, zoom and frosted-glass blur."""

from __future__ import annotations

import cv2
import numpy as np
from pydantic import Field

from albumentations.augmentations.blur import functional as abf

from corruptions.draws import record
from corruptions.kernels._common import odd, per_channel, size_scale
from corruptions.spec import CorruptionSpec, Params


class GaussianBlurParams(Params):
    sigma: float = Field(3.0, ge=0.1, le=20.0, description="Gaussian sigma in pixels at a 224-pixel short side")


def gaussian_blur(img: np.ndarray, p: GaussianBlurParams, rng: np.random.Generator) -> np.ndarray:
    sigma = p.sigma * size_scale(img)
    return per_channel(lambda x: cv2.GaussianBlur(x, (0, 0), sigmaX=sigma, borderType=cv2.BORDER_REFLECT_101), img)


def motion_kernel(length: float, angle_deg: float) -> np.ndarray:
    """Normalised line kernel of the given length through the centre, anti-aliased by bilinear splatting."""
    size = odd(np.ceil(length) + 2, minimum=3)
    c = size // 2
    n = max(2, int(np.ceil(length * 4)))
    t = np.linspace(-(length - 1) / 2.0, (length - 1) / 2.0, n)
    theta = np.deg2rad(angle_deg)
    xs, ys = c + t * np.cos(theta), c - t * np.sin(theta)
    x0, y0 = np.floor(xs).astype(int), np.floor(ys).astype(int)
    fx, fy = xs - x0, ys - y0
    k = np.zeros((size, size), np.float64)
    for dx, dy, w in ((0, 0, (1 - fx) * (1 - fy)), (1, 0, fx * (1 - fy)), (0, 1, (1 - fx) * fy), (1, 1, fx * fy)):
        np.add.at(k, (np.clip(y0 + dy, 0, size - 1), np.clip(x0 + dx, 0, size - 1)), w)
    return (k / k.sum()).astype(np.float32)


class MotionBlurParams(Params):
    length: float = Field(13.0, ge=1.0, le=60.0, description="blur streak length in pixels at a 224-pixel short side")


def motion_blur(img: np.ndarray, p: MotionBlurParams, rng: np.random.Generator) -> np.ndarray:
    angle = record(rng, "angle", float(rng.uniform(0.0, 180.0)))  # direction of motion is the random part
    kernel = motion_kernel(max(1.0, p.length * size_scale(img)), angle)
    return per_channel(lambda x: cv2.filter2D(x, -1, kernel, borderType=cv2.BORDER_REFLECT_101), img)


CORRUPTIONS: list[CorruptionSpec] = [
    CorruptionSpec(
        name="gaussian_blur",
        family="blur",
        description="Blurs the image uniformly with a Gaussian kernel, as from a soft or slightly misfocused lens.",
        situations=[
            "cheap fixed-focus camera on a doorbell",
            "microscope slide slightly out of the focal plane",
            "image upscaled from a low-resolution thumbnail",
            "camera behind a smeared protective window",
            "endoscope lens with a film of fluid",
        ],
        params_model=GaussianBlurParams,
        ladder={1: {"sigma": 1.0}, 2: {"sigma": 2.0}, 3: {"sigma": 3.0}, 4: {"sigma": 4.0}, 5: {"sigma": 6.0}},
        ranges={"sigma": (0.5, 7.0)},
        apply=gaussian_blur,
        backend="cv2.GaussianBlur",
    ),
    CorruptionSpec(
        name="motion_blur",
        family="blur",
        description="Smears the image along a straight line in a random direction, as when the camera or subject moves during exposure.",
        situations=[
            "night driving with long exposure",
            "handheld phone photo of a moving child",
            "drone footage in strong wind",
            "conveyor-belt inspection camera with slow shutter",
            "sports photography with panning",
        ],
        params_model=MotionBlurParams,
        ladder={1: {"length": 5.0}, 2: {"length": 9.0}, 3: {"length": 13.0}, 4: {"length": 19.0}, 5: {"length": 27.0}},
        ranges={"length": (3.0, 31.0)},
        apply=motion_blur,
        backend="own line kernel + cv2.filter2D",
        draws={"angle": (0.0, 180.0)},
    ),
]


class DefocusParams(Params):
    radius: float = Field(6.0, ge=1.0, le=40.0, description="defocus disk radius in pixels at a 224-pixel short side")
    alias_blur: float = Field(0.5, ge=0.01, le=2.0, description="Gaussian softening of the disk edge")


def disk_kernel(radius: float, alias_blur: float) -> np.ndarray:
    """Normalised disk of a fractional radius (pixel weights = covered area, 8x8 supersampled), Gaussian-softened.

    Same construction as albumentations' ``defocus`` but without rounding the radius to an
    integer, so small images keep distinct severities.
    """
    half = int(np.ceil(radius)) + 1
    sub = (np.arange(8) + 0.5) / 8 - 0.5
    grid = np.arange(-half, half + 1)
    fine = (grid[:, None] + sub[None, :]).ravel()
    inside = (fine[:, None] ** 2 + fine[None, :] ** 2) <= radius**2
    n = grid.size
    cover = inside.reshape(n, 8, n, 8).mean(axis=(1, 3)).astype(np.float32)
    cover = cv2.GaussianBlur(cover, (3, 3) if radius <= 8 else (5, 5), sigmaX=alias_blur)
    return cover / cover.sum()


def defocus_blur(img: np.ndarray, p: DefocusParams, rng: np.random.Generator) -> np.ndarray:
    kernel = disk_kernel(max(0.5, p.radius * size_scale(img)), p.alias_blur)
    return per_channel(lambda x: cv2.filter2D(x, -1, kernel, borderType=cv2.BORDER_REFLECT_101), img)


class GlassBlurParams(Params):
    sigma: float = Field(0.8, ge=0.1, le=5.0, description="Gaussian sigma before and after the pixel shuffling")
    max_delta: float = Field(2.0, ge=1.0, le=10.0, description="largest pixel displacement, pixels at a 224-pixel short side")
    iterations: int = Field(2, ge=1, le=5, description="rounds of local pixel swaps")


def glass_shuffle(x: np.ndarray, max_delta: int, dxy: np.ndarray) -> np.ndarray:
    """albumentations' fast-mode glass-blur pixel swaps, on flat int32 indices (about 10x faster).

    Gives the same pixels as ``albumentations.augmentations.blur.functional.glass_blur`` for the
    same ``dxy`` (tested); ``x`` is modified in place and returned.
    """
    h, w = x.shape[:2]
    flat = x.reshape(h * w, -1)
    hs = np.arange(h - max_delta, max_delta, -1, dtype=np.int32)
    ws = np.arange(w - max_delta, max_delta, -1, dtype=np.int32)
    base_h = np.tile(hs, ws.shape[0])
    base_w = np.repeat(ws, hs.shape[0])
    src = base_h * w + base_w
    d = dxy.astype(np.int32)
    for i in range(d.shape[1]):
        dst = (base_h + d[:, i, 0]) * w + (base_w + d[:, i, 1])
        a, b = flat[src], flat[dst]
        flat[src] = b
        flat[dst] = a
    return x


def glass_blur(img: np.ndarray, p: GlassBlurParams, rng: np.random.Generator) -> np.ndarray:
    s = size_scale(img)
    delta = max(1, int(round(p.max_delta * s)))
    h, w = img.shape[:2]
    sigma = p.sigma * max(s, 0.25)
    dxy = rng.integers(-delta, delta, size=((h - 2 * delta) * (w - 2 * delta), p.iterations, 2))
    blur = lambda x: per_channel(  # noqa: E731
        lambda y: cv2.GaussianBlur(y, (0, 0), sigmaX=sigma), x
    )
    shuffled = glass_shuffle(np.ascontiguousarray(blur(img)), delta, dxy)
    return blur(shuffled)


class ZoomBlurParams(Params):
    max_zoom: float = Field(1.21, ge=1.01, le=2.0, description="largest zoom factor averaged into the image")
    steps: int = Field(10, ge=2, le=32, description="number of zoomed copies averaged")


def zoom_blur(img: np.ndarray, p: ZoomBlurParams, rng: np.random.Generator) -> np.ndarray:
    factors = np.linspace(1.0, p.max_zoom, p.steps + 1)[1:]
    out = abf.zoom_blur(img, factors)
    return out.reshape(img.shape)


CORRUPTIONS += [
    CorruptionSpec(
        name="defocus_blur",
        family="blur",
        description="Blurs with a disk-shaped kernel, the look of a lens focused at the wrong distance.",
        situations=[
            "autofocus locking onto the background",
            "macro photo with very shallow depth of field",
            "document camera held too close to the page",
            "fundus camera misfocused on the retina",
            "security camera refocused after a lens bump",
        ],
        params_model=DefocusParams,
        ladder={
            1: {"radius": 3.0, "alias_blur": 0.1}, 2: {"radius": 4.0, "alias_blur": 0.5}, 3: {"radius": 6.0, "alias_blur": 0.5},
            4: {"radius": 8.0, "alias_blur": 0.5}, 5: {"radius": 10.0, "alias_blur": 0.5},
        },
        ranges={"radius": (2.0, 12.0)},
        apply=defocus_blur,
        backend="own anti-aliased disk (albumentations defocus construction) + cv2.filter2D",
    ),
    CorruptionSpec(
        name="glass_blur",
        family="blur",
        description="Blurs and locally scrambles pixels, like looking through frosted or textured glass.",
        situations=[
            "camera behind a frosted bathroom or office window",
            "photo through a rain-streaked car windscreen",
            "scratched plastic housing of an outdoor camera",
            "imaging through a fogged-up diving mask",
            "textured privacy glass in a hospital",
        ],
        params_model=GlassBlurParams,
        ladder={
            1: {"sigma": 0.7, "max_delta": 1.0, "iterations": 1}, 2: {"sigma": 0.7, "max_delta": 1.0, "iterations": 2},
            3: {"sigma": 0.8, "max_delta": 2.0, "iterations": 2}, 4: {"sigma": 0.9, "max_delta": 2.0, "iterations": 3},
            5: {"sigma": 1.0, "max_delta": 3.0, "iterations": 3},
        },
        ranges={"sigma": (0.6, 1.1), "max_delta": (1.0, 3.0), "iterations": (1, 3)},
        apply=glass_blur,
        backend="albumentations glass_blur fast mode, re-implemented on flat indices (tested equal)",
    ),
    CorruptionSpec(
        name="zoom_blur",
        family="blur",
        description="Radial streaks from the centre outwards, as when the camera moves quickly towards the scene or zooms during exposure.",
        situations=[
            "vehicle camera accelerating forwards",
            "zooming the lens during a long exposure",
            "drone diving towards its target",
            "head-mounted camera of a running person",
            "fast approach of a docking robot",
        ],
        params_model=ZoomBlurParams,
        ladder={
            1: {"max_zoom": 1.11}, 2: {"max_zoom": 1.16}, 3: {"max_zoom": 1.21}, 4: {"max_zoom": 1.26}, 5: {"max_zoom": 1.31},
        },
        ranges={"max_zoom": (1.05, 1.35)},
        apply=zoom_blur,
        backend="albumentations blur.functional.zoom_blur",
    ),
]

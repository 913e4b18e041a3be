"""Blur family: optical defocus, camera/object motion, zoom and frosted-glass blur."""

from __future__ import annotations

from functools import lru_cache

import cv2
import numpy as np
from pydantic import Field

from domainbench.corruptions.draws import record
from domainbench.corruptions.kernels._common import per_channel, size_scale, to_uint8
from domainbench.corruptions.kernels._imagenet_c import (
    IMAGENET_C_LADDER_VERSION,
    clipped_zoom,
    gaussian_nearest,
    motion_trail,
    sequential_swap_sources,
)
from domainbench.corruptions.spec import REFERENCE_SIZE, CorruptionSpec, Params, side_scale


class GaussianBlurParams(Params):
    sigma: float = Field(3.0, ge=0.1, le=20.0, description="Gaussian sigma in pixels at a 224-pixel short side")


def gaussian_blur(img: np.ndarray, p: GaussianBlurParams, rng: np.random.Generator) -> np.ndarray:
    # ImageNet-C's ladder; the reference's scikit-image blur differs only in its border rule (edges
    # replicated, not reflected) and its 4-sigma kernel, well within the fidelity tolerance
    sigma = p.sigma * size_scale(img)
    return per_channel(lambda x: cv2.GaussianBlur(x, (0, 0), sigmaX=sigma, borderType=cv2.BORDER_REFLECT_101), img)


class MotionBlurParams(Params):
    radius: float = Field(15.0, ge=0.0, le=60.0, description="trail length 2 * radius + 1 in pixels at a 224-pixel short side")
    sigma: float = Field(8.0, ge=0.1, le=60.0, description="decay (Gaussian sigma) of the trail weights in pixels at 224")


def motion_blur(img: np.ndarray, p: MotionBlurParams, rng: np.random.Generator) -> np.ndarray:
    """ImageNet-C motion_blur: a one-sided trail (the image is also shifted along it) at a random angle."""
    angle = record(rng, "angle", float(rng.uniform(-45.0, 45.0)))  # direction of motion is the random part
    s = size_scale(img)
    return to_uint8(motion_trail(img, round(p.radius * s), max(p.sigma * s, 0.1), angle))


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
        ladder={
            1: {"radius": 10.0, "sigma": 3.0}, 2: {"radius": 15.0, "sigma": 5.0}, 3: {"radius": 15.0, "sigma": 8.0},
            4: {"radius": 15.0, "sigma": 12.0}, 5: {"radius": 20.0, "sigma": 15.0},
        },
        ranges={"radius": (10.0, 20.0), "sigma": (3.0, 15.0)},
        apply=motion_blur,
        backend="ImageNet-C one-sided trail as one kernel + cv2.filter2D",
        draws={"angle": (-45.0, 45.0)},
        ladder_version=IMAGENET_C_LADDER_VERSION,
    ),
]


class DefocusParams(Params):
    radius: float = Field(6.0, ge=1.0, le=40.0, description="defocus disk radius in pixels at a 224-pixel short side")
    alias_blur: float = Field(0.5, ge=0.01, le=2.0, description="Gaussian softening of the disk edge")


@lru_cache(maxsize=32)
def disk_kernel(radius: float, alias_blur: float) -> np.ndarray:
    """ImageNet-C's defocus disk: pixels with x^2 + y^2 <= radius^2 on a grid of at least 17 x 17,
    normalised, then softened by a 3 x 3 (radius <= 8) or 5 x 5 Gaussian of sigma ``alias_blur``.

    The radius may be fractional (images other than 224 pixels scale it).
    """
    half = max(8, int(np.ceil(radius)))
    grid = np.arange(-half, half + 1)
    disk = ((grid[:, None] ** 2 + grid[None, :] ** 2) <= radius**2).astype(np.float32)
    disk /= disk.sum()
    return cv2.GaussianBlur(disk, (3, 3) if radius <= 8 else (5, 5), sigmaX=alias_blur)


def area_overlap(n: int, scale: float, half: int) -> np.ndarray:
    """(2n + 1, 2 half + 1) lengths by which the pixels -n..n of a grid ``scale`` times as fine
    (scale < 1: coarser) overlap the pixels -half..half of the unit grid, both centred on 0."""
    small = np.arange(-n, n + 1)[:, None]
    unit = np.arange(-half, half + 1)[None, :]
    return np.clip(np.minimum((small + 0.5) / scale, unit + 0.5) - np.maximum((small - 0.5) / scale, unit - 0.5), 0.0, None)


@lru_cache(maxsize=64)
def defocus_kernel(radius: float, alias_blur: float, scale: float) -> np.ndarray:
    """The defocus kernel of an image ``scale`` times a 224-pixel one, ``radius`` given at 224 pixels.

    At 224 pixels and above, ImageNet-C's disk of radius ``radius * scale``. Below, the 224-pixel
    disk blur done at 224 pixels: the image enlarged to 224 (each pixel replicated over 1 / scale
    unit pixels), blurred with the 224-pixel disk (its softening included) and averaged back over
    each pixel, as one kernel: the disk spread by one enlarged pixel and integrated over each pixel.
    So every radius keeps a kernel of its own that changes the image (a disk of whole pixels made
    radii 4 and 6 one pixel at 32 px; integrating without the spread left radii below half a pixel
    doing nothing at all).
    """
    if scale >= 1:
        return disk_kernel(radius * scale, alias_blur)
    fine = disk_kernel(radius, alias_blur).astype(np.float64)
    reach = int(np.ceil(0.5 / scale))
    box = area_overlap(0, scale, reach)[0] * scale  # one enlarged pixel, in unit pixels; sums to 1
    spread = cv2.filter2D(np.pad(fine, reach), -1, np.outer(box, box), borderType=cv2.BORDER_CONSTANT)
    half = spread.shape[0] // 2
    a = area_overlap(int(np.ceil((half + 0.5) * scale - 0.5)), scale, half)
    # every unit pixel lies wholly in the coarse ones: the sum stays the disk's (1.011 at radius 10, as the reference's)
    return (a @ spread @ a.T).astype(np.float32)


def defocus_blur(img: np.ndarray, p: DefocusParams, rng: np.random.Generator) -> np.ndarray:
    kernel = defocus_kernel(p.radius, p.alias_blur, size_scale(img))
    return per_channel(lambda x: cv2.filter2D(x, -1, kernel, borderType=cv2.BORDER_REFLECT_101), img)


class GlassBlurParams(Params):
    sigma: float = Field(0.8, ge=0.1, le=5.0, description="Gaussian sigma before and after the pixel shuffling")
    max_delta: float = Field(2.0, ge=1.0, le=10.0, description="largest pixel displacement, pixels at a 224-pixel short side")
    iterations: int = Field(2, ge=1, le=5, description="rounds of local pixel swaps")


def glass_blur(img: np.ndarray, p: GlassBlurParams, rng: np.random.Generator) -> np.ndarray:
    """ImageNet-C glass_blur: Gaussian blur, sequential local pixel "swaps" (copies), Gaussian blur again.

    Below 224 pixels the pixels are swapped on the image enlarged to 224 (bilinear) and the result
    shrunk back by area: a displacement of whole pixels cannot shrink with the image (one pixel at
    32 px is seven at 224, more than severity 5's four), and the ladder trades displacement against blur.
    """
    h, w = img.shape[:2]
    big = supersampled_shape(h, w)
    if big is None:
        return to_uint8(_glass_blur(img, p, rng))
    up = cv2.resize(img.astype(np.float32), (big[1], big[0]), interpolation=cv2.INTER_LINEAR).reshape(*big, *img.shape[2:])
    out = cv2.resize(_glass_blur(up, p, rng), (w, h), interpolation=cv2.INTER_AREA)
    return to_uint8(out.reshape(img.shape))


def supersampled_shape(h: int, w: int) -> tuple[int, int] | None:
    """(H, W) of an image smaller than 224 pixels enlarged to a 224-pixel short side; None from 224 on."""
    if side_scale(h, w) >= 1:
        return None
    f = REFERENCE_SIZE / min(h, w)
    return (REFERENCE_SIZE, max(REFERENCE_SIZE, round(w * f))) if h <= w else (max(REFERENCE_SIZE, round(h * f)), REFERENCE_SIZE)


def _glass_blur(img: np.ndarray, p: GlassBlurParams, rng: np.random.Generator) -> np.ndarray:
    """glass_blur on an image of at least 224 pixels (displacements scaled up with it), float32."""
    s = size_scale(img)
    delta = max(1, int(round(p.max_delta * s)))
    h, w = img.shape[:2]
    sigma = p.sigma * s
    blurred = gaussian_nearest(img, sigma)
    # the reference truncates the first blur to uint8 before shuffling
    x = np.floor(np.clip(blurred, 0, 255)).astype(np.uint8)
    sources = sequential_swap_sources(h, w, delta, p.iterations, rng)
    shuffled = x.reshape(h * w, -1)[sources].reshape(img.shape)
    return gaussian_nearest(shuffled, sigma)


class ZoomBlurParams(Params):
    max_zoom: float = Field(1.21, ge=1.01, le=2.0, description="end (exclusive) of the zoom factors 1, 1 + step, ...")
    step: float = Field(0.02, ge=0.005, le=0.2, description="spacing of the zoom factors averaged into the image")


def zoom_factors(p: ZoomBlurParams) -> np.ndarray:
    """ImageNet-C's ``np.arange(1, max_zoom, step)``: the list starts at 1.0 (an unzoomed copy)."""
    return np.arange(1.0, p.max_zoom, p.step)


def zoom_blur(img: np.ndarray, p: ZoomBlurParams, rng: np.random.Generator) -> np.ndarray:
    """ImageNet-C zoom_blur: the image and its clipped zooms by every factor, averaged."""
    x = img.astype(np.float32)
    out = x.copy()
    factors = zoom_factors(p)
    for z in factors:
        layer = clipped_zoom(x, float(z))
        out[: layer.shape[0], : layer.shape[1]] += layer
    return to_uint8(out / np.float32(len(factors) + 1))


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
        backend="ImageNet-C disk kernel (cached) + cv2.filter2D",
        ladder_version=IMAGENET_C_LADDER_VERSION + 1,  # 3: below 224 px an area-sampled disk
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
            1: {"sigma": 0.7, "max_delta": 1.0, "iterations": 2}, 2: {"sigma": 0.9, "max_delta": 2.0, "iterations": 1},
            3: {"sigma": 1.0, "max_delta": 2.0, "iterations": 3}, 4: {"sigma": 1.1, "max_delta": 3.0, "iterations": 2},
            5: {"sigma": 1.5, "max_delta": 4.0, "iterations": 2},
        },
        ranges={"sigma": (0.7, 1.5), "max_delta": (1.0, 4.0)},
        apply=glass_blur,
        backend="ImageNet-C glass_blur: its sequential pixel copies resolved by pointer doubling, one gather, cv2 blurs",
        ladder_version=IMAGENET_C_LADDER_VERSION + 1,  # 3: below 224 px swapped at 224 and shrunk
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
            1: {"max_zoom": 1.11, "step": 0.01}, 2: {"max_zoom": 1.16, "step": 0.01}, 3: {"max_zoom": 1.21, "step": 0.02},
            4: {"max_zoom": 1.26, "step": 0.02}, 5: {"max_zoom": 1.31, "step": 0.03},
        },
        ranges={"max_zoom": (1.06, 1.36)},
        apply=zoom_blur,
        backend="ImageNet-C zoom_blur, clipped zooms by cv2.warpAffine",
        ladder_version=IMAGENET_C_LADDER_VERSION,
    ),
]

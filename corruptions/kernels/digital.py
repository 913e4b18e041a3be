"""Digital family: compression and resampling artefacts."""

from __future__ import annotations

import cv2
import numpy as np
from PIL import Image
from pydantic import Field

from domainbench.corruptions.kernels._imagenet_c import IMAGENET_C_LADDER_VERSION
from domainbench.corruptions.spec import CorruptionSpec, Params


class JpegParams(Params):
    quality: int = Field(15, ge=1, le=100, description="JPEG quality (lower = stronger compression)")


def jpeg_compression(img: np.ndarray, p: JpegParams, rng: np.random.Generator) -> np.ndarray:
    """ImageNet-C jpeg_compression (PIL, 4:2:0 chroma) through bare cv2.imencode / imdecode (libjpeg, same tables)."""
    params = (cv2.IMWRITE_JPEG_QUALITY, int(p.quality))
    if img.shape[-1] == 1:
        ok, buf = cv2.imencode(".jpg", img[..., 0], params)
        return cv2.imdecode(buf, cv2.IMREAD_GRAYSCALE)[..., None]
    # OpenCV encodes BGR; convert so chroma subsampling sees real colours
    ok, buf = cv2.imencode(".jpg", cv2.cvtColor(img, cv2.COLOR_RGB2BGR), params)
    return cv2.cvtColor(cv2.imdecode(buf, cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)


CORRUPTIONS: list[CorruptionSpec] = [
    CorruptionSpec(
        name="jpeg_compression",
        family="digital",
        description="Re-encodes the image as a low-quality JPEG, adding blocky 8x8 artefacts and colour bleeding.",
        situations=[
            "images forwarded repeatedly through messaging apps",
            "security camera recorder saving at low bit rate",
            "web-scraped product thumbnails",
            "telemedicine photos compressed for a slow connection",
            "satellite downlink with aggressive compression",
        ],
        params_model=JpegParams,
        ladder={1: {"quality": 25}, 2: {"quality": 18}, 3: {"quality": 15}, 4: {"quality": 10}, 5: {"quality": 7}},
        ranges={"quality": (40, 5)},
        apply=jpeg_compression,
        backend="cv2.imencode / imdecode (ImageNet-C jpeg_compression)",
    ),
]


class PixelateParams(Params):
    scale: float = Field(0.4, ge=0.02, le=1.0, description="downsampling factor before nearest-neighbour upsampling")


def pixelate(img: np.ndarray, p: PixelateParams, rng: np.random.Generator) -> np.ndarray:
    """ImageNet-C pixelate: PIL's box filter down to int(side * scale), nearest (pixel centres) back up.

    PIL's BOX averages the input pixels whose centres fall in each box (not covered areas, as
    cv2's INTER_AREA does), so the downsampling is PIL's own; cv2's INTER_NEAREST_EXACT (pixel
    centres, as PIL's NEAREST) scales back up.
    """
    h, w = img.shape[:2]
    oh, ow = max(1, int(h * p.scale)), max(1, int(w * p.scale))
    src = Image.fromarray(img[..., 0] if img.shape[-1] == 1 else img)
    small = np.asarray(src.resize((ow, oh), Image.BOX))
    return cv2.resize(small, (w, h), interpolation=cv2.INTER_NEAREST_EXACT).reshape(img.shape)


class PosterizeParams(Params):
    bits: int = Field(3, ge=1, le=8, description="bits kept per channel")


def posterize_batch(images: np.ndarray, p: PosterizeParams, rngs: list[np.random.Generator]) -> np.ndarray:
    return images & np.uint8((0xFF << (8 - p.bits)) & 0xFF)


class WebpParams(Params):
    quality: int = Field(10, ge=1, le=100, description="WebP quality (lower = stronger compression)")


def webp_compression(img: np.ndarray, p: WebpParams, rng: np.random.Generator) -> np.ndarray:
    rgb = img if img.shape[-1] == 3 else np.repeat(img, 3, axis=-1)
    ok, buf = cv2.imencode(".webp", np.ascontiguousarray(rgb[..., ::-1]), (cv2.IMWRITE_WEBP_QUALITY, p.quality))
    out = cv2.imdecode(buf, cv2.IMREAD_COLOR)[..., ::-1]
    if img.shape[-1] == 1:
        out = cv2.cvtColor(np.ascontiguousarray(out), cv2.COLOR_RGB2GRAY)[..., None]
    return np.ascontiguousarray(out)


CORRUPTIONS += [
    CorruptionSpec(
        name="pixelate",
        family="digital",
        description="Reduces resolution and blows the image back up with blocky pixels, as from digital zoom or a tiny sensor.",
        situations=[
            "strong digital zoom on a distant subject",
            "low-resolution CCTV frame enlarged for review",
            "thumbnail images upscaled for display",
            "video conference at very low bandwidth",
            "early-generation webcam",
        ],
        params_model=PixelateParams,
        ladder={1: {"scale": 0.6}, 2: {"scale": 0.5}, 3: {"scale": 0.4}, 4: {"scale": 0.3}, 5: {"scale": 0.25}},
        ranges={"scale": (0.7, 0.2)},
        apply=pixelate,
        backend="PIL BOX down, cv2 INTER_NEAREST_EXACT up (ImageNet-C pixelate)",
        ladder_version=IMAGENET_C_LADDER_VERSION,
    ),
    CorruptionSpec(
        name="posterize",
        family="digital",
        description="Reduces the number of intensity levels per channel, creating flat bands instead of smooth gradients.",
        situations=[
            "GIF export with a small colour palette",
            "old display or printer with low bit depth",
            "aggressive colour quantisation in an embedded device",
            "screenshots of low-colour legacy software",
            "cheap e-ink or LCD display photographed",
        ],
        params_model=PosterizeParams,
        ladder={1: {"bits": 5}, 2: {"bits": 4}, 3: {"bits": 3}, 4: {"bits": 2}, 5: {"bits": 1}},
        ranges={"bits": (6, 1)},
        apply_batch=posterize_batch,
        backend="numpy bit mask (albumentations posterize)",
    ),
    CorruptionSpec(
        name="webp_compression",
        family="digital",
        description="Re-encodes the image as a low-quality WebP, smearing fine texture into smooth blotches.",
        situations=[
            "images served by a bandwidth-saving CDN",
            "social media re-compression of uploaded photos",
            "mobile app caching images at low quality",
            "web archive of product photos",
            "messaging app data-saver mode",
        ],
        params_model=WebpParams,
        ladder={1: {"quality": 30}, 2: {"quality": 20}, 3: {"quality": 10}, 4: {"quality": 5}, 5: {"quality": 1}},
        ranges={"quality": (50, 1)},
        apply=webp_compression,
        backend="cv2.imencode .webp (albumentations image_compression)",
    ),
]

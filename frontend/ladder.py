"""What a corruption does to images, measured: SSIM per severity (the plan preview's predicted damage)
and whether it changes the pixels at all (a colour corruption on grayscale images does not)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

#: a corrupted image this close to its clean one (mean absolute difference on the 0-255 scale) is unchanged
NO_EFFECT_PIXELS = 0.5


def pixel_change(clean: np.ndarray | Sequence[np.ndarray], corrupted: np.ndarray | Sequence[np.ndarray]) -> float:
    """Mean absolute pixel difference, 0-255 scale, over every image, pixel and channel."""
    a, b = np.asarray(clean, dtype=np.float64), np.asarray(corrupted, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"clean {a.shape} and corrupted {b.shape} images differ in shape")
    return float(np.mean(np.abs(b - a))) if a.size else 0.0


def no_effect(clean: np.ndarray | Sequence[np.ndarray], corrupted: np.ndarray | Sequence[np.ndarray]) -> bool:
    return len(clean) > 0 and pixel_change(clean, corrupted) < NO_EFFECT_PIXELS


def ladder_ssim(clean: np.ndarray, ladder: Sequence[np.ndarray]) -> list[float]:
    """SSIM of each severity's image against the clean one (1 = unchanged; scikit-image's definition,
    computed by ``metrics.damage``, the measure runs record per cell)."""
    from domainbench.metrics.damage import ssim_per_image

    clean = np.asarray(clean, dtype=np.uint8)
    stack = np.stack([np.asarray(x, dtype=np.uint8) for x in ladder])
    return [float(v) for v in ssim_per_image(np.repeat(clean[None], len(stack), axis=0), stack)]


def no_effect_severities(clean: np.ndarray, ladder: Sequence[np.ndarray], severities: Sequence[int]) -> list[int]:
    """The severities whose image does not differ from the clean one (``NO_EFFECT_PIXELS``)."""
    return [s for s, x in zip(severities, ladder, strict=True) if pixel_change(clean, x) < NO_EFFECT_PIXELS]

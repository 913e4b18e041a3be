"""What a plan's corruptions do to an image before anything is evaluated: SSIM per severity (the plan
preview's expected damage) and whether a severity changes the pixels at all (a colour corruption on
grayscale images does not).

Shared by ``domainbench plan --preview`` and the UI's New domain page, so both show the same numbers:
the bundled sample's image, enlarged as the page shows it, corrupted with the engine's seeded kernels,
and SSIM as the runs record it per cell (:mod:`domainbench.metrics.damage`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from domainbench.records.config import DomainConfig
from domainbench.errors import UserInputError

#: a corrupted image this close to its clean one (mean absolute difference on the 0-255 scale) and ...
NO_EFFECT_PIXELS = 0.5
#: ... this similar in structure (mean SSIM) is unchanged (``looks_unchanged``)
NO_EFFECT_SSIM = 0.99
#: the preview's image side: the bundled sample's 28-pixel images enlarged so corruptions are visible
PREVIEW_SIZE = 112


def pixel_change(clean: np.ndarray | Sequence[np.ndarray], corrupted: np.ndarray | Sequence[np.ndarray]) -> float:
    """Mean absolute pixel difference, 0-255 scale, over every image, pixel and channel."""
    a, b = np.asarray(clean, dtype=np.float64), np.asarray(corrupted, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"clean {a.shape} and corrupted {b.shape} images differ in shape")
    return float(np.mean(np.abs(b - a))) if a.size else 0.0


def looks_unchanged(change: float, ssim: float) -> bool:
    """Whether a corruption that moved pixels by ``change`` on average (``pixel_change``) to a mean SSIM of ``ssim``
    left the images as they were: both measures must say so. A few pixels changed a lot in one place (spatter
    drops, sparse sensor noise) keep the mean difference under half a grey level but are visible, and SSIM sees them."""
    return change < NO_EFFECT_PIXELS and ssim >= NO_EFFECT_SSIM


def no_effect(clean: np.ndarray | Sequence[np.ndarray], corrupted: np.ndarray | Sequence[np.ndarray]) -> bool:
    """Whether the corrupted images (a batch, one per clean image) look like the clean ones (``looks_unchanged``)."""
    if len(clean) == 0:
        return False
    change = pixel_change(clean, corrupted)
    if change >= NO_EFFECT_PIXELS:
        return False  # SSIM is not needed to say so
    from domainbench.metrics.damage import ssim_per_image

    a, b = (np.stack([np.asarray(x, dtype=np.uint8) for x in images]) for images in (clean, corrupted))
    return looks_unchanged(change, float(ssim_per_image(a, b).mean()))


def ladder_ssim(clean: np.ndarray, ladder: Sequence[np.ndarray]) -> list[float]:
    """SSIM of each severity's image against the clean one (1 = unchanged; scikit-image's definition,
    computed by ``metrics.damage``, the measure runs record per cell)."""
    from domainbench.metrics.damage import ssim_per_image

    clean = np.asarray(clean, dtype=np.uint8)
    stack = np.stack([np.asarray(x, dtype=np.uint8) for x in ladder])
    return [float(v) for v in ssim_per_image(np.repeat(clean[None], len(stack), axis=0), stack)]


def no_effect_severities(clean: np.ndarray, ladder: Sequence[np.ndarray], severities: Sequence[int]) -> list[int]:
    """The severities whose image does not differ from the clean one (``NO_EFFECT_PIXELS``)."""
    return [s for s, x in zip(severities, ladder, strict=True) if no_effect([clean], [x])]


def sample_image(index: int = 0, size: int = PREVIEW_SIZE) -> np.ndarray:
    """An image of the bundled sample, enlarged (nearest neighbour) so corruptions are visible."""
    import cv2

    from domainbench.data import load_sample

    arrays = load_sample().arrays
    assert arrays is not None
    if not 0 <= index < len(arrays):
        raise UserInputError(f"sample image index {index} is out of range 0..{len(arrays) - 1}")
    return cv2.resize(arrays[index], (size, size), interpolation=cv2.INTER_NEAREST)


def first_of_each_class() -> dict[str, int]:
    """Per class of the bundled sample, the index of its first image (the preview's choices)."""
    from domainbench.data import load_sample

    ds = load_sample()
    assert ds.labels is not None
    return {c: int(np.flatnonzero(ds.labels == i)[0]) for i, c in enumerate(ds.classes) if (ds.labels == i).any()}


def severity_ladder(image: np.ndarray, name: str, severities: Sequence[int] = (1, 2, 3, 4, 5),
                    seed: int = 0) -> list[np.ndarray]:
    """The image under one corruption at each severity (the engine's seeded kernels)."""
    from domainbench import corruptions

    return [np.asarray(corruptions.corrupt(image, name, severity=s, seed=seed)) for s in severities]


def composed(image: np.ndarray, steps: Sequence[tuple[str, int]], seed: int = 0) -> np.ndarray:
    """The image under a composition's steps, in order (the engine's per-step seeds)."""
    from domainbench import corruptions

    out, _ = corruptions.corrupt_composed(np.asarray(image)[None], list(steps), [seed])
    return out[0]


@dataclass(frozen=True)
class ExpectedDamage:
    """One evaluated cell of a plan: its SSIM on the preview image, and whether it leaves the image as it was."""

    cell: str
    severity: int
    ssim: float
    no_effect: bool


def expected_damage(cfg: DomainConfig, image: np.ndarray, seed: int = 0) -> list[ExpectedDamage]:
    """Per chosen (corruption, severity) of the plan, and per composition, the SSIM of ``image`` corrupted."""
    from domainbench.corruptions import is_temporal

    out = []
    for c in cfg.corruptions:
        if is_temporal(c.name):
            continue  # a clip corruption does nothing to one still image: no expected damage to show
        images = severity_ladder(image, c.name, c.severities, seed)
        for s, v, x in zip(c.severities, ladder_ssim(image, images), images, strict=True):
            out.append(ExpectedDamage(c.name, s, v, looks_unchanged(pixel_change(image, x), v)))
    for comp in cfg.compositions:
        x = composed(image, comp.pairs, seed)
        v = ladder_ssim(image, [x])[0]
        out.append(ExpectedDamage(comp.cell_name, 1, v, looks_unchanged(pixel_change(image, x), v)))
    return out

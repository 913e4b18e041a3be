"""Helpers shared by kernels: size scaling, rounding to uint8, odd kernel sizes."""

from __future__ import annotations

import numpy as np

from domainbench.corruptions.spec import side_scale


def size_scale(image: np.ndarray) -> float:
    """Factor from parameters given at a 224-pixel short side to this image ((H, W, C) or (N, H, W, C))."""
    return side_scale(image.shape[-3], image.shape[-2])


def to_uint8(x: np.ndarray) -> np.ndarray:
    """Round half to even and clip a float array into uint8 (in place on ``x`` when it is a float array)."""
    if x.dtype.kind != "f":
        x = x.astype(np.float32)
    np.rint(x, out=x)
    np.clip(x, 0, 255, out=x)
    return x.astype(np.uint8)


def odd(n: float, minimum: int = 1) -> int:
    k = max(minimum, int(round(n)))
    return k if k % 2 == 1 else k + 1


def per_channel(fn, image: np.ndarray) -> np.ndarray:
    """Apply a 2-D uint8 function to (H, W, C) channel by channel (cv2 drops a trailing 1-channel axis)."""
    if image.shape[-1] == 1:
        return fn(image[..., 0])[..., None]
    return fn(image)


def fractal_noise(height: int, width: int, rng: np.random.Generator, base_cells: int = 3, octaves: int = 5,
                  persistence: float = 0.55) -> np.ndarray:
    """Smooth multi-octave value noise in [0, 1], shape (height, width), float32.

    The number of random cells is independent of the image size, so the pattern scales with
    the image (a 448-pixel image shows the same clouds as a 224-pixel one, twice as large).
    """
    import cv2

    acc = np.zeros((height, width), np.float32)
    amp = 1.0
    for o in range(octaves):
        cells = base_cells * 2**o
        grid = rng.random((cells + 1, cells + 1), dtype=np.float32)
        acc += np.float32(amp) * cv2.resize(grid, (width, height), interpolation=cv2.INTER_CUBIC)
        amp *= persistence
    lo, hi = float(acc.min()), float(acc.max())
    return (acc - lo) / np.float32(max(hi - lo, 1e-6))


def luminance(image: np.ndarray) -> np.ndarray:
    """Float32 luminance (H, W) of an (H, W, C) uint8 image (ITU-R BT.601 weights)."""
    if image.shape[-1] == 1:
        return image[..., 0].astype(np.float32)
    return image.astype(np.float32) @ np.array([0.299, 0.587, 0.114], np.float32)


class LazyModule:
    """A module imported on first attribute access.

    albumentations imports torch when it is importable (about 2 s on a 2-core machine); listing the
    catalogue loads every kernel module to read its specs (the planner, ``gallery``, reading stored runs),
    and only running a kernel needs albumentations' functions.
    """

    def __init__(self, name: str) -> None:
        self._name = name
        self._module = None

    def __getattr__(self, attr: str):
        if self._module is None:
            import importlib

            self._module = importlib.import_module(self._name)
        return getattr(self._module, attr)


#: albumentations' pure kernels (no Compose, no seeding of its own), loaded when a corruption first runs
agf = LazyModule("albumentations.augmentations.geometric.functional")
apf = LazyModule("albumentations.augmentations.pixel.functional")

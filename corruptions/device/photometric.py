"""Photometric family on the device: brightness, contrast, saturation and colour cast.

Brightness and saturation are ImageNet-C's HSV edits, which the CPU kernels compute without the
HSV round trip (``domainbench.corruptions.kernels._imagenet_c``). Every output channel of brightness is a
function of the channel and the pixel's brightest channel only, so the CPU helper itself, run
once on all 256 x 256 such pairs, gives a lookup table with the CPU's exact pixels.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch

from domainbench.corruptions.device.common import DeviceBatch, add_clamped, as_float, lookup, pair_index, to_uint8, widen_rows
from domainbench.corruptions.device.registry import device_kernel
from domainbench.corruptions.draws import record
from domainbench.corruptions.kernels._common import to_uint8 as np_to_uint8
from domainbench.corruptions.kernels._imagenet_c import hsv_value_shift, saturation_ratio
from domainbench.corruptions.kernels.photometric import _LEVELS, BrightnessParams, ColorShiftParams, ContrastParams, SaturateParams, _lut

_BYTE = np.arange(256, dtype=np.uint8)
_INV255 = np.float32(1 / 255.0)


@lru_cache(maxsize=16)
def _brightness_table(delta: float) -> np.ndarray:
    """(256 * 256,) uint8: channel ``c`` of a pixel whose brightest channel is ``v`` -> its brightened value, at ``v * 256 + c``."""
    v, c = np.meshgrid(_BYTE, _BYTE, indexing="ij")
    pixels = np.stack([c, np.maximum(v, c), np.maximum(v, c)], axis=-1).reshape(-1, 3)  # brightest channel v (c <= v where used)
    return np_to_uint8(hsv_value_shift(pixels.astype(np.float32) * _INV255, delta) * np.float32(255.0))[:, 0].copy()


@device_kernel("brightness", exact=True, note="lookup table built by the CPU kernel's own HSV-value helper")
def brightness(images: torch.Tensor, p: BrightnessParams, b: DeviceBatch) -> torch.Tensor:
    if images.shape[-1] == 1:
        table = torch.from_numpy(_lut(_LEVELS + p.delta * 255.0)).to(images.device)
        return lookup(table, images.to(torch.int32))
    table = torch.from_numpy(_brightness_table(p.delta)).to(images.device)
    brightest = images.amax(dim=-1, keepdim=True)
    return lookup(table, pair_index(brightest, images))


@device_kernel("contrast", exact=True, note="float32 affine map per image and channel (the CPU's float64 table: within rounding)")
def contrast(images: torch.Tensor, p: ContrastParams, b: DeviceBatch) -> torch.Tensor:
    n, h, w, c = images.shape
    # integer sums, as the CPU kernel: the mean of an image does not depend on its batch (rows first:
    # int32 holds a column of 8.4 million grey levels, and the reduction runs over contiguous rows)
    means = images.sum(dim=1, dtype=torch.int32).sum(dim=1, dtype=torch.int64).double() / (h * w)
    scale = torch.tensor(p.factor, dtype=torch.float64)
    shift = widen_rows((means * (1 - scale)).float()[:, None, None, :], images)
    return to_uint8(as_float(images).mul_(np.float32(p.factor)).add_(shift))


@lru_cache(maxsize=16)
def _saturation_ratio(factor: float, offset: float) -> np.ndarray:
    """(256 * 256,) float32 at ``v * 256 + mn``: how much the distance of each channel to the brightest one scales.

    The CPU kernel's own ``saturation_ratio`` (it depends on the brightest (v) and darkest (mn)
    channel only), for every pair, on the same float32 values.
    """
    v, mn = (a.astype(np.float32) * _INV255 for a in np.meshgrid(_BYTE, _BYTE, indexing="ij"))
    return np.ascontiguousarray(saturation_ratio(v, mn, factor, offset)[2].reshape(-1), dtype=np.float32)


@device_kernel("saturate", exact=True, note="the CPU's float32 formula, with the per-pixel ratio from a (brightest, darkest) table")
def saturate(images: torch.Tensor, p: SaturateParams, b: DeviceBatch) -> torch.Tensor:
    brightest = images.amax(dim=-1, keepdim=True)
    darkest = images.amin(dim=-1, keepdim=True)
    ratio = lookup(torch.from_numpy(_saturation_ratio(p.factor, p.offset)).to(images.device), pair_index(brightest, darkest))
    v = as_float(brightest).mul_(_INV255)
    x = as_float(images).mul_(_INV255)
    out = torch.sub(v, x, out=x).mul_(ratio).neg_().add_(v)  # v - (v - x) * ratio
    if p.offset > 0:
        # a grey pixel has hue 0 (red) in scikit-image: a positive offset tints it (v, v (1 - s'), v (1 - s'))
        grey = (brightest == darkest).expand_as(images).clone()
        grey[..., 0] = False
        tint = v * (np.float32(1) - np.float32(min(p.offset, 1.0)))
        out = torch.where(grey, tint, out)
    return to_uint8(out.mul_(np.float32(255.0)))


@device_kernel("color_shift", exact=True, note="cast direction drawn from the CPU kernel's numpy streams",
               cpu_chunk=None)
def color_shift(images: torch.Tensor, p: ColorShiftParams, b: DeviceBatch) -> torch.Tensor:
    basis = np.array([[1.0, -1.0, 0.0], [0.5, 0.5, -1.0]])
    basis /= np.linalg.norm(basis, axis=1, keepdims=True)
    angles = np.array([record(rng, "angle", rng.uniform(0.0, 2 * np.pi)) for rng in b.rngs])
    offsets = (np.cos(angles)[:, None] * basis[0] + np.sin(angles)[:, None] * basis[1]) * (p.magnitude * 255.0)
    offsets_t = torch.from_numpy(np.rint(offsets).astype(np.int16)).to(images.device)
    return add_clamped(images, offsets_t[:, None, None, :])

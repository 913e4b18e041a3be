"""Tensor helpers shared by the device kernels: per-image randomness, rounding, resampling, filtering."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import torch
import torch.nn.functional as F

from corruptions.draws import RecordingGenerator
from corruptions.spec import REFERENCE_SIZE


@dataclass
class DeviceBatch:
    """Per-image seeds of a batch, as numpy streams (host) and torch generators (device).

    ``rngs`` are the very generators the CPU kernels get (``numpy.random.default_rng(seed)``
    streams that also record drawn values): a kernel draws its few scalars (an angle, corners,
    boxes) from them on the host, so those draws and the stored ``drawn`` values equal the CPU
    kernel's. Per-pixel fields are drawn on the device from ``generator(i)``, a torch generator
    seeded with image ``i``'s seed: same distribution as numpy's, different values.
    """

    seeds: list[int]
    rngs: list[RecordingGenerator]
    device: torch.device
    _generators: dict[int, torch.Generator] = field(default_factory=dict)

    def generator(self, i: int) -> torch.Generator:
        if i not in self._generators:
            g = torch.Generator(device=self.device)
            g.manual_seed(self.seeds[i])
            self._generators[i] = g
        return self._generators[i]

    def randn(self, shape: tuple[int, ...]) -> torch.Tensor:
        """(N, *shape) standard normal float32, image i from its own generator."""
        return torch.stack([torch.randn(shape, generator=self.generator(i), device=self.device) for i in range(len(self.seeds))])

    def rand(self, shape: tuple[int, ...]) -> torch.Tensor:
        """(N, *shape) uniform [0, 1) float32, image i from its own generator."""
        return torch.stack([torch.rand(shape, generator=self.generator(i), device=self.device) for i in range(len(self.seeds))])


def size_scale(images: torch.Tensor) -> float:
    """Factor from parameters given at a 224-pixel short side to this (N, H, W, C) batch."""
    return min(images.shape[1], images.shape[2]) / REFERENCE_SIZE


def to_uint8(x: torch.Tensor) -> torch.Tensor:
    """Round half to even (as numpy's rint) and clip into uint8."""
    return x.round_().clamp_(0, 255).to(torch.uint8)


def nchw(images: torch.Tensor) -> torch.Tensor:
    """(N, H, W, C) uint8 -> (N, C, H, W) float32."""
    return images.permute(0, 3, 1, 2).float()


def nhwc_uint8(x: torch.Tensor) -> torch.Tensor:
    """(N, C, H, W) float -> (N, H, W, C) uint8, rounded, contiguous."""
    return to_uint8(x).permute(0, 2, 3, 1).contiguous()


def rgb_to_grey(images: torch.Tensor) -> torch.Tensor:
    """(N, H, W, 3) uint8 -> (N, H, W, 1) uint8, bit for bit as cv2.cvtColor(RGB2GRAY) (14-bit fixed point)."""
    x = images.to(torch.int32)
    grey = (x[..., 0] * 4899 + x[..., 1] * 9617 + x[..., 2] * 1868 + (1 << 13)) >> 14
    return grey.to(torch.uint8)[..., None]


def filter2d(x: torch.Tensor, kernel: np.ndarray) -> torch.Tensor:
    """cv2.filter2D (correlation, anchor at the centre, BORDER_REFLECT_101) of (N, C, H, W) float.

    A small kernel is split by SVD into the few separable passes that reproduce it to well under
    a grey level (a disk is nearly low-rank); each pass is a pair of banded matmuls, far cheaper
    on CPU than a dense depthwise convolution and as natural on a GPU.
    """
    u, s, vt = np.linalg.svd(np.asarray(kernel, np.float64))
    # a rank whose dropped singular values can move no output by more than 0.02 of a grey level
    tail = np.cumsum((s * np.abs(u).sum(0) * np.abs(vt).sum(1))[::-1])[::-1] * 255
    rank = max(1, int(np.argmax(np.append(tail, 0.0) < 0.02)))
    out = None
    for k in range(rank):
        term = separable_filter(x, vt[k] * s[k], u[:, k])
        out = term if out is None else out.add_(term)
    return out


def _border_index(i: np.ndarray, n: int, border: str) -> np.ndarray:
    """Source index of (possibly out-of-range) pixel positions ``i`` along a side of ``n`` pixels."""
    if border == "replicate":
        return np.clip(i, 0, n - 1)
    period = max(2 * n - 2, 1)  # reflect101: ... 2 1 | 0 1 2 ... n-1 | n-2 ...
    i = np.abs(i) % period
    return np.where(i >= n, period - i, i)


@lru_cache(maxsize=64)
def _band(n: int, taps: bytes, border: str, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """(n, n) matrix M with (M @ v)[o] = sum_k taps[k] * v[border(o + k - r)]: a 1-D correlation with the border folded in."""
    t = np.frombuffer(taps, np.float64)
    r = len(t) // 2
    out_idx = np.repeat(np.arange(n), len(t))
    src = _border_index(out_idx + np.tile(np.arange(len(t)) - r, n), n, border)
    m = np.zeros((n, n), np.float64)
    np.add.at(m, (out_idx, src), np.tile(t, n))
    return torch.as_tensor(m, dtype=dtype, device=device)


def separable_filter(x: torch.Tensor, kx: np.ndarray, ky: np.ndarray, border: str = "reflect101") -> torch.Tensor:
    """Row then column 1-D correlation of (..., H, W) float, border "reflect101" (cv2 default) or "replicate".

    Both passes are matmuls with a banded matrix holding the taps and the border rule: dense
    BLAS beats a depthwise convolution on CPU by far and needs no padded copy.
    """
    h, w = x.shape[-2:]
    mx = _band(w, np.ascontiguousarray(kx, np.float64).ravel().tobytes(), border, x.dtype, x.device)
    my = _band(h, np.ascontiguousarray(ky, np.float64).ravel().tobytes(), border, x.dtype, x.device)
    return torch.matmul(my, torch.matmul(x, mx.t()))


def remap(x: torch.Tensor, map_x: torch.Tensor, map_y: torch.Tensor, border: str) -> torch.Tensor:
    """cv2.remap(INTER_LINEAR) of (N, C, H, W) float at source pixel coordinates map_x, map_y ((N or 1, H', W')).

    ``border`` is "constant" (black, cv2.BORDER_CONSTANT 0), "replicate" or "reflect101". cv2 resolves
    coordinates to 1/32 pixel (INTER_BITS = 5) before interpolating; rounding the maps the same
    way keeps the two within a grey level of each other at sharp edges too.
    """
    h, w = x.shape[-2:]
    mx = torch.round(map_x * 32) / 32
    my = torch.round(map_y * 32) / 32
    # align_corners=True: -1 and 1 are the centres of the first and last pixels, as cv2's integer coordinates
    grid = torch.stack([mx * (2.0 / max(w - 1, 1)) - 1.0, my * (2.0 / max(h - 1, 1)) - 1.0], dim=-1)
    if grid.shape[0] != x.shape[0]:
        grid = grid.expand(x.shape[0], *grid.shape[1:])
    # grid_sample's reflection with align_corners=True mirrors about the edge pixel centres: BORDER_REFLECT_101
    padding = {"constant": "zeros", "replicate": "border", "reflect101": "reflection"}[border]
    return F.grid_sample(x, grid.to(x.dtype), mode="bilinear", padding_mode=padding, align_corners=True)


def _neighbour(i: torch.Tensor, n: int, border: str) -> tuple[torch.Tensor, torch.Tensor | None]:
    """In-range index of integer source positions ``i`` along a side of ``n``, and for the constant
    border the mask of positions inside the image (outside ones read black)."""
    if border == "constant":
        inside = (i >= 0) & (i < n)
        return i.clamp(0, n - 1), inside
    if border == "replicate":
        return i.clamp(0, n - 1), None
    period = max(2 * n - 2, 1)
    i = i.abs().remainder(period)
    return torch.where(i >= n, period - i, i), None


def remap_uint8(images: torch.Tensor, map_x: torch.Tensor, map_y: torch.Tensor, border: str) -> torch.Tensor:
    """cv2.remap(INTER_LINEAR) of (N, H, W, C) uint8 at source coordinates map_x, map_y ((N or 1, H', W') float).

    cv2's fixed point, reproduced: coordinates rounded to 1/32 pixel, bilinear weights in 1/1024
    and the sum floored after adding half. The four neighbours are gathered by flat index (no
    grid_sample): cheaper on CPU, and the same integer arithmetic on any device. ``border`` is
    "constant" (black), "replicate" or "reflect101", applied to each neighbour as cv2 does.
    """
    n, h, w, c = images.shape
    ix = torch.round(map_x * 32).to(torch.int64)
    iy = torch.round(map_y * 32).to(torch.int64)
    fx, fy = (ix & 31).to(torch.int32), (iy & 31).to(torch.int32)
    x0, y0 = ix >> 5, iy >> 5
    (xa, mxa), (xb, mxb) = _neighbour(x0, w, border), _neighbour(x0 + 1, w, border)
    (ya, mya), (yb, myb) = _neighbour(y0, h, border), _neighbour(y0 + 1, h, border)
    per_image = map_x.shape[0] > 1
    base = (torch.arange(n, device=images.device) * (h * w)).view(n, 1, 1) if per_image else 0
    flat = images.reshape(n * h * w, c) if per_image else images.reshape(n, h * w, c)

    def tap(yy: torch.Tensor, xx: torch.Tensor, my: torch.Tensor | None, mx: torch.Tensor | None) -> torch.Tensor:
        idx = (yy * w + xx + base).reshape(-1)
        v = (flat.index_select(0, idx) if per_image else flat.index_select(1, idx)).to(torch.int32)
        v = v.view(n, *map_x.shape[1:], c)
        if my is not None:  # constant border: a neighbour outside the image is black
            v = v * (my & mx).view(-1, *map_x.shape[1:], 1)
        return v

    wx, wy = fx[..., None], fy[..., None]
    top = tap(ya, xa, mya, mxa) * (32 - wx) + tap(ya, xb, mya, mxb) * wx
    bottom = tap(yb, xa, myb, mxa) * (32 - wx) + tap(yb, xb, myb, mxb) * wx
    return ((top * (32 - wy) + bottom * wy + 512) >> 10).to(torch.uint8)


def pixel_grid(h: int, w: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """(H, W) float32 x and y pixel coordinates (float64 products happen on the host where it matters)."""
    ys, xs = torch.meshgrid(torch.arange(h, dtype=torch.float32, device=device),
                            torch.arange(w, dtype=torch.float32, device=device), indexing="ij")
    return xs, ys

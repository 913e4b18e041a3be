"""Blur family on the device: Gaussian, defocus, motion, zoom and glass blur.

Motion blur draws its angle from the CPU kernel's numpy stream (exact); glass blur draws its
pixel swaps from a torch generator (same distribution).
"""

from __future__ import annotations

import cv2
import numpy as np
import torch

from corruptions.device.common import DeviceBatch, filter2d, pad, per_chunk, separable_filter, size_scale, to_uint8
from corruptions.device.registry import device_kernel
from corruptions.draws import record
from corruptions.kernels._imagenet_c import _linear_taps, motion_trail_kernel
from corruptions.kernels.blur import (
    DefocusParams,
    GaussianBlurParams,
    GlassBlurParams,
    MotionBlurParams,
    ZoomBlurParams,
    disk_kernel,
    zoom_factors,
)


def gaussian_taps(sigma: float) -> np.ndarray:
    """The 1-D kernel cv2.GaussianBlur(ksize=(0, 0)) uses on uint8 images: 2*round(3 sigma)+1 taps."""
    ksize = int(round(sigma * 3 * 2 + 1)) | 1
    return cv2.getGaussianKernel(ksize, sigma).ravel()


@device_kernel("gaussian_blur", exact=True)
def gaussian_blur(images: torch.Tensor, p: GaussianBlurParams, b: DeviceBatch) -> torch.Tensor:
    taps = gaussian_taps(p.sigma * size_scale(images))
    return to_uint8(separable_filter(images.float(), taps, taps))


@device_kernel("defocus_blur", exact=True)
def defocus_blur(images: torch.Tensor, p: DefocusParams, b: DeviceBatch) -> torch.Tensor:
    kernel = disk_kernel(max(0.5, p.radius * size_scale(images)), p.alias_blur)  # the CPU kernel's disk
    return to_uint8(filter2d(images.float(), kernel))


@device_kernel("motion_blur", exact=True, note="angle drawn from the CPU kernel's numpy stream")
def motion_blur(images: torch.Tensor, p: MotionBlurParams, b: DeviceBatch) -> torch.Tensor:
    s = size_scale(images)
    radius, sigma = float(round(p.radius * s)), float(max(p.sigma * s, 0.1))
    angles = [record(rng, "angle", float(rng.uniform(-45.0, 45.0))) for rng in b.rngs]
    kernels = [motion_trail_kernel(radius, sigma, angle)[0] for angle in angles]  # anchor at the centre
    r = max(k.shape[0] // 2 for k in kernels)
    h, w = images.shape[1:3]
    padded = pad(pad(images.float(), 1, r, "replicate"), 2, r, "replicate")
    out = torch.zeros(images.shape, dtype=torch.float32, device=images.device)
    # the trail is a line of at most 2 * radius + 1 taps in a mostly empty square: one shifted
    # copy per tap costs far less than a dense (or FFT) convolution with the square
    for i, k in enumerate(kernels):
        off = r - k.shape[0] // 2
        for u, v in zip(*np.nonzero(k)):
            out[i].add_(padded[i, off + u : off + u + h, off + v : off + v + w], alpha=float(k[u, v]))
    return to_uint8(out)


@device_kernel("zoom_blur", exact=True)
def zoom_blur(images: torch.Tensor, p: ZoomBlurParams, b: DeviceBatch) -> torch.Tensor:
    h, w = images.shape[1:3]
    factors = zoom_factors(p)
    taps = [(zoom_taps(h, float(z), images.device), zoom_taps(w, float(z), images.device)) for z in factors]
    return per_chunk(lambda part: _zoom_sum(part, taps, len(factors) + 1), images)


def _zoom_sum(images: torch.Tensor, taps: list, count: int) -> torch.Tensor:
    x = images.float()
    # the sum is kept transposed (N, W, H, C): each zoom's column gather then takes whole rows of
    # the transposed rows, not 3-float pixels strided along W (gathers of tiny blocks are slow)
    out_t = x.transpose(1, 2).contiguous()
    for ((y0, y1, fy), keep_h), ((x0, x1, fx), keep_w) in taps:
        # the CPU kernel's operations in its order (rows, then columns, float32), so the sums agree
        rows = _blend(x, 1, y0, y1, fy).transpose(1, 2).contiguous()
        out_t[:, :keep_w, :keep_h] += _blend(rows, 1, x0, x1, fx)
    out_t.div_(float(np.float32(count)))
    return to_uint8(out_t).transpose(1, 2).contiguous()


def _blend(x: torch.Tensor, dim: int, i0: torch.Tensor, i1: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
    """x[i0] * (1 - f) + x[i1] * f along ``dim`` of (N, A, B, C) float32, as clipped_zoom computes it."""
    shape = [1] * x.ndim
    shape[dim] = -1
    return x.index_select(dim, i0).mul_((1 - f).view(shape)).add_(x.index_select(dim, i1).mul_(f.view(shape)))


def zoom_taps(n: int, zoom: float, device: torch.device) -> tuple[tuple[torch.Tensor, torch.Tensor, torch.Tensor], int]:
    """clipped_zoom's linear taps along one side of ``n`` pixels as tensors, and how many outputs are kept."""
    crop = int(np.ceil(n / zoom))
    scaled = int(round(crop * zoom))
    keep = min(n, scaled)
    taps = _linear_taps(scaled, crop, (n - crop) // 2, keep)
    return tuple(torch.as_tensor(t, device=device) for t in taps), keep


@device_kernel("glass_blur", exact=False, note="pixel swaps drawn from a torch generator per image")
def glass_blur(images: torch.Tensor, p: GlassBlurParams, b: DeviceBatch) -> torch.Tensor:
    n, h, w, c = images.shape
    s = size_scale(images)
    delta = max(1, int(round(p.max_delta * s)))
    sigma = p.sigma * max(s, 0.25)
    r = max(1, int(4.0 * sigma + 0.5))  # gaussian_nearest: scikit-image's truncate 4
    taps = cv2.getGaussianKernel(2 * r + 1, sigma).ravel()
    blurred = separable_filter(images.float(), taps, taps, border="replicate")
    # the reference truncates the first blur to uint8 before shuffling
    x = blurred.clamp_(0, 255).floor_().to(torch.uint8).reshape(n * h * w, c)
    sources = swap_sources(h, w, delta, p.iterations, b)
    shuffled = x.index_select(0, sources.reshape(-1)).view(n, h, w, c)
    return to_uint8(separable_filter(shuffled.float(), taps, taps, border="replicate"))


def swap_sources(h: int, w: int, delta: int, iterations: int, b: DeviceBatch) -> torch.Tensor:
    """``sequential_swap_sources`` in torch for the whole batch ((N, H * W) flat source indices into
    the batch): the same chained copies, neighbours drawn from each image's generator.

    The visited pixels form the rectangle rows and columns (delta, side - delta], walked from the
    bottom-right, so draws, neighbours and chains are computed on that rectangle as a block.
    """
    n, dev = len(b.seeds), b.device
    base = (torch.arange(n, device=dev) * (h * w)).view(n, 1, 1)
    sources = (torch.arange(h * w, device=dev).view(1, h, w) + base).reshape(-1)
    rows, cols = h - 2 * delta, w - 2 * delta
    if rows <= 0 or cols <= 0:
        return sources.view(n, h * w)
    ys = torch.arange(delta + 1, h - delta + 1, device=dev).view(1, -1, 1)
    xs = torch.arange(delta + 1, w - delta + 1, device=dev).view(1, 1, -1)
    for _ in range(iterations):
        draws = [torch.randint(-delta, delta, (rows * cols, 2), generator=b.generator(i), device=dev) for i in range(n)]
        d = torch.stack(draws).view(n, rows, cols, 2).flip(1, 2)  # drawn in reverse raster order
        ny, nx = ys + d[..., 1], xs + d[..., 0]
        # a neighbour visited earlier (inside the rectangle, later in raster order) holds a copied
        # value: follow it to the end of its chain; any other neighbour is the value itself
        chain = (ny <= h - delta) & (nx <= w - delta) & (ny >= delta + 1) & (nx >= delta + 1) & ((ny > ys) | ((ny == ys) & (nx > xs)))
        nb = ny * w + nx + base
        own = ys * w + xs + base
        jump = torch.arange(n * h * w, device=dev).view(n, h, w)
        value = jump.clone()
        jump[:, delta + 1 : h - delta + 1, delta + 1 : w - delta + 1] = torch.where(chain, nb, own)
        value[:, delta + 1 : h - delta + 1, delta + 1 : w - delta + 1] = torch.where(chain, own, nb)
        jump, value = jump.view(-1), value.view(-1)
        while True:  # pointer doubling: every chain resolved in log2(length) passes
            nxt = jump.index_select(0, jump)
            if torch.equal(nxt, jump):
                break
            jump = nxt
        sources = sources.index_select(0, value.index_select(0, jump))
    return sources.view(n, h * w)

"""Blur family on the device: Gaussian, defocus, motion, zoom and glass blur.

Motion blur draws its angle from the CPU kernel's numpy stream (exact); glass blur draws its
pixel swaps from a torch generator (same distribution).
"""

from __future__ import annotations

import cv2
import numpy as np
import torch
import torch.nn.functional as F

from corruptions.device.common import DeviceBatch, filter2d, nchw, nhwc_uint8, separable_filter, size_scale, to_uint8
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
    return nhwc_uint8(separable_filter(nchw(images), taps, taps))


@device_kernel("defocus_blur", exact=True)
def defocus_blur(images: torch.Tensor, p: DefocusParams, b: DeviceBatch) -> torch.Tensor:
    kernel = disk_kernel(max(0.5, p.radius * size_scale(images)), p.alias_blur)  # the CPU kernel's disk
    return nhwc_uint8(filter2d(nchw(images), kernel))


@device_kernel("motion_blur", exact=True, note="angle drawn from the CPU kernel's numpy stream")
def motion_blur(images: torch.Tensor, p: MotionBlurParams, b: DeviceBatch) -> torch.Tensor:
    s = size_scale(images)
    radius, sigma = float(round(p.radius * s)), float(max(p.sigma * s, 0.1))
    angles = [record(rng, "angle", float(rng.uniform(-45.0, 45.0))) for rng in b.rngs]
    kernels = [motion_trail_kernel(radius, sigma, angle)[0] for angle in angles]  # anchor at the centre
    r = max(k.shape[0] // 2 for k in kernels)
    h, w = images.shape[1:3]
    padded = F.pad(nchw(images), (r, r, r, r), mode="replicate")
    out = torch.zeros((images.shape[0], images.shape[3], h, w), dtype=torch.float32, device=images.device)
    # the trail is a line of at most 2 * radius + 1 taps in a mostly empty square: one shifted
    # copy per tap costs far less than a dense (or FFT) convolution with the square
    for i, k in enumerate(kernels):
        off = r - k.shape[0] // 2
        for u, v in zip(*np.nonzero(k)):
            out[i].add_(padded[i, :, off + u : off + u + h, off + v : off + v + w], alpha=float(k[u, v]))
    return nhwc_uint8(out)


@device_kernel("zoom_blur", exact=True)
def zoom_blur(images: torch.Tensor, p: ZoomBlurParams, b: DeviceBatch) -> torch.Tensor:
    h, w = images.shape[1:3]
    x = images.float()
    out = x.clone()
    factors = zoom_factors(p)
    for z in factors:
        (y0, y1, fy), keep_h = zoom_taps(h, float(z), images.device)
        (x0, x1, fx), keep_w = zoom_taps(w, float(z), images.device)
        # the CPU kernel's operations in its order (rows, then columns, float32), so the sums agree
        rows = x.index_select(1, y0) * (1 - fy).view(1, -1, 1, 1) + x.index_select(1, y1) * fy.view(1, -1, 1, 1)
        layer = rows.index_select(2, x0) * (1 - fx).view(1, 1, -1, 1) + rows.index_select(2, x1) * fx.view(1, 1, -1, 1)
        out[:, :keep_h, :keep_w] += layer
    return to_uint8(out.div_(float(np.float32(len(factors) + 1))))


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
    blurred = separable_filter(nchw(images), taps, taps, border="replicate")
    # the reference truncates the first blur to uint8 before shuffling
    x = blurred.clamp_(0, 255).floor_().to(torch.uint8).permute(0, 2, 3, 1).reshape(n * h * w, c)
    sources = torch.stack([swap_sources(h, w, delta, p.iterations, b.generator(i)) for i in range(n)])
    sources += (torch.arange(n, device=images.device) * (h * w))[:, None]
    shuffled = x.index_select(0, sources.reshape(-1)).view(n, h, w, c)
    return nhwc_uint8(separable_filter(nchw(shuffled), taps, taps, border="replicate"))


def swap_sources(h: int, w: int, delta: int, iterations: int, g: torch.Generator) -> torch.Tensor:
    """``sequential_swap_sources`` in torch: the same chained copies, neighbours drawn from ``g``."""
    dev = g.device
    sources = torch.arange(h * w, device=dev)
    hs = torch.arange(h - delta, delta, -1, device=dev)
    ws = torch.arange(w - delta, delta, -1, device=dev)
    if hs.numel() == 0 or ws.numel() == 0:
        return sources
    visited_idx = (hs[:, None] * w + ws[None, :]).reshape(-1)
    visited = torch.zeros(h * w, dtype=torch.bool, device=dev)
    visited[visited_idx] = True
    for _ in range(iterations):
        d = torch.randint(-delta, delta, (visited_idx.numel(), 2), generator=g, device=dev)
        nb = visited_idx + d[:, 1] * w + d[:, 0]
        chain = visited[nb] & (nb > visited_idx)
        jump = torch.arange(h * w, device=dev)
        value = torch.arange(h * w, device=dev)
        jump[visited_idx[chain]] = nb[chain]
        value[visited_idx[~chain]] = nb[~chain]
        while True:  # pointer doubling: every chain resolved in log2(length) passes
            nxt = jump[jump]
            if torch.equal(nxt, jump):
                break
            jump = nxt
        sources = sources[value[jump]]
    return sources

"""Blur family on the device: Gaussian, defocus, motion, zoom and glass blur.

Motion blur draws its angle from the CPU kernel's numpy stream (exact); glass blur draws its
pixel swaps from a torch generator (same distribution).
"""

from __future__ import annotations

from functools import lru_cache

import cv2
import numpy as np
import torch

from domainbench.corruptions.device.common import (
    DeviceBatch,
    as_float,
    filter2d,
    nhwc_uint8,
    pad,
    planar_separable_filter,
    rint_to_uint8_,
    separable_filter,
    size_scale,
    to_uint8,
    valid_correlate,
)
from domainbench.corruptions.device.registry import device_kernel
from domainbench.corruptions.draws import record
from domainbench.corruptions.kernels._imagenet_c import _linear_taps, motion_trail_kernel
from domainbench.corruptions.kernels.blur import (
    DefocusParams,
    GaussianBlurParams,
    GlassBlurParams,
    MotionBlurParams,
    ZoomBlurParams,
    defocus_kernel,
    supersampled_shape,
    zoom_factors,
)


def gaussian_taps(sigma: float) -> np.ndarray:
    """The 1-D kernel cv2.GaussianBlur(ksize=(0, 0)) uses on uint8 images: 2*round(3 sigma)+1 taps."""
    ksize = int(round(sigma * 3 * 2 + 1)) | 1
    return cv2.getGaussianKernel(ksize, sigma).ravel()


@device_kernel("gaussian_blur", exact=True)
def gaussian_blur(images: torch.Tensor, p: GaussianBlurParams, b: DeviceBatch) -> torch.Tensor:
    taps = gaussian_taps(p.sigma * size_scale(images))
    return nhwc_uint8(planar_separable_filter(planes(images), taps, taps))


@device_kernel("defocus_blur", exact=True, cpu_chunk=4)
def defocus_blur(images: torch.Tensor, p: DefocusParams, b: DeviceBatch) -> torch.Tensor:
    scale = size_scale(images)
    parts = disk_parts(p.radius * scale, p.alias_blur) if scale >= 1 else None  # below 224: an area-sampled disk
    if parts is None:
        return to_uint8(filter2d(images.float(), defocus_kernel(p.radius, p.alias_blur, scale)))  # the CPU kernel's
    return to_uint8(disk_blur(images, *parts))


#: disk sums are taken in int16 on pixel values less 128: exact while the disk has at most 255 pixels
_DISK_MAX_PIXELS = 255


@lru_cache(maxsize=32)
def disk_parts(radius: float, alias_blur: float) -> tuple[list[int], float, np.ndarray] | None:
    """The CPU kernel's ``disk_kernel`` as its parts: per row offset -r..r the half-width of the
    disk's run of pixels in that row, the disk's normalisation, and the 1-D taps of the softening
    Gaussian; None when the disk comes within the Gaussian's reach of the edge of its grid, where
    cv2.GaussianBlur's reflection makes the kernel differ from the disk convolved with the Gaussian.
    """
    half = max(8, int(np.ceil(radius)))
    grid = np.arange(-half, half + 1)
    disk = (grid[:, None] ** 2 + grid[None, :] ** 2) <= radius**2  # the CPU kernel's test
    g = cv2.getGaussianKernel(3 if radius <= 8 else 5, alias_blur).ravel()
    rows = np.flatnonzero(disk.any(axis=1)) - half
    reach = int(rows.max())
    # GaussianBlur's reflect101 would mirror disk rows back inside the grid
    if reach + len(g) // 2 >= half or disk.sum() > _DISK_MAX_PIXELS:
        return None
    widths = [int(disk[dy + half].sum()) // 2 for dy in range(-reach, reach + 1)]  # each row's run is -w..w
    return widths, float(np.float32(1.0) / np.float32(disk.sum())), g


def disk_blur(images: torch.Tensor, widths: list[int], scale: float, g: np.ndarray) -> torch.Tensor:
    """Correlation of (N, H, W, C) uint8 with a disk (row runs of half-widths ``widths``, times
    ``scale``) softened by the separable taps ``g``, border reflect101, as cv2.filter2D does with
    the disk kernel; float32.

    A disk is a stack of horizontal runs: run sums of growing width are built one radius at a time
    (two shifted adds each) and every row offset adds its run's sum once, about 4 r passes of the
    image in all, where the SVD of the disk needs ~5 full separable filters. The sums are exact
    integers, taken in int16 on values less 128 (half the bytes of float32: each pass 2x faster on
    a CPU); only the softening is float.
    """
    n, h, w, c = images.shape
    reach, soft = len(widths) // 2, len(g) // 2
    margin = reach + soft
    padded = pad(pad(images, 1, margin, "reflect101"), 2, margin, "reflect101").to(torch.int16).sub_(128)
    rows, cols = h + 2 * soft, w + 2 * soft  # the disk's output keeps the softening's margin
    runs = padded.narrow(2, reach, cols).clone()  # half-width 0 (one pixel), every padded row
    sums: torch.Tensor | None = None
    for width in range(max(widths) + 1):
        if width:
            runs.add_(padded.narrow(2, reach - width, cols)).add_(padded.narrow(2, reach + width, cols))
        for dy in (dy for dy, row_width in enumerate(widths) if row_width == width):
            if sums is None:
                sums = runs.narrow(1, dy, rows).clone()
            else:
                sums.add_(runs.narrow(1, dy, rows))
    assert sums is not None
    # the taps sum to one, so the 128 taken off every pixel comes back as 128 after the normalisation
    out = valid_correlate(valid_correlate(sums.float(), g, 1), g * scale, 2)
    return out.add_(128.0)


@device_kernel("motion_blur", exact=True, note="angle drawn from the CPU kernel's numpy stream")
def motion_blur(images: torch.Tensor, p: MotionBlurParams, b: DeviceBatch) -> torch.Tensor:
    s = size_scale(images)
    radius, sigma = float(round(p.radius * s)), float(max(p.sigma * s, 0.1))
    angles = [record(rng, "angle", float(rng.uniform(-45.0, 45.0))) for rng in b.rngs]
    return to_uint8(motion_trails(images.float(), radius, sigma, angles))


def motion_trails(x: torch.Tensor, radius: float, sigma: float, angles: list[float]) -> torch.Tensor:
    """ImageNet-C's one-sided motion trail of (N, H, W, ...) float, image i along angles[i] (BORDER_REPLICATE).

    Each image has its own kernel (``motion_trail_kernel``, built on the host, anchor at the
    centre), but the trail is a line of at most 2 * radius + 1 taps in a mostly empty square: one
    shifted copy per tap costs far less than a dense (or FFT) convolution with the square.
    """
    kernels = [motion_trail_kernel(float(radius), float(sigma), float(a))[0] for a in angles]
    r = max(k.shape[0] // 2 for k in kernels)
    h, w = x.shape[1:3]
    padded = pad(pad(x, 1, r, "replicate"), 2, r, "replicate")
    out = torch.zeros_like(x)
    for image, source, k in zip(out, padded, kernels):
        off = r - k.shape[0] // 2  # this kernel's anchor inside the common padding
        for u, v in zip(*np.nonzero(k)):
            image.add_(source[off + u : off + u + h, off + v : off + v + w], alpha=float(k[u, v]))
    return out


# its 13+ zoomed float copies per image only stay in cache two images at a time (8: 3x slower)
@device_kernel("zoom_blur", exact=True, cpu_chunk=2)
def zoom_blur(images: torch.Tensor, p: ZoomBlurParams, b: DeviceBatch) -> torch.Tensor:
    h, w = images.shape[1:3]
    factors = zoom_factors(p)
    taps = [(zoom_taps(h, float(z), images.device), zoom_taps(w, float(z), images.device)) for z in factors]
    return _zoom_sum(images, taps, len(factors) + 1)


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
    h, w = images.shape[1:3]
    big = supersampled_shape(h, w)
    if big is None:
        return to_uint8(_glass_blur(images.float(), p, b))
    # the CPU kernel's enlargement and reduction (cv2.resize), as products with cv2's own weights
    up = resize(images.float(), resize_weights(big[0], h, cv2.INTER_LINEAR), resize_weights(big[1], w, cv2.INTER_LINEAR))
    return to_uint8(resize(_glass_blur(up, p, b), resize_weights(h, big[0], cv2.INTER_AREA), resize_weights(w, big[1], cv2.INTER_AREA)))


def _glass_blur(x: torch.Tensor, p: GlassBlurParams, b: DeviceBatch) -> torch.Tensor:
    """glass_blur of (N, H, W, C) float of at least 224 pixels, float32 (the CPU kernel's ``_glass_blur``)."""
    n, h, w, c = x.shape
    s = size_scale(x)
    delta = max(1, int(round(p.max_delta * s)))
    sigma = p.sigma * s
    r = max(1, int(4.0 * sigma + 0.5))  # gaussian_nearest: scikit-image's truncate 4
    taps = cv2.getGaussianKernel(2 * r + 1, sigma).ravel()
    blurred = separable_filter(x, taps, taps, border="replicate")
    # the reference truncates the first blur to uint8 before shuffling
    flat = rint_to_uint8_(blurred.clamp_(0, 255).floor_()).reshape(n * h * w, c)  # whole numbers: the fast narrowing
    sources = swap_sources(h, w, delta, p.iterations, b)
    shuffled = flat.index_select(0, sources.reshape(-1)).view(n, h, w, c)
    return separable_filter(shuffled.float(), taps, taps, border="replicate")


@lru_cache(maxsize=32)
def resize_weights(n_out: int, n_in: int, interpolation: int) -> np.ndarray:
    """(n_out, n_in) weights of cv2.resize along one axis of a float32 image (it is separable):
    the resize of the identity."""
    return cv2.resize(np.eye(n_in, dtype=np.float32), (n_in, n_out), interpolation=interpolation)


def resize(x: torch.Tensor, rows: np.ndarray, cols: np.ndarray) -> torch.Tensor:
    """(N, H, W, C) float resized by the per-axis weights ``rows`` (H', H) and ``cols`` (W', W)."""
    r = torch.as_tensor(rows, device=x.device)
    c = torch.as_tensor(cols, device=x.device)
    return torch.einsum("jw,niwc->nijc", c, torch.einsum("ih,nhwc->niwc", r, x)).contiguous()


def planes(images: torch.Tensor) -> torch.Tensor:
    """(N, H, W, C) uint8 -> contiguous planar (N, C, H, W) float32."""
    return as_float(images.permute(0, 3, 1, 2))


def swap_sources(h: int, w: int, delta: int, iterations: int, b: DeviceBatch) -> torch.Tensor:
    """``sequential_swap_sources`` in torch for the whole batch ((N, H * W) int32 flat source indices
    into the batch): the same chained copies, neighbour offsets drawn from each image's generator.

    The visited pixels form the rectangle rows and columns (delta, side - delta]; offsets, neighbours
    and chains are computed on that rectangle as a block.
    """
    n, dev = len(b.seeds), b.device
    sources = torch.arange(n * h * w, dtype=torch.int32, device=dev)
    rows, cols = h - 2 * delta, w - 2 * delta
    if rows <= 0 or cols <= 0:
        return sources.view(n, h * w)
    for _ in range(iterations):
        # the offsets are i.i.d. per pixel, so which pixel gets which draw does not change the
        # distribution: drawn in raster order, not the reference's reverse order (no flip pass)
        dy, dx = swap_offsets(b, (rows, cols), delta)
        sources = apply_swaps(sources.view(n, h, w), dy, dx, delta).view(-1)
    return sources.view(n, h * w)


def swap_offsets(b: DeviceBatch, shape: tuple[int, ...], delta: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Two (N, *shape) int32 fields of integers uniform on [-delta, delta), image i from its own generator.

    Each 32-bit half of a 64-bit draw gives one value of each field (its bits 0-14 and 15-29:
    bit 31 of every other half is always 0), scaled to the range in int32 lanes (widening int16
    costs more than the arithmetic): a quarter of the generator work of ``randint``. Exact where
    2 * delta is a power of two (deltas 1, 2, 4); otherwise each value's probability is off by
    at most 2 * delta / 2**15.
    """
    n, count = len(b.seeds), int(np.prod(shape))
    words = torch.empty((n, -(-count // 2)), dtype=torch.int64, device=b.device)
    for i, row in enumerate(words):
        row.random_(generator=b.generator(i))
    halves = words.view(torch.int32)[:, :count]
    return tuple(_scaled(u15, delta).view(n, *shape) for u15 in (halves & 0x7FFF, (halves >> 15).bitwise_and_(0x7FFF)))


def _scaled(u15: torch.Tensor, delta: int) -> torch.Tensor:
    """int32 values uniform on [0, 2**15) -> integers on [-delta, delta), in place."""
    return u15.mul_(2 * delta).bitwise_right_shift_(15).sub_(delta)


def apply_swaps(sources: torch.Tensor, dy: torch.Tensor, dx: torch.Tensor, delta: int) -> torch.Tensor:
    """One sweep of ImageNet-C's sequential copies over (N, H, W) int32 flat ``sources``, with the
    rectangle's offsets ``dy``, ``dx`` ((N, H - 2 delta, W - 2 delta) each).

    A neighbour visited earlier (inside the rectangle, later in raster order) holds a copied
    value: it is followed to the end of its chain (pointer doubling, log2(length) passes); any
    other neighbour still holds its own value.
    """
    n, h, w = sources.shape
    rows, cols = dy.shape[1:]
    dev = sources.device
    ys = torch.arange(rows, dtype=torch.int32, device=dev).view(1, -1, 1)
    xs = torch.arange(cols, dtype=torch.int32, device=dev).view(1, 1, -1)
    step = dy * cols + dx  # with nx inside, |dx| < cols: a positive step is a neighbour later in raster order
    nx = xs + dx
    chain = (step > 0) & (ys + dy < rows) & (nx < cols) & (nx >= 0)
    here = torch.arange(n * rows * cols, dtype=torch.int32, device=dev).view(n, rows, cols)
    jump = torch.where(chain, step.add_(here), here).view(-1)
    while True:
        nxt = jump.index_select(0, jump)
        if torch.equal(nxt, jump):
            break
        jump = nxt
    # every chain ends at a pixel whose neighbour still held its own value: that neighbour's source
    base = (torch.arange(n, dtype=torch.int32, device=dev) * (h * w)).view(-1, 1, 1)
    own = base + (ys + delta + 1) * w + (xs + delta + 1)
    neighbour = (own + (dy * w + dx)).view(-1).index_select(0, jump)
    out = sources.clone()
    out[:, delta + 1 : h - delta + 1, delta + 1 : w - delta + 1] = sources.view(-1).index_select(0, neighbour).view(n, rows, cols)
    return out

"""Tensor helpers shared by the device kernels: per-image randomness, rounding, resampling, filtering."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from domainbench.corruptions.draws import RecordingGenerator
from domainbench.corruptions.spec import side_scale


@dataclass
class DeviceBatch:
    """Per-image seeds of a batch, as numpy streams (host) and torch generators (device).

    ``rngs`` are the very generators the CPU kernels get (``numpy.random.default_rng(seed)``
    streams that also record drawn values, with the caller's ``fixed`` values): a kernel draws
    its few scalars (an angle, corners, boxes) from them on the host, so those draws and the
    stored ``drawn`` values equal the CPU kernel's. They are built on first use: most kernels
    draw nothing on the host. Per-pixel fields are drawn on the device from ``generator(i)``, a
    torch generator seeded with image ``i``'s seed: same distribution as numpy's, different values.
    """

    seeds: list[int]
    fixed: list[dict[str, Any]]
    device: torch.device
    _rngs: list[RecordingGenerator] | None = None
    _generators: dict[int, torch.Generator] = field(default_factory=dict)

    @property
    def rngs(self) -> list[RecordingGenerator]:
        if self._rngs is None:
            self._rngs = [RecordingGenerator(s, f) for s, f in zip(self.seeds, self.fixed)]
        return self._rngs

    def part(self, start: int, stop: int) -> DeviceBatch:
        """Images start:stop as a batch of their own (their streams are shared, not re-seeded, when
        already built); hand it back with ``merge`` so its draws count as this batch's."""
        rngs = self._rngs[start:stop] if self._rngs is not None else None
        return DeviceBatch(self.seeds[start:stop], self.fixed[start:stop], self.device, _rngs=rngs)

    def merge(self, start: int, part: DeviceBatch) -> None:
        if part._rngs is not None:
            self.rngs[start : start + len(part._rngs)] = part._rngs

    def drawn(self) -> list[dict[str, Any]]:
        """What each image's numpy stream recorded (nothing where the kernel never used them)."""
        return [rng.drawn for rng in self._rngs] if self._rngs is not None else [{} for _ in self.seeds]

    def generator(self, i: int) -> torch.Generator:
        if i not in self._generators:
            g = torch.Generator(device=self.device)
            g.manual_seed(self.seeds[i])
            self._generators[i] = g
        return self._generators[i]

    def randn(self, shape: tuple[int, ...]) -> torch.Tensor:
        """(N, *shape) standard normal float32, image i from its own generator."""
        out = empty((len(self.seeds), *shape), torch.float32, self.device)
        for i, values in enumerate(out):
            values.normal_(generator=self.generator(i))  # into the batch tensor: no per-image tensors to stack
        return out

    def rand(self, shape: tuple[int, ...]) -> torch.Tensor:
        """(N, *shape) uniform [0, 1) float32, image i from its own generator."""
        out = empty((len(self.seeds), *shape), torch.float32, self.device)
        for i, values in enumerate(out):
            values.uniform_(generator=self.generator(i))
        return out

    def uniform15(self, shape: tuple[int, ...]) -> torch.Tensor:
        """(N, *shape) int16 uniform on [0, 2**15), image i from its own generator: a uniform in 1/32768 steps.

        For masks (``u < amount``): one 64-bit draw fills four values, several times fewer draws
        than ``rand``, whose float32 draws cost ~3x numpy's on a CPU. The hit probability
        becomes round(amount * 2**15) / 2**15, within 1.5e-5 of ``amount`` (see ``below``).
        """
        count = int(np.prod(shape))
        words = empty((len(self.seeds), -(-count // 4)), torch.int64, self.device)
        for i, row in enumerate(words):
            row.random_(generator=self.generator(i))  # [0, 2**63): the top bit of every fourth int16 is 0
        lanes = words.view(torch.int16)
        lanes = lanes if lanes.shape[1] == count else lanes[:, :count].contiguous()
        return lanes.bitwise_and_(0x7FFF).view(len(self.seeds), *shape)


def threshold15(probability: float) -> int:
    """``probability`` in the 1/32768 steps of ``DeviceBatch.uniform15``: ``u15 < threshold15(p)`` has probability ~p."""
    return int(round(probability * (1 << 15)))


def below(u15: torch.Tensor, probability: float) -> torch.Tensor:
    """``u < probability`` for ``DeviceBatch.uniform15`` values, as a bool mask."""
    return u15 < threshold15(probability)


def size_scale(images: torch.Tensor) -> float:
    """Factor from parameters given at a 224-pixel short side to this (N, H, W, C) batch."""
    return side_scale(images.shape[1], images.shape[2])


_NUMPY_DTYPES = {torch.uint8: np.uint8, torch.int16: np.int16, torch.int32: np.int32, torch.int64: np.int64, torch.float32: np.float32}


def empty(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """``torch.empty``; on a CPU, memory from numpy's allocator.

    numpy asks Linux for transparent huge pages for large arrays; torch's CPU allocator does so
    only under THP_MEM_ALLOC_ENABLE=1. A batch (40 MB at 256 x 224 x 224 x 3) is fresh memory
    every call, and first touching it in 4 KB pages costs several times a uint8 kernel's own work.
    """
    if device.type == "cpu" and dtype in _NUMPY_DTYPES:
        return torch.from_numpy(np.empty(shape, dtype=_NUMPY_DTYPES[dtype]))
    return torch.empty(shape, dtype=dtype, device=device)


def as_float(images: torch.Tensor) -> torch.Tensor:
    """float32 copy of a tensor (same shape, contiguous) in memory from ``empty``."""
    return empty(tuple(images.shape), torch.float32, images.device).copy_(images)


#: float32 has no fraction bits left at 2**23: adding it rounds a value in [0, 2**23) half to even
_ROUNDING_BIAS = float(1 << 23)


def rint_bits_(x: torch.Tensor) -> torch.Tensor:
    """Float ``x`` rounded half to even (numpy's rint) and clipped to [0, 255], using up ``x``, as
    a tensor whose low byte is the uint8 result (``copy_`` it into uint8, or ``rint_to_uint8_``).

    For float32, after clipping x + 2**23 holds the rounded value in its low mantissa bits, so the
    int32 view of its bits narrows to the result: a clamp, an add and a cast that only narrows,
    where round_ and torch's float->uint8 cast (not vectorised on CPU: 0.12 against 0.02 ms per
    224x224 RGB image) take more passes. Other dtypes take the plain route.
    """
    if x.dtype != torch.float32:
        return x.round_().clamp_(0, 255)
    return x.clamp_(0, 255).add_(_ROUNDING_BIAS).view(torch.int32)


def rint_to_uint8_(x: torch.Tensor) -> torch.Tensor:
    return rint_bits_(x).to(torch.uint8)


def to_uint8(x: torch.Tensor) -> torch.Tensor:
    """Round half to even (as numpy's rint) and clip into uint8 (contiguous, in memory from ``empty``)."""
    return empty(tuple(x.shape), torch.uint8, x.device).copy_(rint_bits_(x))


def nchw(images: torch.Tensor) -> torch.Tensor:
    """(N, H, W, C) uint8 -> (N, C, H, W) float32 (a view of channels-last memory, as ``permute().float()`` gives)."""
    return as_float(images).permute(0, 3, 1, 2)


def nhwc_uint8(x: torch.Tensor) -> torch.Tensor:
    """(N, C, H, W) float -> (N, H, W, C) uint8, rounded, contiguous."""
    n, c, h, w = x.shape
    planes = rint_bits_(x).to(torch.uint8)  # narrowed while still planar: a contiguous cast
    out = empty((n, h, w, c), torch.uint8, x.device)
    # one strided copy per channel: on a CPU 2.5x faster than one permuted copy that also narrows
    for channel in range(c):
        out[..., channel].copy_(planes[:, channel])
    return out


def rgb_to_grey(images: torch.Tensor) -> torch.Tensor:
    """(N, H, W, 3) uint8 -> (N, H, W, 1) uint8, bit for bit as cv2.cvtColor(RGB2GRAY) (14-bit fixed point)."""
    x = images.to(torch.int32)
    grey = (x[..., 0] * 4899 + x[..., 1] * 9617 + x[..., 2] * 1868 + (1 << 13)) >> 14
    return grey.to(torch.uint8)[..., None]


def filter2d(x: torch.Tensor, kernel: np.ndarray, border: str = "reflect101") -> torch.Tensor:
    """cv2.filter2D (correlation, anchor at the centre) of (N, H, W, C) float, border "reflect101"
    (cv2's default BORDER_REFLECT_101) or "replicate".

    The kernel is split by SVD into the few separable passes that reproduce it to a small
    fraction of a grey level (a disk has rank ~5): cheaper on CPU than a dense depthwise conv.
    """
    u, s, vt = np.linalg.svd(np.asarray(kernel, np.float64))
    # worst-case output change (grey levels) of dropping the terms from each rank on
    tail = np.cumsum((s * np.abs(u).sum(0) * np.abs(vt).sum(1))[::-1])[::-1] * 255
    rank = max(1, int(np.argmax(np.append(tail, 0.0) < 0.01)))
    out = separable_filter(x, vt[0] * s[0], u[:, 0], border)
    for k in range(1, rank):
        out.add_(separable_filter(x, vt[k] * s[k], u[:, k], border))
    return out


def pad(x: torch.Tensor, dim: int, r: int, border: str) -> torch.Tensor:
    """``x`` extended by ``r`` pixels on both sides of ``dim`` by the border rule (one copy, any layout)."""
    n = x.shape[dim]
    lo = _border_index(torch.arange(-r, 0, device=x.device), n, border)
    hi = _border_index(torch.arange(n, n + r, device=x.device), n, border)
    return torch.cat([x.index_select(dim, lo), x, x.index_select(dim, hi)], dim=dim)


def correlate(x: torch.Tensor, taps: np.ndarray, dim: int, border: str) -> torch.Tensor:
    """1-D correlation of ``x`` along ``dim``, anchor at the centre."""
    return valid_correlate(pad(x, dim, len(taps) // 2, border), taps, dim)


def valid_correlate(x: torch.Tensor, taps: np.ndarray, dim: int) -> torch.Tensor:
    """1-D correlation along ``dim`` without a border: len(taps) - 1 fewer entries there."""
    n = x.shape[dim] - len(taps) + 1
    out = x.narrow(dim, 0, n) * float(taps[0])
    for k in range(1, len(taps)):
        out.add_(x.narrow(dim, k, n), alpha=float(taps[k]))
    return out


def separable_filter(x: torch.Tensor, kx: np.ndarray, ky: np.ndarray, border: str = "reflect101") -> torch.Tensor:
    """Row then column 1-D correlation of (N, H, W, C) float (border as ``filter2d``).

    Rows: one fused multiply-add of a shifted view per tap (on the few images of a CPU sub-batch), in the
    images' own NHWC layout (a shift along W moves contiguous runs of C values): measured 1.5-5x
    faster on CPU than a depthwise conv2d. Columns: each image is an (H, W * C) matrix, so the
    column pass is a left product with a banded matrix, with no transpose (``_filter_columns``).
    """
    kx, ky = np.ravel(kx), np.ravel(ky)
    return _filter_columns(correlate(x, kx, 2, border), ky, border)


def planar_separable_filter(x: torch.Tensor, kx: np.ndarray, ky: np.ndarray, border: str = "reflect101") -> torch.Tensor:
    """``separable_filter`` of contiguous planar (N, C, H, W) float: both passes banded products.

    In planes the row pass is a right product with the band as well (no transpose), so it runs
    at GEMM speed like the column pass (measured 1.1-1.3x faster on CPU than ``separable_filter``
    for 9-19 taps, the conversion to and from planes included).
    """
    n, c, h, w = x.shape
    rows = x.reshape(n * c * h, w)
    out = empty(tuple(rows.shape), rows.dtype, rows.device)
    for o0, o1, i0, block in _band_blocks(tuple(float(t) for t in np.ravel(kx)), w, border):
        torch.mm(rows[:, i0 : i0 + block.shape[1]], block.to(x.device).t(), out=out[:, o0:o1])
    return _filter_columns(out.view(n * c, h, w), np.ravel(ky), border).view(n, c, h, w)


#: output rows per block of the banded column filter: a block reads 32 + len(taps) - 1 input rows,
#: so the product does ~1.5-2x the multiply-adds of the taps alone (measured best of 16 to 56)
BAND_BLOCK = 32


def _filter_columns(x: torch.Tensor, taps: np.ndarray, border: str) -> torch.Tensor:
    """1-D correlation of (N, H, W, C) float along H as products of band blocks with (rows, W * C) slices.

    A GEMM keeps its operands in cache where a shifted multiply-add per tap streams the image
    once per tap (measured 1.3-1.6x faster for 9-19 taps on CPU); the border is folded into the
    first and last blocks' weights, so no padded copy is made.
    """
    n, h = x.shape[:2]
    rows = x.reshape(n, h, -1)
    out = empty(tuple(rows.shape), rows.dtype, rows.device)
    for o0, o1, i0, block in _band_blocks(tuple(float(t) for t in taps), h, border):
        block = block.to(x.device)
        torch.matmul(block, rows[:, i0 : i0 + block.shape[1]], out=out[:, o0:o1])
    return out.view(x.shape)


@functools.lru_cache(maxsize=64)
def _band_blocks(taps: tuple[float, ...], n: int, border: str) -> list[tuple[int, int, int, torch.Tensor]]:
    """(first output, end output, first input, float32 weights) per block of BAND_BLOCK outputs of a
    correlation with ``taps`` along a side of ``n`` pixels, border sources' weights summed in."""
    r = len(taps) // 2
    full = band_matrix(taps, n, border)
    blocks = []
    for o0 in range(0, n, BAND_BLOCK):
        o1 = min(n, o0 + BAND_BLOCK)
        # a border rule maps a position at most r pixels outside the side to one at most r inside
        i0, i1 = max(0, o0 - r), min(n, o1 + r)
        blocks.append((o0, o1, i0, torch.from_numpy(full[o0:o1, i0:i1].astype(np.float32))))
    return blocks


def band_matrix(taps: Sequence[float], n: int, border: str) -> np.ndarray:
    """(n, n) float64 M with M @ v the correlation of v with ``taps`` (anchor at the centre) along a
    side of n pixels, the weights of sources outside it summed into their border rule's pixel."""
    r = len(taps) // 2
    full = np.zeros((n, n), np.float64)
    for k, t in enumerate(taps):
        np.add.at(full, (np.arange(n), _border_index(torch.arange(n) + (k - r), n, border).numpy()), t)
    return full


def _border_index(i: torch.Tensor, n: int, border: str) -> torch.Tensor:
    """Source index of (possibly out-of-range) integer positions ``i`` along a side of ``n`` pixels."""
    if border == "replicate":
        return i.clamp(0, n - 1)
    period = max(2 * n - 2, 1)  # reflect101: ... 2 1 | 0 1 2 ... n-1 | n-2 ...
    i = i.abs().remainder(period)
    return torch.where(i >= n, period - i, i)


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


def _linear_axis(coords: torch.Tensor, n: int, border: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """cv2.remap's taps along one axis: the two source indices (border applied) and the 1/32 weight of the second."""
    fixed = torch.round(coords * 32).to(torch.int64)  # cv2's INTER_BITS = 5
    i0 = fixed >> 5
    return _border_index(i0, n, border), _border_index(i0 + 1, n, border), (fixed & 31).to(torch.int32)


def separable_remap(images: torch.Tensor, xx: torch.Tensor, yy: torch.Tensor, border: str) -> torch.Tensor:
    """cv2.remap(INTER_LINEAR) of (N, H, W, C) uint8 with maps that vary along one axis each:
    map_x[y, x] = xx[:, x], map_y[y, x] = yy[:, y] ((N, W') and (N, H') float32; "replicate" or "reflect101").

    Bilinear sampling is then a column gather and blend followed by a row gather and blend, in
    cv2's fixed point (1/32 pixel, weights summing to 1024, floored after adding half): the sum
    is an exact integer whichever axis goes first, so the result is cv2's to the bit.
    """
    n, h, w, c = images.shape
    y0, y1, fy = _linear_axis(yy, h, border)
    x0, x1, fx = _linear_axis(xx, w, border)
    flat = images.reshape(n, h, w * c)
    lanes = torch.arange(c, device=images.device)

    def columns(index: torch.Tensor) -> torch.Tensor:
        # single uint8 values of the (H, W * C) rows: several times faster than gathering C-value blocks
        at = (index[:, :, None] * c + lanes).view(n, 1, -1).expand(n, h, -1)
        return torch.gather(flat, 2, at).to(torch.int16)

    # columns blended in 1/32 steps: at most 255 * 32, exact in int16; per-column weights repeated over C
    fxc = fx.to(torch.int16).repeat_interleave(c, dim=1)[:, None, :]
    blended = columns(x0).mul_(32 - fxc).add_(columns(x1).mul_(fxc)).view(n * h, -1)
    base = (torch.arange(n, device=images.device) * h)[:, None]
    fy = fy[..., None]
    top = blended.index_select(0, (y0 + base).view(-1)).view(n, -1, blended.shape[1]).to(torch.int32).mul_(32 - fy)
    top += blended.index_select(0, (y1 + base).view(-1)).view(n, -1, blended.shape[1]).to(torch.int32).mul_(fy)
    out = top.add_(512).bitwise_right_shift_(10).to(torch.uint8)
    return out.view(n, yy.shape[1], xx.shape[1], c)


def shared_taps(map_x: np.ndarray, map_y: np.ndarray, h: int, w: int, channels: int, lanes: Sequence[int],
                border: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """cv2.remap(INTER_LINEAR) of (H, W, C) images by one pair of float maps, as gather taps for ``remap_shared``.

    Per output value (pixel x lane): the flat indices of its 4 source values (top left, top right,
    bottom left, bottom right; (4, H' * W' * L)) into each image, or, for ``border`` "constant",
    into the image padded by one black pixel; and its left/right (int16) and top/bottom (int32)
    weights in 1/32 ((2, H' * W' * L) each). cv2 rounds the maps to 1/32 pixel, so its weights are
    whole multiples of 1/1024 and its result, (sum of weight * 1024 * value + 512) >> 10, is an
    exact integer sum.
    """
    fixed_x, fixed_y = (np.rint(np.asarray(m, np.float64) * 32).astype(np.int64).ravel() for m in (map_x, map_y))
    x0, y0 = fixed_x >> 5, fixed_y >> 5
    if border == "replicate":  # a tap outside the image reads the nearest edge pixel
        col, row, width = (lambda x: np.clip(x, 0, w - 1)), (lambda y: np.clip(y, 0, h - 1)), w
    elif border == "constant":  # a tap outside reads the black frame (clipped onto it from further out)
        col, row, width = (lambda x: np.clip(x, -1, w) + 1), (lambda y: np.clip(y, -1, h) + 1), w + 2
    else:
        raise ValueError(f"border {border!r}: shared_taps knows 'replicate' and 'constant'")
    lane = np.asarray(lanes, np.int64)
    index = np.stack([((row(y0 + dy) * width + col(x0 + dx))[:, None] * channels + lane).ravel() for dy in (0, 1) for dx in (0, 1)])
    fx, fy = (np.repeat(f & 31, len(lane)) for f in (fixed_x, fixed_y))
    return index, np.stack([32 - fx, fx]).astype(np.int16), np.stack([32 - fy, fy]).astype(np.int32)


def remap_shared(images: torch.Tensor, taps: tuple[np.ndarray, np.ndarray, np.ndarray], border: str) -> torch.Tensor:
    """(M, H, W, C) uint8 remapped by ``shared_taps`` (one map for every image); (M, H' * W' * L) uint8.

    Each tap is a gather of single uint8 values from each image's flat (H * W * C) row with one
    index for all images (gathers of C-value pixels are several times slower on a CPU); the
    horizontal blends fit int16 (at most 32 * 255), the vertical one int32. On a CPU this measured
    as fast as grid_sample on float planes with the conversions, and it is cv2's result to the bit.
    """
    m = images.shape[0]
    if border == "constant":
        framed = torch.zeros((m, images.shape[1] + 2, images.shape[2] + 2, images.shape[3]), dtype=torch.uint8, device=images.device)
        framed[:, 1:-1, 1:-1] = images
        images = framed
    index, fx, fy = (torch.from_numpy(a).to(images.device) for a in taps)
    flat = images.reshape(m, -1)

    def tap(t: int) -> torch.Tensor:
        return torch.gather(flat, 1, index[t].expand(m, -1)).to(torch.int16)

    top = tap(0).mul_(fx[0]).add_(tap(1).mul_(fx[1])).to(torch.int32).mul_(fy[0])
    bottom = tap(2).mul_(fx[0]).add_(tap(3).mul_(fx[1])).to(torch.int32).mul_(fy[1])
    return top.add_(bottom).add_(512).bitwise_right_shift_(10).to(torch.uint8)


def pixel_grid(h: int, w: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """(H, W) float32 x and y pixel coordinates (float64 products happen on the host where it matters)."""
    ys, xs = torch.meshgrid(torch.arange(h, dtype=torch.float32, device=device),
                            torch.arange(w, dtype=torch.float32, device=device), indexing="ij")
    return xs, ys


def pair_index(hi: torch.Tensor, lo: torch.Tensor) -> torch.Tensor:
    """Flat int32 index ``hi * 256 + lo`` of two uint8 tensors into a 256 x 256 lookup table.

    int32 (not int64) halves the memory the index costs; index_select accepts it.
    """
    shape = torch.broadcast_shapes(hi.shape, lo.shape)
    return torch.add(lo, hi.to(torch.int32), alpha=256, out=empty(tuple(shape), torch.int32, lo.device))


def lookup(table: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``table[index]`` for a 1-D table and an int32/int64 index of any shape (index_select: the fast gather on CPU)."""
    out = empty((index.numel(),), table.dtype, table.device)
    return torch.index_select(table, 0, index.reshape(-1), out=out).view(index.shape)


def widen_rows(x: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """``x`` (broadcasting against (N, H, W, C) ``like`` with a width of 1) repeated along the width.

    A (N, 1, 1, C) operand leaves CPU kernels an innermost loop of C values; as (N, 1, W, C)
    it broadcasts over whole rows, which they vectorise. The copy is one row per image.
    """
    if x.ndim != like.ndim or x.shape[-2] != 1 or like.shape[-2] == 1:
        return x
    return x.expand(*x.shape[:-2], like.shape[-2], x.shape[-1]).contiguous()


def add_clamped(images: torch.Tensor, offset: torch.Tensor) -> torch.Tensor:
    """uint8 ``clip(images + offset, 0, 255)`` for an integer offset that broadcasts against ``images``.

    Clamping first to the range whose sum stays in [0, 255] lets the addition run in uint8
    (wrapping modulo 256 is then exact), instead of widening every value to int16 and back.
    """
    off = widen_rows(offset.to(torch.int16), images)
    lo = (-off).clamp_(0, 255).to(torch.uint8)
    hi = (255 - off).clamp_(0, 255).to(torch.uint8)
    out = torch.clamp(images, lo, hi, out=empty(tuple(images.shape), torch.uint8, images.device))
    return out.add_(off.remainder(256).to(torch.uint8))

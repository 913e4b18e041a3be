"""Weather family on the device: fog, frost, snow, rain and cloud cover.

Scalars and strokes (drop positions, crystal strokes, cloud cells, coarse plasma levels) come from
the CPU kernel's numpy streams through the same draw helpers; per-pixel fields from the torch generators.
"""

from __future__ import annotations

from functools import lru_cache

import cv2
import numpy as np
import torch
import torch.nn.functional as F

from domainbench.corruptions.device.blur import motion_trails
from domainbench.corruptions.device.common import DeviceBatch, band_matrix, correlate, rint_to_uint8_, size_scale, to_uint8
from domainbench.corruptions.device.registry import device_kernel
from domainbench.corruptions.draws import record
from domainbench.corruptions.kernels._imagenet_c import _linear_taps, next_power_of_2
from domainbench.corruptions.kernels.weather import (
    _FINE_GAIN,
    _FROST_LOOKS,
    CloudParams,
    FogParams,
    FrostParams,
    RainParams,
    SnowParams,
    frost_source,
    frost_strokes,
    rain_drops,
)
from domainbench.corruptions.kernels import frost_photos


@lru_cache(maxsize=64)
def _cubic_upsampling(n_out: int, n_in: int, device: torch.device) -> torch.Tensor:
    """(n_out, n_in) matrix of the 1-D bicubic resize (a = -0.75, half-pixel centres, clamped edges, as cv2.INTER_CUBIC).

    Taken from F.interpolate of the identity, so its weights are torch's own; a resize is then two
    small matmuls (rows, columns), far cheaper on CPU than interpolating every image.
    """
    eye = torch.eye(n_in, dtype=torch.float32, device=device)[None, None]
    return F.interpolate(eye, size=(n_out, n_in), mode="bicubic", align_corners=False)[0, 0].contiguous()


def fractal_noise(h: int, w: int, rngs: list[np.random.Generator], device: torch.device, base_cells: int, octaves: int,
                  persistence: float) -> torch.Tensor:
    """domainbench.corruptions.kernels._common.fractal_noise for a batch: (N, H, W) in [0, 1].

    The random cells are drawn from the CPU kernel's numpy streams in its order (a few hundred
    numbers per image). Each octave is resized as rows @ cells and all octaves' column resizes
    (weighted by their amplitude) are stacked into one matrix, so the sum of the octaves is one
    batched matmul.
    """
    sizes = [base_cells * 2**o + 1 for o in range(octaves)]
    grids = [np.stack([rng.random((c, c), dtype=np.float32) for rng in rngs]) for c in sizes]
    rows = torch.cat([_cubic_upsampling(h, c, device) @ torch.from_numpy(g).to(device) for c, g in zip(sizes, grids)], dim=2)
    amps = [np.float32(persistence**o) for o in range(octaves)]
    cols = torch.cat([_cubic_upsampling(w, c, device).T * a for c, a in zip(sizes, amps)], dim=0)
    acc = rows @ cols
    lo = acc.amin(dim=(1, 2), keepdim=True)
    hi = acc.amax(dim=(1, 2), keepdim=True)
    return acc.sub_(lo).div_((hi - lo).clamp_min(1e-6))


def quantile(x: torch.Tensor, q: float) -> torch.Tensor:
    """np.quantile(row, q) (linear interpolation) of each row of (N, M) x, as (N,).

    Only the two order statistics around q * (M - 1) are needed: a partial top-k from the nearer
    end of the order finds them without the full sort torch.quantile makes.
    """
    m = x.shape[1]
    pos = q * (m - 1)
    k = min(int(np.floor(pos)), m - 1)
    frac = np.float32(pos - k)
    if k < m // 2:
        below = torch.topk(x, min(k + 2, m), dim=1, largest=False, sorted=False).values
        pair = torch.topk(below, min(2, below.shape[1]), dim=1).values.flip(1)
    else:
        above = torch.topk(x, m - k, dim=1, sorted=False).values
        pair = torch.topk(above, min(2, above.shape[1]), dim=1, largest=False).values
    lo, hi = pair[:, 0], pair[:, -1]
    return lo + (hi - lo) * frac


@device_kernel("cloud_overlay", exact=True, note="cloud cells drawn from the CPU kernel's numpy streams")
def cloud_overlay(images: torch.Tensor, p: CloudParams, b: DeviceBatch) -> torch.Tensor:
    n, h, w, _ = images.shape
    field = fractal_noise(h, w, b.rngs, images.device, base_cells=2, octaves=6, persistence=0.6)
    if p.coverage <= 0:
        return images.clone()
    if p.coverage < 1:
        threshold = quantile(field.reshape(n, -1), 1.0 - p.coverage)[:, None, None]
    else:
        threshold = torch.full((n, 1, 1), -1.0, device=images.device)
    # (x - t) / 0.15 + 0.35 as one fused multiply-add over the field
    alpha = torch.addcmul(0.35 - threshold / 0.15, field, torch.tensor(1 / 0.15, device=images.device))
    alpha = alpha.clamp_(0, 1).mul_(p.opacity)
    cloud = field.mul(40.0).add_(215.0).mul_(alpha)
    # x * (1 - alpha) + cloud * alpha, in the CPU kernel's order of operations, in place on the float copy
    # (torch.addcmul with a uint8 operand takes a slow type-promoting path on CPU)
    return to_uint8(images.float().mul_(alpha.neg_().add_(1.0)[..., None]).add_(cloud[..., None]))


#: diamond-square levels up to this many cells a side draw from the numpy streams (at most 3 * 8**2
#: numbers per level): the coarse relief, which sets how much fog an image gets, is then the CPU
#: kernel's own; the finer levels, as many numbers as pixels, come from the torch generators
HOST_PLASMA_CELLS = 8


def plasma_fractal(mapsize: int, decay: float, b: DeviceBatch) -> torch.Tensor:
    """ImageNet-C's diamond-square height map for every image of the batch: (N, mapsize, mapsize) in [0, 1].

    The construction of corruptions.kernels._imagenet_c.plasma_fractal, one level at a time for
    the whole batch. float32: the map is normalised at the end, so its relative precision is what counts.
    """
    m = torch.zeros((len(b.seeds), mapsize, mapsize), dtype=torch.float32, device=b.device)
    step, wibble = mapsize, 100.0
    while step >= 2:
        half, cells = step // 2, mapsize // step
        # the level's three displacement fields (square, then the two diamond steps), wibble * uniform(-wibble, wibble)
        if cells <= HOST_PLASMA_CELLS:
            drawn = [np.stack([rng.uniform(-wibble, wibble, (cells, cells)) for _ in range(3)]) for rng in b.rngs]
            shift = torch.from_numpy(np.stack(drawn).astype(np.float32)).to(b.device).mul_(wibble)
        else:
            shift = b.rand((3, cells, cells)).mul_(2 * wibble * wibble).sub_(wibble * wibble)
        corners = m[:, ::step, ::step]
        square = corners + corners.roll(-1, 1)
        square += square.roll(-1, 2)
        m[:, half::step, half::step] = shift[:, 0].add_(square, alpha=0.25)
        centres = m[:, half::step, half::step]
        corners = m[:, ::step, ::step]
        m[:, ::step, half::step] = shift[:, 1].add_(centres + centres.roll(1, 1) + corners + corners.roll(-1, 2), alpha=0.25)
        m[:, half::step, ::step] = shift[:, 2].add_(centres + centres.roll(1, 2) + corners + corners.roll(-1, 1), alpha=0.25)
        step //= 2
        wibble /= decay
    m -= m.amin(dim=(1, 2), keepdim=True)
    return m.div_(m.amax(dim=(1, 2), keepdim=True))


@device_kernel("fog", exact=False, note="coarse plasma levels from the numpy streams, fine levels from the torch generators")
def fog(images: torch.Tensor, p: FogParams, b: DeviceBatch) -> torch.Tensor:
    n, h, w, _ = images.shape
    plasma = plasma_fractal(next_power_of_2(max(h, w)), p.decay, b)[:, :h, :w]
    peak = images.reshape(n, -1).amax(dim=1).float().div_(255.0)[:, None, None, None]
    keep = peak / (peak + p.density)
    # (x / 255 + density * plasma) * keep * 255 = x * keep + plasma * (255 * density * keep), in place on the float copy
    return to_uint8(images.float().mul_(keep).add_(plasma[..., None] * (255.0 * p.density * keep)))


def _float_gaussian_taps(sigma: float) -> np.ndarray:
    """The 1-D kernel cv2.GaussianBlur(ksize=(0, 0)) uses on float images: 2 * round(4 sigma) + 1 taps."""
    return cv2.getGaussianKernel(int(round(sigma * 4 * 2 + 1)) | 1, sigma, cv2.CV_32F).ravel()


@lru_cache(maxsize=64)
def _gaussian_matrix(n: int, sigma: float, device: torch.device) -> torch.Tensor:
    """(n, n) matrix M with M @ v = cv2.GaussianBlur of v along one axis (float32 taps, BORDER_REFLECT_101).

    A blur is then a matmul against a banded matrix: on CPU far faster than a depthwise convolution
    with a wide kernel, and a plain GEMM on a GPU.
    """
    return torch.from_numpy(band_matrix(_float_gaussian_taps(sigma), n, "reflect101").astype(np.float32)).to(device)


#: up to this many taps a blur is a sum of shifted windows; wider, a matmul against a banded matrix
#: does fewer passes over the data (measured on CPU: 7 taps 0.4 vs 0.7 ms, 33 taps 0.7 vs 0.6 ms per image)
SHIFTED_TAPS = 15


def gaussian_blur(x: torch.Tensor, sigma: float) -> torch.Tensor:
    """cv2.GaussianBlur(x, (0, 0), sigma) of (N, H, W) float32 (BORDER_REFLECT_101)."""
    h, w = x.shape[-2:]
    taps = _float_gaussian_taps(sigma)
    if len(taps) <= SHIFTED_TAPS:
        return correlate(correlate(x, taps, 1, "reflect101"), taps, 2, "reflect101")
    return _gaussian_matrix(h, sigma, x.device) @ x @ _gaussian_matrix(w, sigma, x.device).T


def splat_segments(h: int, w: int, segments: torch.Tensor) -> torch.Tensor:
    """(N, H, W) float32 canvas with the (N, S, 2, 2) line segments (integer x, y end points) drawn anti-aliased.

    Xiaolin Wu's construction, as cv2's LINE_AA approximates it: one point per pixel step along
    the segment's major axis, shared between the two pixels its minor coordinate falls between;
    all points of the batch land in one scatter-add instead of a rasteriser looping over lines.
    """
    n, count = segments.shape[:2]
    start, delta = segments[:, :, 0], segments[:, :, 1] - segments[:, :, 0]
    steps = delta.abs().amax(dim=-1)  # (N, S): pixel steps along the major axis
    k = torch.arange(int(steps.max()) + 1 if steps.numel() else 1, dtype=torch.float32, device=segments.device)
    points = start[:, :, None] + delta[:, :, None] * (k / steps.clamp_min(1.0)[..., None])[..., None]  # (N, S, P, 2)
    weight = (k <= steps[..., None]).float()
    # on a canvas with a border (one pixel before, two after: a corner's neighbour stays on the canvas),
    # clamping a point into the border drops its whole weight there, so no corner needs an inside test
    x = points[..., 0].clamp(-1, w).add_(1)
    y = points[..., 1].clamp(-1, h).add_(1)
    x0, y0 = x.floor(), y.floor()
    fx, fy = x - x0, y - y0
    stride = w + 3
    corner = (torch.arange(n, device=segments.device)[:, None, None] * ((h + 3) * stride) + (y0 * stride + x0).long()).view(-1)
    fx, fy, weight = fx.view(-1), fy.view(-1), weight.expand_as(x).reshape(-1)
    index = torch.cat([corner, corner + 1, corner + stride, corner + stride + 1])
    share = torch.cat([(1 - fy) * (1 - fx), (1 - fy) * fx, fy * (1 - fx), fy * fx]) * weight.repeat(4)
    canvas = torch.zeros(n * (h + 3) * stride, dtype=torch.float32, device=segments.device).index_add_(0, index, share)
    return canvas.view(n, h + 3, stride)[:, 1 : h + 1, 1 : w + 1]


def _frost_crystals(h: int, w: int, b: DeviceBatch) -> torch.Tensor:
    """The CPU frost texture's ice crystals, (N, H, W): the same strokes (drawn from the numpy streams
    in its order, right after the base noise), splatted instead of cv2's anti-aliased rasteriser."""
    strokes = np.stack([frost_strokes(h, w, rng) for rng in b.rngs]).astype(np.float32)
    # cv2 blends a stroke over what is there, so crossing strokes saturate at 1 rather than add up
    return splat_segments(h, w, torch.from_numpy(strokes).to(b.device)).clamp_max_(1.0)


def _std_mean(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Population standard deviation and mean of each image of (N, H, W) x, as (N, 1, 1) each.

    Two passes (mean, then the norm of the deviations): on CPU several times faster than
    torch.std's Welford loop, with the same precision as numpy's two-pass std.
    """
    mean = x.mean(dim=(1, 2), keepdim=True)
    norm = torch.linalg.vector_norm(x - mean, dim=(1, 2), keepdim=True)
    return norm / np.sqrt(x.shape[1] * x.shape[2]), mean


def _frost_detail(tex: torch.Tensor, coarse: torch.Tensor, fine_sd: torch.Tensor, coarse_sd: torch.Tensor) -> torch.Tensor:
    """(tex - coarse) scaled to fine_sd plus coarse centred and scaled to coarse_sd (population std,
    per image), as ``fine * a + coarse * b - mean * b``: one new tensor instead of four."""
    fine = tex.sub_(coarse)
    fine_std, _ = _std_mean(fine)
    coarse_std, coarse_mean = _std_mean(coarse)
    scale = coarse_sd[:, None, None] / coarse_std.clamp_min_(1e-6)
    return fine.mul_(fine_sd[:, None, None] / fine_std.clamp_min_(1e-6)).addcmul_(coarse, scale).sub_(coarse_mean * scale)


@device_kernel("frost", exact=False, note="photographs: the CPU pixels; procedural ice: crystals splatted, not "
               "rasterised by cv2's anti-aliased lines")
def frost(images: torch.Tensor, p: FrostParams, b: DeviceBatch) -> torch.Tensor:
    folders = [frost_source(rng) for rng in b.rngs]
    if all(f is None for f in folders):
        return _procedural_frost(images, p, b)
    if all(f is not None for f in folders):
        return _photo_frost(images, p, b, folders)
    # sources mixed only by a caller's fixed ``texture`` values: each image on its own
    out = torch.empty_like(images)
    for i, folder in enumerate(folders):
        part = b.part(i, i + 1)
        out[i : i + 1] = _procedural_frost(images[i : i + 1], p, part) if folder is None else _photo_frost(images[i : i + 1], p, part, [folder])
        b.merge(i, part)
    return out


def _photo_frost(images: torch.Tensor, p: FrostParams, b: DeviceBatch, folders: list) -> torch.Tensor:
    """The CPU kernel's photograph crops (drawn from its numpy streams, cut on the host), blended and truncated as it does."""
    n, h, w, c = images.shape
    crops = np.stack([frost_photos.photo_crop(folder, h, w, rng) for folder, rng in zip(folders, b.rngs)])
    # float64, as the reference: float32 sums a hair below a whole number would truncate a level lower
    ice = torch.from_numpy(crops).to(images.device).double()
    if c == 1:
        ice = ice @ torch.tensor([[0.2989], [0.5870], [0.1140]], dtype=torch.float64, device=images.device)
    out = images.double().mul_(p.image_weight).add_(ice.mul_(p.frost_weight))
    return out.clamp_(0, 255).to(torch.uint8)


def _procedural_frost(images: torch.Tensor, p: FrostParams, b: DeviceBatch) -> torch.Tensor:
    n, h, w, c = images.shape
    s = size_scale(images)
    dev = images.device
    looks = [_FROST_LOOKS[int(record(rng, "look", int(rng.integers(0, len(_FROST_LOOKS)))))] for rng in b.rngs]
    base = fractal_noise(h, w, b.rngs, dev, base_cells=5, octaves=5, persistence=0.75)
    crystals = gaussian_blur(_frost_crystals(h, w, b), max(0.6 * s, 0.3))
    # base ** 1.5 as base * sqrt(base): the same to a float32 ulp, several times cheaper than pow on CPU
    tex = torch.maximum(base.sqrt().mul_(base).mul_(0.6).add_(0.3), crystals.clamp_max_(1.0))
    coarse = gaussian_blur(tex, max(4.0 * s, 0.5))
    fine_sd = np.array([look[1] for look in looks], np.float32) * np.float32(_FINE_GAIN)
    coarse_sd = np.array([np.sqrt(max(look[2] ** 2 + look[1] ** 2 - f**2, (0.5 * look[2]) ** 2)) for look, f in zip(looks, fine_sd)], np.float32)
    detail = _frost_detail(tex, coarse, torch.from_numpy(fine_sd).to(dev), torch.from_numpy(coarse_sd).to(dev))
    colour = np.array([look[0] for look in looks], np.float32)
    if c == 1:
        colour = colour @ np.array([[0.2989], [0.5870], [0.1140]], np.float32)
    # image_weight * image + frost_weight * (colour + detail), accumulated in place on the image's float copy
    out = images.float().mul_(p.image_weight).add_(detail.mul_(p.frost_weight)[..., None])
    return to_uint8(out.add_(torch.from_numpy(colour * np.float32(p.frost_weight)).to(dev)[:, None, None, :]))


#: albumentations' rain streak colour (all three channels) and width
_RAIN_GREY = 200


@lru_cache(maxsize=256)
def _streak(slant: int, length: int) -> np.ndarray:
    """(P, 2) pixel offsets (dx, dy) of cv2's 4-connected line from a drop to drop + (slant, length).

    With integer end points the rasterised line is the same wherever it starts, so one stroke
    drawn on a canvas the size of the streak gives every drop's pixels.
    """
    canvas = np.zeros((length + 1, 2 * abs(slant) + 1), np.uint8)
    cv2.line(canvas, (abs(slant), 0), (abs(slant) + slant, length), 1, 1, lineType=cv2.LINE_4)
    ys, xs = np.nonzero(canvas)
    return np.stack([xs - abs(slant), ys], axis=1)


def box_count(x: torch.Tensor, k: int) -> torch.Tensor:
    """k x k window sums of (N, H, W) 0/1 images as cv2.blur places its window (anchor k // 2,
    BORDER_REFLECT_101), in the images' dtype (uint8 holds sums up to 255)."""
    before, after = k // 2, k - 1 - k // 2
    # torch's "reflect" padding mirrors about the edge pixel, as BORDER_REFLECT_101; one padded copy
    # is far cheaper than gathering the padded rows and columns (measured 0.03 against 0.13 ms per image)
    padded = F.pad(x[:, None], (before, after, before, after), mode="reflect")[:, 0]
    return _window_total(_window_total(padded, 1, k), 2, k)


def _window_total(x: torch.Tensor, dim: int, k: int) -> torch.Tensor:
    """Sums of k consecutive entries along ``dim`` (x padded by k - 1 there), accumulated in place."""
    n = x.shape[dim] - k + 1
    out = x.narrow(dim, 0, n).clone()
    for j in range(1, k):
        out.add_(x.narrow(dim, j, n))
    return out


@device_kernel("rain", exact=True, note="slant and drops drawn from the CPU kernel's numpy streams")
def rain(images: torch.Tensor, p: RainParams, b: DeviceBatch) -> torch.Tensor:
    n, h, w, _ = images.shape
    drawn = [rain_drops(h, w, p, rng) for rng in b.rngs]
    drops, streaks = [d for _, _, d in drawn], [_streak(slant, length) for slant, length, _ in drawn]
    dev = images.device
    # every image has as many drops; streaks differ in length with the slant: pad with their first pixel.
    # The draws keep every streak inside the image (x from -slant, y below h - length), so no pixel is clipped.
    longest = max(len(st) for st in streaks)
    offsets = np.stack([np.concatenate([st, np.repeat(st[:1], longest - len(st), axis=0)]) for st in streaks])
    starts = np.stack(drops) @ np.array([1, w]) + (np.arange(n) * (h * w))[:, None]
    flat = torch.from_numpy(starts).to(dev)[:, :, None] + torch.from_numpy(offsets @ np.array([1, w])).to(dev)[:, None, :]
    wet = torch.zeros(n * h * w, dtype=torch.uint8, device=dev).index_fill_(0, flat.view(-1), 1).view(n, h, w)
    k = max(1, int(round(3 * size_scale(images))))
    area = k * k if k > 1 else 1
    if k > 1:
        wet = box_count(wet if area < 256 else wet.to(torch.int16), k)  # uint8 counts up to a 15 x 15 window
    # the blurred streak rounded half up, as cv2.blur rounds (a tie needs k * k a power of two: exact in float32)
    layer = rint_to_uint8_(wet.float().mul_(_RAIN_GREY / area).add_(0.5).floor_())[..., None]
    # cv2.add: saturating uint8 addition, as img + min(layer, 255 - img) without leaving uint8; the layer
    # copied to every channel first (torch.cat: the fastest copy on CPU), as torch.minimum broadcasting
    # along the channels is slow on CPU
    out = torch.minimum(255 - images, torch.cat([layer] * images.shape[-1], dim=-1)).add_(images)
    if p.darkening == 1.0:
        return out
    return scale_in_place(out, p.darkening)


#: float32 elements per piece of a uint8 -> float pass: under 2 MB, the size from which torch's CPU
#: allocator maps fresh huge pages for every tensor (a 4.8 MB temporary costs 0.76 ms of page faults,
#: a 1.9 MB one 0.05 ms; smaller pieces reuse the same heap memory)
_FLOAT_PIECE = 1 << 18


def scale_in_place(x: torch.Tensor, factor: float) -> torch.Tensor:
    """Contiguous uint8 ``x`` multiplied by ``factor`` <= 1 and rounded half to even (as cv2.multiply),
    written back into ``x``: on a CPU in float32 pieces of the flattened tensor, on a GPU in one pass."""
    flat = x.view(-1)
    for piece in flat.split(_FLOAT_PIECE) if x.device.type == "cpu" else (flat,):
        piece.copy_(rint_to_uint8_(piece.float().mul_(factor)))
    return x


@lru_cache(maxsize=64)
def _zoom_matrix(side: int, zoom: float, device: torch.device) -> tuple[torch.Tensor, int]:
    """ImageNet-C clipped_zoom along one axis: the (kept, crop) linear-interpolation matrix and the crop length.

    The zoom reads only the centre crop, so only the crop's random values need drawing.
    """
    crop = int(np.ceil(side / zoom))
    out = int(round(crop * zoom))
    i0, i1, f = _linear_taps(out, crop, 0, min(side, out))
    m = np.zeros((len(i0), crop), np.float32)
    np.add.at(m, (np.arange(len(i0)), i0), 1 - f)
    np.add.at(m, (np.arange(len(i0)), i1), f)
    return torch.from_numpy(m).to(device), crop


@device_kernel("snow", exact=False, note="snow field from the torch generators; the fall angle from the numpy stream, "
               "drawn before the field (the CPU draws it after), so it differs from the CPU's")
def snow(images: torch.Tensor, p: SnowParams, b: DeviceBatch) -> torch.Tensor:
    n, h, w, c = images.shape
    s = size_scale(images)
    zoom = max(1.0, p.zoom * s)  # flakes no smaller than a pixel
    rows, crop_h = _zoom_matrix(h, zoom, images.device)
    cols, crop_w = _zoom_matrix(w, zoom, images.device)
    field = b.randn((crop_h, crop_w)).mul_(p.spread).add_(p.mean)
    layer = rows @ field @ cols.T
    layer = layer.masked_fill_(layer < p.threshold, 0).clamp_(0, 1)
    angles = [record(rng, "angle", float(rng.uniform(-135.0, -45.0))) for rng in b.rngs]
    layer = motion_trails(layer, round(p.radius * s), max(p.sigma * s, 0.1), angles)
    layer = layer.mul_(255).round_()  # in grey levels: the CPU kernel's round(layer * 255) / 255, times 255
    full = F.pad(layer, (0, w - layer.shape[2], 0, h - layer.shape[1]))
    flakes = (full + full.flip(1, 2))[..., None]
    # the CPU kernel's blend on [0, 1], scaled by 255 throughout: fewer passes over the pixels
    x = images.float()
    grey = (x @ torch.tensor([0.299, 0.587, 0.114], device=images.device))[..., None] if c == 3 else x
    whitened = torch.maximum(x, grey.mul(1.5).add_(127.5))
    return to_uint8(x.mul_(p.scene).add_(whitened, alpha=1 - p.scene).add_(flakes).clamp_(0, 255.0))

"""Sensor family on the device: read noise, banding, lens fall-off and colour fringes."""

from __future__ import annotations

from functools import lru_cache

import cv2
import numpy as np
import torch

from domainbench.corruptions.device.common import DeviceBatch, as_float, empty, remap_shared, shared_taps, to_uint8
from domainbench.corruptions.device.registry import device_kernel
from domainbench.corruptions.draws import record
from domainbench.corruptions.kernels.sensor import ChromaticAberrationParams, IsoNoiseParams, LowLightParams, RowNoiseParams, VignettingParams


def poisson_counts(lam: np.ndarray, b: DeviceBatch, shape: tuple[int, ...]) -> torch.Tensor:
    """(N, *shape) float32 Poisson counts, image i with mean ``lam[i]``, from one 15-bit uniform per value.

    The count is the number of CDF steps the uniform passes, each step a per-image threshold in
    1/32768 units: only the few counts whose probability is not below 1/32768 get a comparison,
    where searchsorted over the whole CDF costs several times the field it builds.
    """
    lam = np.maximum(np.asarray(lam, dtype=np.float64), 0.0)
    k = np.arange(int(np.ceil(lam.max() + 12 * np.sqrt(lam.max()) + 12)))
    log_pmf = k * np.log(np.maximum(lam[:, None], 1e-300)) - lam[:, None] - np.cumsum(np.log(np.maximum(k, 1)))[None, :]
    steps = np.minimum(np.rint(np.cumsum(np.exp(log_pmf), axis=1) * (1 << 15)), 1 << 15).astype(np.int64)
    used = int((steps < (1 << 15)).sum(axis=1).max())
    u = b.uniform15(shape).view(len(lam), -1)
    # u >= step as u > step - 1: a step of 32768 (never passed) then still fits int16
    below_step = torch.from_numpy((steps[:, :used] - 1).astype(np.int16)).to(b.device)
    # counted in uint8 while at most 255 steps (iso noise: a few): adding a bool mask to float32 converts
    # it first (1.7x slower)
    small = used <= 255
    counts = torch.zeros(tuple(u.shape), dtype=torch.uint8 if small else torch.int32, device=b.device)
    for j in range(used):
        passed = torch.gt(u, below_step[:, j : j + 1]).view(torch.uint8)
        counts.add_(passed if small else passed.to(torch.int32))
    return counts.float().view(len(lam), *shape)


def _hls_channel(light: torch.Tensor, half: torch.Tensor, k: torch.Tensor, centre: float, out: torch.Tensor) -> None:
    """One RGB channel of HLS into ``out``: L - half * clip(3 - d, -1, 1), d the distance on the hue circle (12 sextant halves) from k to ``centre``.

    The circular distance min(d, 12 - d) of k in [0, 12) needs no remainder per channel: 3 - it is max(3 - d, d - 9).
    """
    d = torch.sub(k, centre, out=out).abs_()
    slope = torch.rsub(d, 3.0)
    torch.maximum(slope, d.sub_(9.0), out=slope).clamp_(-1, 1)
    torch.addcmul(light, half, slope, value=-1.0, out=out)


@device_kernel("iso_noise", exact=False, note="albumentations' HLS formulas in torch; Poisson and hue noise from torch generators")
def iso_noise(images: torch.Tensor, p: IsoNoiseParams, b: DeviceBatch) -> torch.Tensor:
    n, h, w, _ = images.shape
    # planar float: every per-channel operation below then runs on contiguous planes
    r, g, bl = as_float(images.permute(0, 3, 1, 2)).unbind(1)
    hi = torch.maximum(torch.maximum(r, g), bl)
    lo = torch.minimum(torch.minimum(r, g), bl)
    chroma = hi - lo
    # integer levels: chroma 0 means grey, where every branch below gives hue 0
    twice_inv = chroma.clamp(min=1.0).reciprocal_().mul_(2.0)
    # hue / 30 degrees, cv2's order of cases (red is the maximum first, then green): 2 per sextant
    k = torch.where(hi == r, g - bl, torch.where(hi == g, (bl - r).add_(chroma.clamp(min=1.0), alpha=2.0), (r - g).add_(chroma.clamp(min=1.0), alpha=4.0)))
    k.mul_(twice_inv).add_(b.randn((h, w)).mul_(p.color_shift * p.intensity / 30.0)).remainder_(12.0)
    light = hi.add_(lo).mul_(0.5 / 255.0)
    flat = light.view(n, -1)
    mean = flat.mean(dim=1, dtype=torch.float64)
    std = (flat.square().mean(dim=1, dtype=torch.float64) - mean.square()).clamp_(min=0).sqrt_().cpu().numpy()
    counts = poisson_counts(std * p.intensity, b, (h, w))
    # albumentations adds counts * intensity * (1 - L) to the lightness, clipped to [0, 1]
    new_light = torch.rsub(light, 1.0).mul_(counts).mul_(p.intensity).add_(light).clamp_(0, 1)
    # with hue and saturation kept, half the chroma scales with min(L, 1 - L)
    room = torch.minimum(new_light, 1 - new_light).div_(torch.minimum(light, 1 - light).clamp_(min=1e-12))
    half = chroma.mul_(0.5 / 255.0).mul_(room)
    out = empty((n, 3, h, w), torch.float32, images.device)
    # channel c peaks where (k + shift_c) mod 12 is 6: red, green, blue shifts 0, 8, 4
    for c, centre in enumerate((6.0, 10.0, 2.0)):
        _hls_channel(new_light, half, k, centre, out[:, c])
    return to_uint8(out.clamp_(0, 1).mul_(255.0).permute(0, 2, 3, 1))


@device_kernel("low_light", exact=False)
def low_light(images: torch.Tensor, p: LowLightParams, b: DeviceBatch) -> torch.Tensor:
    linear = as_float(images).div_(255.0).pow_(2.2).mul_(p.gain)
    noise = b.randn(tuple(images.shape[1:]))
    return to_uint8(linear.clamp_(0, 1).pow_(1 / 2.2).mul_(255.0).add_(noise.mul_(p.noise * 255.0)))


@device_kernel("row_noise", exact=True, note="row and column offsets drawn from the CPU kernel's numpy streams")
def row_noise(images: torch.Tensor, p: RowNoiseParams, b: DeviceBatch) -> torch.Tensor:
    n, h, w, c = images.shape
    # h + w numbers per image: drawing them on the host in the CPU kernel's order makes the pixels equal
    rows = np.stack([rng.standard_normal(h, dtype=np.float32) for rng in b.rngs])
    cols = np.stack([rng.standard_normal(w, dtype=np.float32) for rng in b.rngs])
    scale = np.float32(p.sigma * 255.0)
    rows_t = torch.from_numpy(rows * scale).to(images.device)
    cols_t = torch.from_numpy(cols * (scale * np.float32(0.3))).to(images.device)
    # the banding of every channel, as the CPU kernel's (N, H, W, 1) sum: broadcasting the rows over
    # whole (W, C) blocks is vectorised, broadcasting one value over the channels is not
    cols3 = cols_t[:, None, :, None].expand(n, 1, w, c).contiguous()
    banding = torch.add(rows_t[:, :, None, None], cols3, out=empty((n, h, w, c), torch.float32, images.device))
    return to_uint8(as_float(images).add_(banding))


@lru_cache(maxsize=32)
def _vignette_gain(h: int, w: int, strength: float) -> np.ndarray:
    ys = (np.arange(h, dtype=np.float32) - (h - 1) / 2) / np.float32((h - 1) / 2)
    xs = (np.arange(w, dtype=np.float32) - (w - 1) / 2) / np.float32((w - 1) / 2)
    r2 = (ys[:, None] ** 2 + xs[None, :] ** 2) / np.float32(2.0)
    return (np.float32(1.0) - np.float32(strength) * r2 ** np.float32(1.5))[None, :, :, None]


@lru_cache(maxsize=32)
def _vignette_gain_channels(h: int, w: int, c: int, strength: float) -> torch.Tensor:
    """The gain map repeated over the channels: a (1, H, W, C) factor multiplies vectorised, a (1, H, W, 1) one does not."""
    return torch.from_numpy(np.ascontiguousarray(np.repeat(_vignette_gain(h, w, strength), c, axis=-1)))


@device_kernel("vignetting", exact=True)
def vignetting(images: torch.Tensor, p: VignettingParams, b: DeviceBatch) -> torch.Tensor:
    # the gain map is one (H, W) array per batch: computed once on the host, as the CPU kernel does
    gain = _vignette_gain_channels(images.shape[1], images.shape[2], images.shape[3], p.strength).to(images.device)
    return to_uint8(as_float(images).mul_(gain))


@lru_cache(maxsize=32)
def _undistort_maps(h: int, w: int, k: float) -> tuple[np.ndarray, np.ndarray]:
    """albumentations' chromatic-aberration maps of one channel (distortion coefficients [k, 0, 0, 0])."""
    camera = np.eye(3, dtype=np.float32)
    camera[0, 0], camera[1, 1], camera[0, 2], camera[1, 2] = w, h, w / 2.0, h / 2.0
    coeffs = np.array([k, 0.0, 0, 0], dtype=np.float32)
    return cv2.initUndistortRectifyMap(camera, coeffs, None, camera, (w, h), cv2.CV_32FC1)


@lru_cache(maxsize=32)
def _fringe_taps(h: int, w: int, k: float, channels: int, channel: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """cv2.remap(INTER_LINEAR, BORDER_REPLICATE) of one channel by the maps of ``k``, as ``shared_taps``."""
    return shared_taps(*_undistort_maps(h, w, k), h, w, channels, [channel], "replicate")


@device_kernel("chromatic_aberration", exact=True, note="fringe side drawn from the CPU kernel's numpy stream; cv2's bilinear taps as gathers")
def chromatic_aberration(images: torch.Tensor, p: ChromaticAberrationParams, b: DeviceBatch) -> torch.Tensor:
    n, h, w, _ = images.shape
    signs = np.array([record(rng, "sign", 1.0 if rng.random() < 0.5 else -1.0) for rng in b.rngs])
    out = empty(tuple(images.shape), torch.uint8, images.device).copy_(images)
    # red moves by sign * distortion and blue by the opposite: one map serves the red planes of one
    # sign and the blue planes of the other
    for k in (p.distortion, -p.distortion):
        for channel, chosen in ((0, signs * k > 0), (2, signs * k < 0)):
            if chosen.any():
                which = torch.from_numpy(np.flatnonzero(chosen)).to(images.device)
                taps = _fringe_taps(h, w, k, images.shape[-1], channel)
                moved = remap_shared(images.index_select(0, which), taps, "replicate")
                out[which, :, :, channel] = moved.view(-1, h, w)
    return out

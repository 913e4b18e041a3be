"""Weather family on the device: cloud cover (fog, frost and snow wait for issue 16's recalibration)."""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch
import torch.nn.functional as F

from corruptions.device.common import DeviceBatch, to_uint8
from corruptions.device.registry import device_kernel
from corruptions.kernels._imagenet_c import next_power_of_2
from corruptions.kernels.weather import CloudParams, FogParams


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
    """corruptions.kernels._common.fractal_noise for a batch: (N, H, W) in [0, 1].

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
    # x * (1 - alpha) + cloud * alpha in one pass over the pixels, in the CPU kernel's order of operations
    return to_uint8(torch.addcmul(cloud[..., None], images, alpha.neg_().add_(1.0)[..., None]))


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
    # (x / 255 + density * plasma) * keep * 255 = x * keep + plasma * (255 * density * keep): one pass over the pixels
    return to_uint8(torch.addcmul(plasma[..., None] * (255.0 * p.density * keep), images, keep))

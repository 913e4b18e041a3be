"""Weather family on the device: cloud cover (fog, frost and snow wait for issue 16's recalibration)."""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch
import torch.nn.functional as F

from corruptions.device.common import DeviceBatch, to_uint8
from corruptions.device.registry import device_kernel
from corruptions.kernels.weather import CloudParams


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

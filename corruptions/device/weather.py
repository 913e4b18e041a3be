"""Weather family on the device: cloud cover (fog, frost and snow wait for issue 16's recalibration)."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from corruptions.device.common import DeviceBatch, to_uint8
from corruptions.device.registry import device_kernel
from corruptions.kernels.weather import CloudParams


def fractal_noise(h: int, w: int, rngs: list[np.random.Generator], device: torch.device, base_cells: int, octaves: int,
                  persistence: float) -> torch.Tensor:
    """corruptions.kernels._common.fractal_noise for a batch: (N, H, W) in [0, 1].

    The random cells are drawn from the CPU kernel's numpy streams in its order (a few hundred
    numbers per image); the bicubic upsampling (a = -0.75, half-pixel centres, clamped edges, as
    cv2.INTER_CUBIC) and normalisation run on the device.
    """
    acc = torch.zeros((len(rngs), 1, h, w), dtype=torch.float32, device=device)
    amp = 1.0
    for o in range(octaves):
        cells = base_cells * 2**o
        grid = np.stack([rng.random((cells + 1, cells + 1), dtype=np.float32) for rng in rngs])[:, None]
        up = F.interpolate(torch.from_numpy(grid).to(device), size=(h, w), mode="bicubic", align_corners=False)
        acc += np.float32(amp) * up
        amp *= persistence
    acc = acc[:, 0]
    lo = acc.amin(dim=(1, 2), keepdim=True)
    hi = acc.amax(dim=(1, 2), keepdim=True)
    return (acc - lo) / (hi - lo).clamp_min(1e-6)


@device_kernel("cloud_overlay", exact=True, note="cloud cells drawn from the CPU kernel's numpy streams")
def cloud_overlay(images: torch.Tensor, p: CloudParams, b: DeviceBatch) -> torch.Tensor:
    n, h, w, _ = images.shape
    field = fractal_noise(h, w, b.rngs, images.device, base_cells=2, octaves=6, persistence=0.6)
    if p.coverage <= 0:
        return images.clone()
    if p.coverage < 1:
        threshold = torch.quantile(field.reshape(n, -1), 1.0 - p.coverage, dim=1)[:, None, None]
    else:
        threshold = torch.full((n, 1, 1), -1.0, device=images.device)
    alpha = ((field - threshold) / 0.15 + 0.35).clamp_(0, 1).mul_(p.opacity)[..., None]
    cloud = (215.0 + 40.0 * field)[..., None]
    return to_uint8(images.float() * (1 - alpha) + cloud * alpha)

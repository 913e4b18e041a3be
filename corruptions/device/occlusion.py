"""Occlusion family on the device: rectangles drawn from the CPU kernel's numpy streams, filled on the device."""

from __future__ import annotations

import numpy as np
import torch

from corruptions.device.common import DeviceBatch
from corruptions.device.registry import device_kernel
from corruptions.draws import record
from corruptions.kernels.occlusion import OccluderParams


@device_kernel("occluder", exact=True, note="boxes and shades drawn from the CPU kernel's numpy streams")
def occluder(images: torch.Tensor, p: OccluderParams, b: DeviceBatch) -> torch.Tensor:
    n, h, w, c = images.shape
    out = images.clone()
    each = p.area * h * w / p.num_holes
    for k, rng in enumerate(b.rngs):
        # the same draws, in the same order, as corruptions.kernels.occlusion.occluder
        for i in range(p.num_holes):
            aspect = float(np.exp(rng.uniform(np.log(0.5), np.log(2.0))))
            rh = int(min(h, max(1, round(np.sqrt(each * aspect)))))
            rw = int(min(w, max(1, round(np.sqrt(each / aspect)))))
            y = int(rng.integers(0, h - rh + 1))
            x = int(rng.integers(0, w - rw + 1))
            y, x, rh, rw = (int(v) for v in record(rng, "boxes", np.array([y, x, rh, rw]), index=i))
            shade = record(rng, "shades", rng.integers(0, 80, c), index=i)
            out[k, y : y + rh, x : x + rw] = torch.as_tensor(shade.astype(np.uint8), device=images.device)
    return out

"""Occlusion family on the device: rectangles drawn from the CPU kernel's numpy streams, filled on the device."""

from __future__ import annotations

import torch

from corruptions.device.common import DeviceBatch
from corruptions.device.registry import device_kernel
from corruptions.kernels.occlusion import OccluderParams, occluder_boxes


@device_kernel("occluder", exact=True, note="boxes and shades drawn from the CPU kernel's numpy streams")
def occluder(images: torch.Tensor, p: OccluderParams, b: DeviceBatch) -> torch.Tensor:
    n, h, w, c = images.shape
    out = images.clone()
    for k, rng in enumerate(b.rngs):
        for y, x, rh, rw, shade in occluder_boxes(h, w, c, p, rng):
            out[k, y : y + rh, x : x + rw] = torch.as_tensor(shade, device=images.device)
    return out

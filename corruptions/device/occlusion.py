"""Occlusion family on the device: rectangles drawn from the CPU kernel's numpy streams, filled on the device."""

from __future__ import annotations

import numpy as np
import torch

from corruptions.device.common import DeviceBatch
from corruptions.device.registry import device_kernel
from corruptions.kernels.occlusion import OccluderParams, occluder_boxes


@device_kernel("occluder", exact=True, note="boxes and shades drawn from the CPU kernel's numpy streams")
def occluder(images: torch.Tensor, p: OccluderParams, b: DeviceBatch) -> torch.Tensor:
    n, h, w, c = images.shape
    boxes = [occluder_boxes(h, w, c, p, rng) for rng in b.rngs]
    # every shade goes to the device in one transfer; painting a box is then one strided fill
    shades = torch.from_numpy(np.stack([shade for image in boxes for *_, shade in image])).to(images.device).unbind(0)
    out = images.clone()
    j = 0
    for image, painted in zip(out.unbind(0), boxes):
        for y, x, rh, rw, _ in painted:
            image[y : y + rh, x : x + rw] = shades[j]
            j += 1
    return out

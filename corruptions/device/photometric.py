"""Photometric family on the device (colour cast; brightness, contrast and saturate wait for issue 16)."""

from __future__ import annotations

import numpy as np
import torch

from corruptions.device.common import DeviceBatch
from corruptions.device.registry import device_kernel
from corruptions.draws import record
from corruptions.kernels.photometric import ColorShiftParams


@device_kernel("color_shift", exact=True, note="cast direction drawn from the CPU kernel's numpy streams")
def color_shift(images: torch.Tensor, p: ColorShiftParams, b: DeviceBatch) -> torch.Tensor:
    basis = np.array([[1.0, -1.0, 0.0], [0.5, 0.5, -1.0]])
    basis /= np.linalg.norm(basis, axis=1, keepdims=True)
    angles = np.array([record(rng, "angle", rng.uniform(0.0, 2 * np.pi)) for rng in b.rngs])
    offsets = (np.cos(angles)[:, None] * basis[0] + np.sin(angles)[:, None] * basis[1]) * (p.magnitude * 255.0)
    offsets_t = torch.from_numpy(np.rint(offsets).astype(np.int16)).to(images.device)
    return (images.to(torch.int16) + offsets_t[:, None, None, :]).clamp_(0, 255).to(torch.uint8)

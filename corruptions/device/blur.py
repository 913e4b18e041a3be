"""Blur family on the device: Gaussian and defocus blur as convolutions (deterministic, no draws)."""

from __future__ import annotations

import cv2
import numpy as np
import torch

from corruptions.device.common import DeviceBatch, filter2d, nchw, nhwc_uint8, separable_filter, size_scale
from corruptions.device.registry import device_kernel
from corruptions.kernels.blur import DefocusParams, GaussianBlurParams, disk_kernel


def gaussian_taps(sigma: float) -> np.ndarray:
    """The 1-D kernel cv2.GaussianBlur(ksize=(0, 0)) uses on uint8 images: 2*round(3 sigma)+1 taps."""
    ksize = int(round(sigma * 3 * 2 + 1)) | 1
    return cv2.getGaussianKernel(ksize, sigma).ravel()


@device_kernel("gaussian_blur", exact=True)
def gaussian_blur(images: torch.Tensor, p: GaussianBlurParams, b: DeviceBatch) -> torch.Tensor:
    taps = gaussian_taps(p.sigma * size_scale(images))
    return nhwc_uint8(separable_filter(nchw(images), taps, taps))


@device_kernel("defocus_blur", exact=True)
def defocus_blur(images: torch.Tensor, p: DefocusParams, b: DeviceBatch) -> torch.Tensor:
    kernel = disk_kernel(max(0.5, p.radius * size_scale(images)), p.alias_blur)  # the CPU kernel's disk
    return nhwc_uint8(filter2d(nchw(images), kernel))

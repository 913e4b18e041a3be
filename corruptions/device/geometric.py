"""Geometric family on the device: flips, and warps as grid_sample at the CPU kernel's source coordinates.

Random warp parameters (perspective corners, grid steps) are drawn from the CPU kernel's numpy
streams with the same calls, so the device pixels equal the CPU ones up to interpolation rounding.
"""

from __future__ import annotations

from functools import lru_cache

import cv2
import numpy as np
import torch
from albumentations.augmentations.geometric import functional as agf

from domainbench.corruptions.device.common import (
    DeviceBatch,
    nchw,
    nhwc_uint8,
    pixel_grid,
    remap,
    remap_shared,
    separable_filter,
    separable_remap,
    shared_taps,
    size_scale,
)
from domainbench.corruptions.device.registry import device_kernel
from domainbench.corruptions.draws import record
from domainbench.corruptions.kernels.geometric import ElasticParams, GridDistortionParams, LensDistortionParams, NoParams, PerspectiveParams, RotationParams


@device_kernel("horizontal_flip", exact=True, cpu_chunk=None)
def horizontal_flip(images: torch.Tensor, p: NoParams, b: DeviceBatch) -> torch.Tensor:
    return images.flip(2)


@device_kernel("vertical_flip", exact=True, cpu_chunk=None)
def vertical_flip(images: torch.Tensor, p: NoParams, b: DeviceBatch) -> torch.Tensor:
    return images.flip(1)


def _warp(images: torch.Tensor, inverse: np.ndarray, border: str) -> torch.Tensor:
    """Warp (N, H, W, C) uint8 with per-image (N, 3, 3) (or one (3, 3)) dst->src homographies."""
    n, h, w, _ = images.shape
    m = torch.as_tensor(np.broadcast_to(inverse, (n, 3, 3)).copy(), dtype=torch.float64, device=images.device)
    # float64 as cv2.warpPerspective: each row of the homography is a column term plus a row term,
    # so only the sums are full-size; cv2 then rounds num * (32 / den) to 1/32 pixel
    xd = torch.arange(w, dtype=torch.float64, device=images.device).view(1, 1, w)
    yd = torch.arange(h, dtype=torch.float64, device=images.device).view(1, h, 1)
    coef = m[:, :, :, None, None]

    def row(i: int) -> torch.Tensor:
        return coef[:, i, 0] * xd + (coef[:, i, 1] * yd + coef[:, i, 2])

    scale = row(2).reciprocal_().mul_(32)
    map_x = row(0).mul_(scale).round_().div_(32)
    map_y = row(1).mul_(scale).round_().div_(32)
    return nhwc_uint8(remap(nchw(images), map_x.float(), map_y.float(), border))


@device_kernel("rotation", exact=True, note="one map for the batch: cv2.warpAffine's fixed-point coordinates, bilinear taps as gathers")
def rotation(images: torch.Tensor, p: RotationParams, b: DeviceBatch) -> torch.Tensor:
    h, w = images.shape[1:3]
    quarter = p.angle / 90.0
    if quarter == round(quarter) and (h == w or int(round(quarter)) % 2 == 0):
        return torch.rot90(images, k=int(round(quarter)) % 4, dims=(1, 2)).contiguous()
    return remap_shared(images, _rotation_taps(h, w, images.shape[3], float(p.angle)), "constant").view(images.shape)


@lru_cache(maxsize=32)
def _rotation_taps(h: int, w: int, c: int, angle: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    m = cv2.invertAffineTransform(cv2.getRotationMatrix2D(((w - 1) / 2.0, (h - 1) / 2.0), angle, 1.0))
    xs, ys = np.arange(w, dtype=np.float64)[None, :], np.arange(h, dtype=np.float64)[:, None]
    # cv2.warpAffine's fixed point: x and y terms rounded to 1/1024 pixel separately, then to 1/32 (+1/64, floored)
    ab, half_step = 1024.0, 16.0
    map_x = np.floor((np.round(m[0, 0] * xs * ab) + np.round((m[0, 1] * ys + m[0, 2]) * ab) + half_step) / 32) / 32
    map_y = np.floor((np.round(m[1, 0] * xs * ab) + np.round((m[1, 1] * ys + m[1, 2]) * ab) + half_step) / 32) / 32
    return shared_taps(map_x, map_y, h, w, c, range(c), "constant")


@device_kernel("perspective", exact=True, note="corners drawn from the CPU kernel's numpy streams")
def perspective(images: torch.Tensor, p: PerspectiveParams, b: DeviceBatch) -> torch.Tensor:
    h, w = images.shape[1:3]
    inverses = []
    for rng in b.rngs:
        points = record(rng, "corners", agf.order_points(agf.generate_perspective_points((h, w), p.scale, rng)))
        matrix, max_w, max_h = agf.compute_perspective_params(points, (h, w))
        adjusted = np.array([[w / max_w, 0, 0], [0, h / max_h, 0], [0, 0, 1]]) @ matrix  # albumentations keep_size
        inverses.append(np.linalg.inv(adjusted))
    return _warp(images, np.stack(inverses), "constant")


@device_kernel("grid_distortion", exact=True, note="grid steps drawn from the CPU kernel's numpy streams")
def grid_distortion(images: torch.Tensor, p: GridDistortionParams, b: DeviceBatch) -> torch.Tensor:
    h, w = images.shape[1:3]
    axes_x, axes_y = [], []
    for rng in b.rngs:
        steps_x = list(record(rng, "steps_x", 1.0 + rng.uniform(-p.distort_limit, p.distort_limit, p.num_steps + 1)))
        steps_y = list(record(rng, "steps_y", 1.0 + rng.uniform(-p.distort_limit, p.distort_limit, p.num_steps + 1)))
        norm = agf.normalize_grid_distortion_steps((h, w), p.num_steps, steps_x, steps_y)
        # albumentations' grid is a meshgrid of one x and one y profile: only the profiles are built on the host
        even = [1.0] * (p.num_steps + 1)
        map_x, _ = agf.generate_grid((1, w), norm["steps_x"], even, p.num_steps)
        _, map_y = agf.generate_grid((h, 1), even, norm["steps_y"], p.num_steps)
        axes_x.append(map_x[0])
        axes_y.append(map_y[:, 0])
    xx = torch.from_numpy(np.stack(axes_x)).to(images.device)
    yy = torch.from_numpy(np.stack(axes_y)).to(images.device)
    return separable_remap(images, xx, yy, "reflect101")


@lru_cache(maxsize=32)
def _lens_taps(h: int, w: int, c: int, k: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    map_x, map_y = agf.get_camera_matrix_distortion_maps((h, w), k)
    return shared_taps(map_x, map_y, h, w, c, range(c), "constant")


@device_kernel("lens_distortion", exact=True, note="one map for the batch: cv2's bilinear taps as gathers")
def lens_distortion(images: torch.Tensor, p: LensDistortionParams, b: DeviceBatch) -> torch.Tensor:
    return remap_shared(images, _lens_taps(*images.shape[1:], p.k), "constant").view(images.shape)


@device_kernel("elastic", exact=False, note="displacement noise drawn from a torch generator per image")
def elastic(images: torch.Tensor, p: ElasticParams, b: DeviceBatch) -> torch.Tensor:
    n, h, w, _ = images.shape
    s = size_scale(images)
    sigma = max(p.sigma * s, 0.5)
    # cv2.GaussianBlur on float32 noise sizes its kernel 2 * round(4 sigma) + 1 (not 3 sigma as for uint8)
    taps = cv2.getGaussianKernel(int(round(sigma * 4 * 2 + 1)) | 1, sigma).ravel()
    noise = b.rand((h, w, 2)).mul_(2.0).sub_(1.0)  # the x and y fields as the channels of one image
    smooth = separable_filter(noise, taps, taps)
    rms = smooth.double().square().mean(dim=(1, 2), keepdim=True).sqrt().clamp_(min=1e-8)
    fields = smooth * (p.alpha * s / rms).float()
    xs, ys = pixel_grid(h, w, images.device)
    return nhwc_uint8(remap(nchw(images), xs + fields[..., 0], ys + fields[..., 1], "reflect101"))

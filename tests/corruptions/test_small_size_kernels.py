"""Below 224 px defocus_blur blurs as the 224-pixel disk does on the image enlarged to 224 px, and glass_blur
swaps pixels on the image enlarged to 224 px (the device kernel with cv2.resize's own weights)."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
import torch

from domainbench import corruptions
from domainbench.corruptions.device.blur import resize, resize_weights
from domainbench.corruptions.kernels.blur import defocus_kernel, disk_kernel, supersampled_shape

LADDER = corruptions.get("defocus_blur").ladder


@pytest.mark.parametrize("severity", [1, 3, 5])
def test_at_a_seventh_of_224_the_kernel_is_the_blur_done_at_224(severity: int) -> None:
    """32 px: each pixel replicated 7 x 7, blurred with the 224-pixel disk, averaged over 7 x 7 blocks."""
    radius, alias = LADDER[severity]["radius"], LADDER[severity]["alias_blur"]
    small = np.random.default_rng(severity).uniform(0, 255, (12, 12))
    big = cv2.filter2D(np.repeat(np.repeat(small, 7, 0), 7, 1), -1, disk_kernel(radius, alias).astype(np.float64),
                       borderType=cv2.BORDER_REFLECT_101)
    by_hand = big.reshape(12, 7, 12, 7).mean(axis=(1, 3))
    got = cv2.filter2D(small, -1, defocus_kernel(radius, alias, 32 / 224).astype(np.float64), borderType=cv2.BORDER_REFLECT_101)
    inner = slice(3, -3)  # away from the borders, where replicating then reflecting differs from reflecting
    np.testing.assert_allclose(got[inner, inner], by_hand[inner, inner], atol=1e-3)


@pytest.mark.parametrize("size", [16, 48, 100, 223])
def test_at_any_scale_the_disk_is_spread_by_a_pixel_and_integrated_over_each(size: int) -> None:
    """Against a midpoint rule, 10^4 samples per unit pixel along each axis (the rule factorises into the
    axes: weights[i, u] = length of unit pixel u inside small pixel i), and scipy's convolution."""
    from scipy.signal import convolve2d

    radius, alias = LADDER[4]["radius"], LADDER[4]["alias_blur"]
    fine = disk_kernel(radius, alias).astype(np.float64)
    scale = size / 224
    got = defocus_kernel(radius, alias, scale)
    m = got.shape[0] // 2
    half = int(np.ceil((m + 0.5) / scale))  # unit pixels of the small kernel's reach
    step = 1e-4
    pts = np.arange(-half - 0.5 + step / 2, half + 0.5, step)
    pts = pts[np.abs(pts * scale) < m + 0.5]  # inside the small kernel's pixels
    weights = np.zeros((2 * m + 1, 2 * half + 1))
    np.add.at(weights, (np.floor(pts * scale + 0.5).astype(int) + m, np.floor(pts + 0.5).astype(int) + half), step)
    box = weights[m] * scale  # one small pixel in unit pixels, summing to 1
    pad = half - fine.shape[0] // 2
    spread = convolve2d(np.pad(fine, pad), np.outer(box, box), mode="same")
    np.testing.assert_allclose(got, weights @ spread @ weights.T, atol=5e-4 * got.max())
    assert got.sum() == pytest.approx(fine.sum(), rel=1e-6)


def test_from_224_on_the_disk_is_imagenet_cs() -> None:
    for scale in (1.0, 512 / 224):
        np.testing.assert_array_equal(defocus_kernel(6.0, 0.5, scale), disk_kernel(6.0 * scale, 0.5))


@pytest.mark.parametrize("size", [16, 24, 32, 64])
def test_every_defocus_severity_changes_a_small_image_more(size: int, photo) -> None:
    img = photo(size, size)
    change = [np.abs(corruptions.corrupt(img, "defocus_blur", severity=s).astype(int) - img).mean() for s in range(1, 6)]
    assert all(b > a for a, b in zip(change, change[1:])), np.round(change, 3)


def test_supersampled_shape_keeps_the_aspect_and_stops_at_224() -> None:
    assert supersampled_shape(32, 32) == (224, 224) and supersampled_shape(48, 64) == (224, 299)
    assert supersampled_shape(100, 37) == (605, 224) and supersampled_shape(224, 300) is None


@pytest.mark.parametrize(("small", "big"), [((32, 32), (224, 224)), ((48, 64), (224, 299)), ((37, 50), (224, 303))])
def test_device_resize_weights_reproduce_cv2_resize(small: tuple[int, int], big: tuple[int, int]) -> None:
    x = np.random.default_rng(0).uniform(0, 255, (*small, 3)).astype(np.float32)
    up = resize(torch.from_numpy(x)[None], resize_weights(big[0], small[0], cv2.INTER_LINEAR),
                resize_weights(big[1], small[1], cv2.INTER_LINEAR))[0].numpy()
    np.testing.assert_allclose(up, cv2.resize(x, big[::-1], interpolation=cv2.INTER_LINEAR), atol=1e-3)
    down = resize(torch.from_numpy(up)[None], resize_weights(small[0], big[0], cv2.INTER_AREA),
                  resize_weights(small[1], big[1], cv2.INTER_AREA))[0].numpy()
    np.testing.assert_allclose(down, cv2.resize(up, small[::-1], interpolation=cv2.INTER_AREA), atol=1e-3)

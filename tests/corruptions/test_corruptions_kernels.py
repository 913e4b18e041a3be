"""Kernels against independent computations: exact transforms, hand formulas, library references."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from albumentations.augmentations.blur import functional as abf

import corruptions
from corruptions.kernels.blur import disk_kernel, glass_shuffle, motion_kernel


def test_flips_are_exact_and_involutions(photo):
    img = photo(30, 44)
    h = corruptions.corrupt(img, "horizontal_flip", severity=1)
    v = corruptions.corrupt(img[..., 0], "vertical_flip", severity=3)
    np.testing.assert_array_equal(h, img[:, ::-1])
    np.testing.assert_array_equal(v, img[::-1, :, 0])
    np.testing.assert_array_equal(corruptions.corrupt(h, "horizontal_flip", severity=5), img)
    assert corruptions.get("horizontal_flip").ordinal is False


@pytest.mark.parametrize("angle,k", [(90.0, 1), (-90.0, 3), (180.0, 2), (0.0, 0)])
def test_quarter_rotations_equal_rot90(photo, angle, k):
    img = photo(32, 32)
    np.testing.assert_array_equal(corruptions.corrupt(img, "rotation", params={"angle": angle}), np.rot90(img, k))
    rect = photo(20, 36)
    if k % 2 == 0:
        np.testing.assert_array_equal(corruptions.corrupt(rect, "rotation", params={"angle": angle}), np.rot90(rect, k))


def test_small_rotation_matches_cv2_and_keeps_centre(photo):
    img = photo(33, 33)
    out = corruptions.corrupt(img, "rotation", params={"angle": 10.0})
    m = cv2.getRotationMatrix2D((16.0, 16.0), 10.0, 1.0)
    np.testing.assert_array_equal(out, cv2.warpAffine(img, m, (33, 33)))
    np.testing.assert_array_equal(out[16, 16], img[16, 16])


def test_brightness_contrast_posterize_hand_formulas(photo):
    img = photo(20, 24)
    x = img.astype(np.float64)
    np.testing.assert_array_equal(corruptions.corrupt(img, "brightness", params={"delta": 0.2}),
                                  np.clip(np.rint(x + 51.0), 0, 255).astype(np.uint8))
    mean = x.mean()
    np.testing.assert_array_equal(corruptions.corrupt(img, "contrast", params={"factor": 0.3}),
                                  np.clip(np.rint((x - mean) * 0.3 + mean), 0, 255).astype(np.uint8))
    np.testing.assert_array_equal(corruptions.corrupt(img, "posterize", params={"bits": 2}), (img // 64) * 64)


def test_gaussian_noise_has_the_requested_std():
    grey = np.full((200, 200), 128, np.uint8)
    diff = corruptions.corrupt(grey, "gaussian_noise", params={"sigma": 0.1}, seed=3).astype(float) - 128
    assert abs(diff.mean()) < 0.3 and diff.std() == pytest.approx(25.5, rel=0.02)


def test_shot_noise_is_poisson():
    grey = np.full((200, 200), 128, np.uint8)
    photons = 60.0  # counts ~ Poisson(128 * photons / 255), scaled back by 255 / photons
    out = corruptions.corrupt(grey, "shot_noise", params={"photons": photons}, seed=1).astype(float)
    assert out.mean() == pytest.approx(128, abs=0.5)
    assert out.std() == pytest.approx(np.sqrt(128 * photons / 255) * 255 / photons, rel=0.03)


@pytest.mark.parametrize("name,per_channel", [("salt_and_pepper", False), ("impulse_noise", True)])
def test_impulse_noises_hit_the_requested_fraction(name, per_channel):
    grey = np.full((150, 150, 3), 128, np.uint8)
    out = corruptions.corrupt(grey, name, params={"amount": 0.2}, seed=5)
    hit = out != 128
    assert set(np.unique(out)) == {0, 128, 255}
    if not per_channel:
        assert (hit.all(-1) == hit.any(-1)).all()  # whole pixels
    assert hit.mean() == pytest.approx(0.2, abs=0.01)
    assert (out == 255).mean() == pytest.approx(0.1, abs=0.01)


def test_jpeg_equals_opencv_round_trip_in_bgr(photo):
    img = photo(40, 48)
    _, buf = cv2.imencode(".jpg", np.ascontiguousarray(img[..., ::-1]), (cv2.IMWRITE_JPEG_QUALITY, 20))
    expected = cv2.imdecode(buf, cv2.IMREAD_COLOR)[..., ::-1]
    np.testing.assert_array_equal(corruptions.corrupt(img, "jpeg_compression", params={"quality": 20}), expected)


@pytest.mark.parametrize("shape,delta,iterations", [((40, 56, 3), 1, 2), ((48, 48, 1), 3, 3)])
def test_glass_shuffle_matches_albumentations(photo, shape, delta, iterations):
    img = photo(shape[0], shape[1])[..., : shape[2]].copy()
    dxy = np.random.default_rng(0).integers(-delta, delta, size=((shape[0] - 2 * delta) * (shape[1] - 2 * delta), iterations, 2))
    expected = abf.glass_blur(img, 1.0, delta, iterations, dxy, "fast").reshape(img.shape)
    blurred = cv2.GaussianBlur(img, (0, 0), sigmaX=1.0).reshape(img.shape)
    got = cv2.GaussianBlur(glass_shuffle(blurred.copy(), delta, dxy), (0, 0), sigmaX=1.0).reshape(img.shape)
    np.testing.assert_array_equal(got, expected)


def test_blur_kernels_are_normalised_and_shaped():
    k = disk_kernel(4.0, 0.01)
    assert k.sum() == pytest.approx(1.0, abs=1e-5)
    np.testing.assert_allclose(k, k.T, atol=1e-7)
    np.testing.assert_allclose(k, k[::-1, ::-1], atol=1e-7)
    # pixel weights are covered areas, so they add up to the disk's area pi * r**2
    assert (k / k.max()).sum() == pytest.approx(np.pi * 16, rel=0.02)
    m = motion_kernel(9.0, 0.0)
    assert m.sum() == pytest.approx(1.0, abs=1e-6)
    assert (m.sum(axis=1) > 0).sum() == 1  # a horizontal line occupies one row
    assert (m.sum(axis=0) > 1e-6).sum() == 9


def test_pixelate_makes_constant_blocks(photo):
    img = photo(64, 64)
    out = corruptions.corrupt(img, "pixelate", params={"scale": 0.25})
    blocks = out.reshape(16, 4, 16, 4, 3)
    assert (blocks == blocks[:, :1, :, :1]).all()


def test_vignetting_keeps_centre_and_darkens_corners():
    white = np.full((65, 65), 200, np.uint8)
    out = corruptions.corrupt(white, "vignetting", params={"strength": 0.5})
    assert out[32, 32] == 200 and out[0, 0] == 100 and out[32, 0] > out[0, 0]


def test_size_dependent_parameters_scale_with_the_image(photo):
    """Blurring a 2x image and downsampling matches blurring the downsampled image."""
    small, big = photo(64, 64), photo(128, 128)
    a = corruptions.corrupt(small, "gaussian_blur", severity=4).astype(float)
    b = cv2.resize(corruptions.corrupt(big, "gaussian_blur", severity=4), (64, 64), interpolation=cv2.INTER_AREA)
    assert np.abs(a - b).mean() < 2.5
    unscaled = cv2.resize(cv2.GaussianBlur(big, (0, 0), sigmaX=4.0 * 64 / 224), (64, 64), interpolation=cv2.INTER_AREA)
    assert np.abs(a - b).mean() < np.abs(a - unscaled).mean()


def test_derive_seed_is_numpy_seedsequence_spawn():
    child = np.random.SeedSequence(42).spawn(3)[2]
    assert corruptions.derive_seed(42, 2) == int(child.generate_state(1, np.uint64)[0]) >> 1
    assert len({corruptions.derive_seed(0, i) for i in range(100)}) == 100

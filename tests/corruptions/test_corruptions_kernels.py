"""Kernels against independent computations: exact transforms, hand formulas, library references."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from domainbench import corruptions
from domainbench.corruptions.kernels._imagenet_c import (
    clipped_zoom,
    hsv_saturation_affine,
    hsv_value_shift,
    motion_trail,
    motion_trail_kernel,
    sequential_swap_sources,
)
from domainbench.corruptions.kernels.blur import disk_kernel


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


def _hsv(rgb: np.ndarray) -> np.ndarray:
    """Hand-written RGB -> HSV (scikit-image's convention: grey pixels have hue 0), floats in [0, 1]."""
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    v = rgb.max(-1)
    c = v - rgb.min(-1)
    s = np.where(v > 0, c / np.where(v > 0, v, 1), 0)
    safe = np.where(c > 0, c, 1)
    h = np.where(v == r, ((g - b) / safe) % 6, np.where(v == g, (b - r) / safe + 2, (r - g) / safe + 4))
    return np.stack([np.where(c > 0, h / 6, 0), s, v], -1)


def _rgb(hsv: np.ndarray) -> np.ndarray:
    h, s, v = hsv[..., 0] * 6, hsv[..., 1], hsv[..., 2]
    i = np.floor(h).astype(int) % 6
    f = h - np.floor(h)
    p, q, t = v * (1 - s), v * (1 - f * s), v * (1 - (1 - f) * s)
    table = [(v, t, p), (q, v, p), (p, v, t), (p, q, v), (t, p, v), (v, p, q)]
    return np.stack([np.choose(i, [row[k] for row in table]) for k in range(3)], -1)


def test_brightness_contrast_saturate_posterize_hand_formulas(photo):
    """ImageNet-C's definitions: brightness in HSV value, contrast per channel, saturation in HSV."""
    img = photo(20, 24)
    x = img.astype(np.float64) / 255
    hsv = _hsv(x)
    bright = hsv.copy()
    bright[..., 2] = np.clip(bright[..., 2] + 0.2, 0, 1)
    np.testing.assert_allclose(corruptions.corrupt(img, "brightness", params={"delta": 0.2}).astype(float), _rgb(bright) * 255, atol=1.0)
    mean = x.mean(axis=(0, 1))
    np.testing.assert_array_equal(corruptions.corrupt(img, "contrast", params={"factor": 0.3}),
                                  np.clip(np.rint(((x - mean) * 0.3 + mean) * 255), 0, 255).astype(np.uint8))
    for factor, offset in ((0.3, 0.0), (5.0, 0.1)):
        sat = hsv.copy()
        sat[..., 1] = np.clip(sat[..., 1] * factor + offset, 0, 1)
        got = corruptions.corrupt(img, "saturate", params={"factor": factor, "offset": offset}).astype(float)
        np.testing.assert_allclose(got, _rgb(sat) * 255, atol=1.0)
    np.testing.assert_array_equal(corruptions.corrupt(img, "posterize", params={"bits": 2}), (img // 64) * 64)


def test_hsv_shortcuts_on_grey_and_black_pixels():
    px = np.array([[[0.0, 0.0, 0.0], [0.5, 0.5, 0.5], [1.0, 0.2, 0.2]]], np.float32)
    np.testing.assert_allclose(hsv_value_shift(px, 0.3), [[[0.3, 0.3, 0.3], [0.8, 0.8, 0.8], [1.0, 0.2, 0.2]]], atol=1e-6)
    # a grey pixel has hue 0 (red) in scikit-image, so added saturation turns it red, as in the reference
    np.testing.assert_allclose(hsv_saturation_affine(px, 5.0, 0.1)[0, 1], [0.5, 0.45, 0.45], atol=1e-6)
    np.testing.assert_allclose(hsv_saturation_affine(px, 0.0, 0.0)[0, 2], [1.0, 1.0, 1.0], atol=1e-6)


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


@pytest.mark.parametrize("shape,delta,iterations", [((40, 37), 2, 3), ((30, 30), 1, 2), ((33, 41), 4, 2)])
def test_glass_blur_copies_equal_the_reference_loop(shape, delta, iterations):
    """ImageNet-C's loop ``x[h, w], x[h', w'] = x[h', w'], x[h, w]`` on numpy views copies, pixel by pixel."""
    h, w = shape
    got = sequential_swap_sources(h, w, delta, iterations, np.random.default_rng(5))
    rng = np.random.default_rng(5)
    x = np.arange(h * w).reshape(h, w, 1)
    for _ in range(iterations):
        hs, ws = np.arange(h - delta, delta, -1), np.arange(w - delta, delta, -1)
        d = rng.integers(-delta, delta, size=(hs.size * ws.size, 2))
        k = 0
        for hh in hs:
            for ww in ws:
                dx, dy = d[k]
                k += 1
                x[hh, ww], x[hh + dy, ww + dx] = x[hh + dy, ww + dx], x[hh, ww]
    np.testing.assert_array_equal(got, x.ravel())


def test_blur_kernels_are_normalised_and_shaped():
    k = disk_kernel(4.0, 0.01)
    assert k.shape == (17, 17)  # ImageNet-C's disk lives on a grid of at least 17 x 17
    assert k.sum() == pytest.approx(1.0, abs=1e-5)
    np.testing.assert_allclose(k, k.T, atol=1e-7)
    np.testing.assert_allclose(k, k[::-1, ::-1], atol=1e-7)
    # 49 grid points lie within radius 4 (x^2 + y^2 <= 16), all of equal weight
    assert (k > k.max() / 2).sum() == 49
    m, anchor = motion_trail_kernel(3.0, 2.0, 0.0)  # width 7, horizontal: one row, trail on one side
    assert m.sum() == pytest.approx(1.0, abs=1e-6)
    assert (m.sum(axis=1) > 0).sum() == 1
    row = m[anchor[0]]
    np.testing.assert_allclose(row[anchor[1]:], np.exp(-np.arange(7) ** 2 / 8) / np.exp(-np.arange(7) ** 2 / 8).sum(), rtol=1e-6)
    assert not row[: anchor[1]].any()


def test_motion_trail_equals_the_reference_sum_of_shifts(photo):
    """The reference sums copies shifted by (-ceil(i cos a - 0.5), -ceil(i sin a - 0.5)), edges replicated."""
    img = photo(30, 34).astype(np.float32)
    radius, sigma, angle = 4, 3.0, 30.0
    width = 2 * radius + 1
    w = np.exp(-np.arange(width) ** 2 / (2 * sigma**2))
    w /= w.sum()
    expected = np.zeros_like(img)
    ys, xs = np.mgrid[:30, :34]
    for i in range(width):
        dy = -int(np.ceil(i * np.sin(np.deg2rad(angle)) - 0.5))
        dx = -int(np.ceil(i * np.cos(np.deg2rad(angle)) - 0.5))
        expected += w[i] * img[np.clip(ys - dy, 0, 29), np.clip(xs - dx, 0, 33)]
    np.testing.assert_allclose(motion_trail(img, radius, sigma, angle), expected, atol=1e-3)


def test_clipped_zoom_matches_scipy_zoom_of_the_centre(photo):
    from scipy.ndimage import zoom

    img = photo(40, 40).astype(np.float32)
    z = 1.2
    c = int(np.ceil(40 / z))
    top = (40 - c) // 2
    expected = zoom(img[top : top + c, top : top + c], (z, z, 1), order=1)[:40, :40]
    np.testing.assert_allclose(clipped_zoom(img, z), expected, atol=1e-3)


def test_pixelate_makes_constant_blocks_like_pil(photo):
    from PIL import Image

    img = photo(64, 64)
    out = corruptions.corrupt(img, "pixelate", params={"scale": 0.25})
    blocks = out.reshape(16, 4, 16, 4, 3)
    assert (blocks == blocks[:, :1, :, :1]).all()
    # ImageNet-C: PIL BOX down to int(side * scale), PIL NEAREST (pixel centres) back up
    odd = photo(50, 70)
    small = Image.fromarray(odd).resize((int(70 * 0.3), int(50 * 0.3)), Image.BOX)
    expected = np.asarray(small.resize((70, 50), Image.NEAREST)).astype(int)
    got = corruptions.corrupt(odd, "pixelate", params={"scale": 0.3}).astype(int)
    assert np.abs(got - expected).max() <= 1  # PIL rounds its fixed-point box weights


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

"""The torch device kernels agree with the numpy CPU kernels (run on CPU tensors here).

Kernels that draw their few random scalars from the CPU kernel's numpy streams (or draw
nothing) must give the CPU pixels up to one grey level of rounding, and the same ``drawn``
record. Kernels whose per-pixel fields come from a torch generator must give the same
distribution: mean and standard deviation of the change to the clean image, and SSIM to the
clean image within 0.02.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import cv2
import numpy as np
import pytest
import torch

from domainbench import corruptions
from domainbench.corruptions import device
from domainbench.corruptions.device import registry
from domainbench.corruptions.device.blur import disk_blur, disk_parts
from domainbench.corruptions.device.digital import torchvision_jpeg
from domainbench.corruptions.device.noise import shot_table
from domainbench.corruptions.kernels.blur import disk_kernel

EXACT = sorted(n for n, k in device.kernels().items() if k.exact)
RANDOM = sorted(n for n, k in device.kernels().items() if not k.exact and n != "jpeg_compression")
#: no device kernel: WebP (torchvision has no WebP encoder on any device); lens_spatter's water look
#: needs cv2's Canny edge linking and chamfer distance transform, both sequential
WITHOUT_KERNEL = {"lens_spatter", "webp_compression"}


def ssim(a: np.ndarray, b: np.ndarray) -> float:
    """Mean SSIM of two uint8 images on their luminance (Gaussian window, sigma 1.5; Wang et al. 2004)."""
    def grey(x: np.ndarray) -> np.ndarray:
        return (x.astype(np.float64) @ [0.299, 0.587, 0.114]) if x.shape[-1] == 3 else x[..., 0].astype(np.float64)

    x, y = grey(a), grey(b)
    blur = lambda z: cv2.GaussianBlur(z, (11, 11), 1.5)  # noqa: E731
    mx, my = blur(x), blur(y)
    vx, vy, cxy = blur(x * x) - mx**2, blur(y * y) - my**2, blur(x * y) - mx * my
    c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2
    return float(np.mean(((2 * mx * my + c1) * (2 * cxy + c2)) / ((mx**2 + my**2 + c1) * (vx + vy + c2))))


@pytest.fixture(scope="module")
def batch(photo: Callable[..., np.ndarray]) -> np.ndarray:
    """Three different photographs, 48 x 64 (small: these tests run in `make test`)."""
    return np.stack([photo(48, 64), photo(48, 64, "flower.jpg"), photo(96, 128)[20:68, 30:94]])


def test_every_corruption_but_two_has_a_device_kernel() -> None:
    assert set(device.names()) == set(corruptions.names(temporal=False)) - WITHOUT_KERNEL  # 36 of the 38


@pytest.mark.parametrize("name", EXACT)
@pytest.mark.parametrize("severity", [1, 5])
def test_deterministic_kernels_give_the_cpu_pixels(batch: np.ndarray, name: str, severity: int) -> None:
    seeds = [11, 12, 13]
    cpu, cpu_drawn = corruptions.corrupt_batch(batch, name, severity=severity, seeds=seeds, return_drawn=True)
    dev, dev_drawn = device.corrupt_batch(batch, name, severity=severity, seeds=seeds, return_drawn=True)
    assert isinstance(dev, torch.Tensor) and dev.dtype == torch.uint8 and tuple(dev.shape) == batch.shape
    diff = np.abs(cpu.astype(np.int16) - dev.numpy().astype(np.int16))
    assert diff.max() <= 1, f"{name}: {int((diff > 1).sum())} values differ by more than one grey level (max {diff.max()})"
    # rounding, not a different operation (cv2's bit-exact Gaussian blur rounds its taps to 1/256: ~7% of values)
    assert np.mean(diff > 0) < 0.1
    assert dev_drawn == cpu_drawn


@pytest.mark.parametrize("name", EXACT)
def test_deterministic_kernels_on_grey_and_odd_sizes(photo: Callable[..., np.ndarray], name: str) -> None:
    grey = cv2.cvtColor(photo(37, 50), cv2.COLOR_RGB2GRAY)[None].repeat(2, axis=0)  # (N, H, W): no channel axis
    cpu = corruptions.corrupt_batch(grey, name, severity=4, seeds=5)
    dev = device.corrupt_batch(torch.from_numpy(grey), name, severity=4, seeds=5)
    assert tuple(dev.shape) == grey.shape
    assert np.abs(cpu.astype(np.int16) - dev.numpy().astype(np.int16)).max() <= 1


def _change(clean: np.ndarray, out: np.ndarray) -> tuple[float, float, float]:
    d = out.astype(np.float64) - clean
    return float(d.mean()), float(d.std()), float(np.mean([ssim(c, o) for c, o in zip(clean, out)]))


@pytest.mark.parametrize("name", RANDOM)
@pytest.mark.parametrize("severity", [1, 4])
def test_random_kernels_draw_the_same_distribution(photo: Callable[..., np.ndarray], name: str, severity: int) -> None:
    # three photographs, four seeds each: sparse noise (iso_noise at severity 1 hits ~0.8% of the pixels)
    # changes std by ~5% between seeds on one generator on three images; twelve halve that
    clean = np.tile(np.stack([photo(96, 96), photo(96, 96, "flower.jpg"), photo(192, 192)[40:136, 60:156]]), (4, 1, 1, 1))
    seeds = list(range(101, 113))
    cpu_mean, cpu_std, cpu_ssim = _change(clean, corruptions.corrupt_batch(clean, name, severity=severity, seeds=seeds))
    dev_mean, dev_std, dev_ssim = _change(clean, device.corrupt_batch(clean, name, severity=severity, seeds=seeds).numpy())
    assert cpu_std > 2  # the corruption changes the images, so the comparison says something
    assert abs(dev_mean - cpu_mean) <= 1.0
    # 5%: sparse noise (salt and pepper hits ~8,000 pixels here) varies by ~1% between seeds on one generator
    assert abs(dev_std - cpu_std) <= 0.05 * cpu_std
    assert abs(dev_ssim - cpu_ssim) <= 0.02


@pytest.mark.parametrize("name", RANDOM)
def test_random_kernels_are_a_function_of_each_images_seed(batch: np.ndarray, name: str) -> None:
    whole = device.corrupt_batch(batch, name, severity=3, seeds=[1, 2, 3]).numpy()
    again = device.corrupt_batch(batch, name, severity=3, seeds=[1, 2, 3]).numpy()
    alone = device.corrupt_batch(batch[1:2], name, severity=3, seeds=[2]).numpy()
    other = device.corrupt_batch(batch, name, severity=3, seeds=[1, 9, 3]).numpy()
    np.testing.assert_array_equal(whole, again)
    np.testing.assert_array_equal(whole[1:2], alone)  # the batch around an image does not change it
    assert (other[1] != whole[1]).any() and (other[[0, 2]] == whole[[0, 2]]).all()


@pytest.mark.parametrize("name", sorted(device.names()))
def test_kernels_give_the_same_pixels_however_a_cpu_batch_is_split(batch: np.ndarray, name: str,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    kernel = device.get_kernel(name)
    monkeypatch.setitem(registry._KERNELS, name, dataclasses.replace(kernel, cpu_chunk=None))
    whole, whole_drawn = device.corrupt_batch(batch, name, severity=3, seeds=[4, 5, 6], return_drawn=True)
    monkeypatch.setitem(registry._KERNELS, name, dataclasses.replace(kernel, cpu_chunk=2))  # sub-batches of 2 and 1 images
    split, split_drawn = device.corrupt_batch(batch, name, severity=3, seeds=[4, 5, 6], return_drawn=True)
    np.testing.assert_array_equal(split.numpy(), whole.numpy())
    assert split_drawn == whole_drawn


@pytest.mark.parametrize("severity", [3, 5])
def test_defocus_run_sums_and_the_edge_case_give_the_cpu_pixels(photo: Callable[..., np.ndarray], severity: int) -> None:
    # at 224 pixels severity 3 (radius 6) takes the disk's run sums; at severity 5 (radius 10) the disk
    # meets the edge of its grid, where cv2's reflection changes the kernel: the SVD filter instead
    image = photo(224, 224)[None]
    radius = float(corruptions.get("defocus_blur").ladder[severity]["radius"])
    assert (disk_parts(radius, 0.5) is None) == (severity == 5)
    cpu = corruptions.corrupt_batch(image, "defocus_blur", severity=severity, seeds=0)
    diff = np.abs(cpu.astype(np.int16) - device.corrupt_batch(image, "defocus_blur", severity=severity, seeds=0).numpy())
    assert diff.max() <= 1 and np.mean(diff > 0) < 0.1


def test_disk_run_sums_equal_a_dense_correlation_with_the_disk_kernel() -> None:
    x = torch.from_numpy(np.random.default_rng(0).integers(0, 256, (2, 30, 41, 3), dtype=np.uint8))
    for radius, alias_blur in [(0.5, 0.5), (2.2, 0.3), (3.0, 0.1), (6.9, 0.5)]:
        parts = disk_parts(radius, alias_blur)
        assert parts is not None
        kernel = disk_kernel(radius, alias_blur)
        dense = np.stack([[cv2.filter2D(np.ascontiguousarray(im[..., c]).astype(np.float32), -1, kernel,
                                        borderType=cv2.BORDER_REFLECT_101) for c in range(3)] for im in x.numpy()])
        runs = disk_blur(x, *parts).permute(0, 3, 1, 2).numpy()
        np.testing.assert_allclose(runs, dense, atol=1e-3)
    assert disk_parts(7.0, 0.5) is None and disk_parts(10.0, 0.5) is None  # within the softening's reach of the edge


@pytest.mark.parametrize("photons", [3.0, 12.0, 100.0])
def test_shot_noise_table_draws_each_output_with_its_poisson_probability(photons: float) -> None:
    from scipy.stats import poisson

    table = shot_table(photons).reshape(256, -1)
    for value in (0, 1, 40, 128, 255):
        counts = np.arange(int(value * photons / 255 + 12 * np.sqrt(photons) + 30))
        outputs = np.clip(np.rint(counts * (255.0 / photons)), 0, 255).astype(np.uint8)
        pmf = poisson.pmf(counts, value * photons / 255)
        for out in np.unique(outputs):
            # an output's share of the table's uniforms: the Poisson mass of the counts that give it
            expected = pmf[outputs == out].sum() + (1 - pmf.sum() if out == outputs[-1] else 0.0)
            assert abs(np.mean(table[value] == out) - expected) <= 2.0 ** -14 + 1e-9, (value, out)


def test_poisson_counts_have_poisson_means_and_variances() -> None:
    from domainbench.corruptions.device.common import DeviceBatch
    from domainbench.corruptions.device.sensor import poisson_counts

    lam = np.array([0.3, 4.0, 300.0])  # 300: more than 255 CDF steps, counted in int32
    counts = poisson_counts(lam, DeviceBatch([1, 2, 3], [{}, {}, {}], torch.device("cpu")), (200, 200)).numpy()
    assert counts.shape == (3, 200, 200) and (counts == np.round(counts)).all()
    mean, var = counts.reshape(3, -1).mean(1), counts.reshape(3, -1).var(1)
    # 40,000 draws each: the standard error of the mean is sqrt(lam / 40000)
    np.testing.assert_allclose(mean, lam, atol=0, rtol=0.02)
    np.testing.assert_allclose(var, lam, rtol=0.05)


def test_jpeg_on_a_cpu_device_is_the_cpu_codec(batch: np.ndarray) -> None:
    cpu = corruptions.corrupt_batch(batch, "jpeg_compression", severity=4, seeds=0)
    np.testing.assert_array_equal(device.corrupt_batch(batch, "jpeg_compression", severity=4, seeds=0).numpy(), cpu)


@pytest.mark.parametrize("quality", [25, 7])
def test_torchvision_jpeg_codec_matches_cv2_in_distribution(photo: Callable[..., np.ndarray], quality: int) -> None:
    # the codec the CUDA path batches (nvJPEG there, libjpeg here): same quality scale and subsampling as cv2's
    clean = np.stack([photo(96, 96), photo(96, 96, "flower.jpg")])
    cpu = corruptions.corrupt_batch(clean, "jpeg_compression", params={"quality": quality}, seeds=0)
    tv = torchvision_jpeg(torch.from_numpy(clean), quality).numpy()
    _, cpu_std, cpu_ssim = _change(clean, cpu)
    _, tv_std, tv_ssim = _change(clean, tv)
    assert abs(tv_std - cpu_std) <= 0.05 * cpu_std
    assert abs(tv_ssim - cpu_ssim) <= 0.02


def test_explicit_params_are_validated_by_the_cpu_spec(batch: np.ndarray) -> None:
    out = device.corrupt_batch(batch, "gaussian_blur", params={"sigma": 2.5}, seeds=0).numpy()
    np.testing.assert_array_equal(np.abs(out.astype(int) - corruptions.corrupt_batch(batch, "gaussian_blur", params={"sigma": 2.5}).astype(int)) <= 1, True)
    with pytest.raises(corruptions.CorruptionError, match="sigma"):
        device.corrupt_batch(batch, "gaussian_blur", params={"sigma": 99.0})


def test_unknown_device_kernels_and_bad_tensors_are_named(batch: np.ndarray) -> None:
    with pytest.raises(corruptions.CorruptionError, match="no device kernel"):
        device.corrupt_batch(batch, min(WITHOUT_KERNEL), severity=1)
    with pytest.raises(corruptions.CorruptionError, match="uint8"):
        device.corrupt_batch(torch.zeros((2, 32, 32, 3)), "gaussian_noise", severity=1)


@pytest.mark.parametrize("delta", [1, 2, 3])
def test_glass_blur_swaps_follow_the_sequential_copies(delta: int) -> None:
    from domainbench.corruptions.device.blur import apply_swaps

    n, h, w = 2, 17, 15
    rng = np.random.default_rng(delta)
    dy, dx = (rng.integers(-delta, delta, size=(n, h - 2 * delta, w - 2 * delta)) for _ in range(2))
    got = apply_swaps(torch.arange(n * h * w, dtype=torch.int32).view(n, h, w), torch.as_tensor(dy, dtype=torch.int32),
                      torch.as_tensor(dx, dtype=torch.int32), delta)
    # the reference's loop: bottom-right to top-left, each visited pixel copies its neighbour's current value
    want = np.arange(n * h * w).reshape(n, h, w)
    for i in range(n):
        for y in range(h - delta, delta, -1):
            for x in range(w - delta, delta, -1):
                want[i, y, x] = want[i, y + dy[i, y - delta - 1, x - delta - 1], x + dx[i, y - delta - 1, x - delta - 1]]
    np.testing.assert_array_equal(got.numpy(), want)
    assert (want != np.arange(n * h * w).reshape(n, h, w)).mean() > 0.25  # copies did happen


@pytest.mark.parametrize("delta", [1, 3])
def test_glass_blur_swap_offsets_are_uniform_and_independent(delta: int) -> None:
    from domainbench.corruptions.device.blur import swap_offsets
    from domainbench.corruptions.device.common import DeviceBatch

    dy, dx = swap_offsets(DeviceBatch([1, 2], [{}, {}], torch.device("cpu")), (101, 99), delta)
    assert dy.shape == dx.shape == (2, 101, 99)
    pairs = ((dy + delta) * (2 * delta) + (dx + delta)).flatten().numpy()
    counts = np.bincount(pairs, minlength=(2 * delta) ** 2)
    assert counts.size == (2 * delta) ** 2  # no value outside [-delta, delta)
    expected = pairs.size / counts.size
    np.testing.assert_allclose(counts, expected, rtol=5 * np.sqrt(expected) / expected)
    assert not torch.equal(dy[0], dy[1])  # each image from its own generator

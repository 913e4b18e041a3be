"""SSIM/PSNR against scikit-image and ECE/NLL against plain loops and torchmetrics, on the same numbers."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from skimage.metrics import peak_signal_noise_ratio, structural_similarity

from domainbench.metrics.calibration import calibration_counts
from domainbench.records.unit_sums import N_BINS, CalibrationCounts
from domainbench.metrics.damage import damage_sums, luminance, ssim_per_image
from domainbench.records.unit_sums import DamageSums


def _photo_pair(rng: np.random.Generator, n: int, h: int, w: int, c: int) -> tuple[np.ndarray, np.ndarray]:
    # smooth content (so SSIM is far from 0) plus noise of varying strength per image
    yy, xx = np.mgrid[0:h, 0:w]
    base = (127 + 100 * np.sin(xx / 7.0)[None] * np.cos(yy / 5.0)[None]).astype(np.float64)
    clean = np.clip(base[..., None] + rng.normal(0, 10, (n, h, w, c)), 0, 255).astype(np.uint8)
    sigma = rng.uniform(2, 60, (n, 1, 1, 1))
    corrupted = np.clip(clean + rng.normal(0, 1, clean.shape) * sigma, 0, 255).astype(np.uint8)
    return clean, corrupted


def _skimage_ssim(clean: np.ndarray, corrupted: np.ndarray) -> np.ndarray:
    y0, y1 = luminance(torch.from_numpy(clean)).numpy(), luminance(torch.from_numpy(corrupted)).numpy()
    return np.array([structural_similarity(a, b, gaussian_weights=True, sigma=1.5, use_sample_covariance=False,
                                           data_range=255) for a, b in zip(y0, y1)])


@pytest.mark.parametrize(("h", "w", "c"), [(32, 32, 3), (23, 40, 3), (28, 28, 1), (64, 48, 3)])
def test_ssim_equals_scikit_image_on_luminance(h: int, w: int, c: int) -> None:
    clean, corrupted = _photo_pair(np.random.default_rng(h * w + c), 5, h, w, c)
    ours = ssim_per_image(clean, corrupted).numpy()
    ref = _skimage_ssim(clean, corrupted)
    np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-9)
    assert 0.05 < ref.min() and ref.max() < 0.999  # the cases test something between the extremes


def test_luminance_is_bt601_unrounded() -> None:
    px = np.array([[[[255, 0, 0], [0, 255, 0], [0, 0, 255], [10, 20, 30]]]], dtype=np.uint8)
    np.testing.assert_allclose(luminance(torch.from_numpy(px)).numpy()[0, 0],
                               [0.299 * 255, 0.587 * 255, 0.114 * 255, 0.299 * 10 + 0.587 * 20 + 0.114 * 30])


def test_cell_psnr_pools_mse_and_equals_scikit_image_for_one_image() -> None:
    clean, corrupted = _photo_pair(np.random.default_rng(1), 4, 24, 24, 3)
    one = damage_sums(clean[:1], corrupted[:1])
    assert one.psnr_db == pytest.approx(peak_signal_noise_ratio(clean[0], corrupted[0], data_range=255), abs=1e-6)
    cell = damage_sums(clean[:2], corrupted[:2]) + damage_sums(clean[2:], corrupted[2:])
    mse = np.mean([np.mean((a.astype(float) - b.astype(float)) ** 2) for a, b in zip(clean, corrupted)])
    assert cell.n == 4 and cell.psnr_db == pytest.approx(10 * math.log10(255**2 / mse), abs=1e-6)
    assert cell.ssim == pytest.approx(_skimage_ssim(clean, corrupted).mean(), abs=1e-9)
    # integer sums: the same cell split into other shards is the same, to the last digit
    assert damage_sums(clean[:1], corrupted[:1]) + damage_sums(clean[1:], corrupted[1:]) == cell


def test_identity_cell_has_ssim_one_and_undefined_psnr() -> None:
    clean, _ = _photo_pair(np.random.default_rng(2), 3, 20, 20, 3)
    sums = damage_sums(clean, clean.copy())
    assert sums.ssim == pytest.approx(1.0, abs=1e-12) and sums.psnr_db is None
    assert DamageSums.model_validate(sums.model_dump()) == sums and DamageSums().ssim is None


def _plain_ece_nll(logits: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    conf, pred = p.max(1), p.argmax(1)
    total = 0.0
    for b in range(N_BINS):
        lo, hi = b / N_BINS, (b + 1) / N_BINS
        members = [i for i in range(len(conf)) if lo <= conf[i] < hi or (b == N_BINS - 1 and conf[i] == 1.0)]
        if members:
            acc = sum(pred[i] == labels[i] for i in members) / len(members)
            mean_conf = sum(conf[i] for i in members) / len(members)
            total += len(members) / len(conf) * abs(acc - mean_conf)
    nll = -np.mean([math.log(p[i, labels[i]]) for i in range(len(labels))])
    return total, nll


@pytest.mark.parametrize("scale", [1.0, 10.0, 100.0])
def test_ece_and_nll_equal_a_plain_loop_and_torchmetrics(scale: float) -> None:
    from torchmetrics.classification import MulticlassCalibrationError

    rng = np.random.default_rng(int(scale))
    k, n = 7, 300
    logits = rng.normal(0, 1, (n, k)) * scale / 10
    labels = np.where(rng.random(n) < 0.6, logits.argmax(1), rng.integers(0, k, n))
    counts = calibration_counts(logits[:120], labels[:120]) + calibration_counts(logits[120:], labels[120:])
    assert counts == calibration_counts(logits[:7], labels[:7]) + calibration_counts(logits[7:], labels[7:])
    ece, nll = _plain_ece_nll(logits, labels)
    assert counts.n == n
    # fixed point: each image's confidence within 2^-33, its NLL within 2^-25 of the float64 value
    assert counts.ece == pytest.approx(ece, abs=1e-9) and counts.nll == pytest.approx(nll, abs=1e-7)
    metric = MulticlassCalibrationError(num_classes=k, n_bins=15, norm="l1")
    ref = float(metric(torch.softmax(torch.tensor(logits, dtype=torch.float64), 1), torch.tensor(labels)))
    assert counts.ece == pytest.approx(ref, abs=1e-6)


def test_unlabelled_images_are_left_out_and_counts_round_trip() -> None:
    logits = np.array([[2.0, 0.0], [0.0, 3.0], [1.0, 1.0]])
    counts = calibration_counts(logits, np.array([0, -1, 1]))
    assert counts.n == 2
    # hand-worked: confidences e^2/(1+e^2) = 0.8808 (right) and 0.5 (wrong) fall in bins 13 and 7
    c0 = math.exp(2) / (1 + math.exp(2))
    assert counts.count[13] == 1 and counts.count[7] == 1
    assert counts.ece == pytest.approx(((1 - c0) + 0.5) / 2)
    assert counts.nll == pytest.approx((-math.log(c0) - math.log(0.5)) / 2)
    again = CalibrationCounts.model_validate(counts.model_dump())
    assert again.ece == counts.ece and again.nll == counts.nll
    assert calibration_counts(logits, np.array([-1, -1, -1])).ece is None


def test_the_torch_path_equals_the_scipy_path() -> None:
    # the device path (torch convolutions over reflected borders), run here on the CPU
    from domainbench.metrics import damage

    clean, corrupted = _photo_pair(np.random.default_rng(5), 3, 30, 26, 3)
    x = damage.luminance(torch.from_numpy(np.concatenate([clean, corrupted])))
    np.testing.assert_allclose(damage._blur_torch(x).numpy(), damage._blur(x).numpy(), rtol=0, atol=1e-9)


def test_a_shared_reference_scores_a_prefix_subset() -> None:
    from domainbench.metrics.damage import SsimReference

    clean, corrupted = _photo_pair(np.random.default_rng(6), 6, 24, 24, 3)
    ref = SsimReference(clean)
    assert damage_sums(ref, corrupted[:4]).ssim == pytest.approx(_skimage_ssim(clean[:4], corrupted[:4]).mean(), abs=1e-9)


def test_damage_of_a_shard_larger_than_a_chunk_equals_image_by_image() -> None:
    # the shard is worked through in chunks (memory); every step is per image, so the numbers are exact
    from domainbench.metrics.damage import _CHUNK, SsimReference, mse_per_image

    rng = np.random.default_rng(7)
    n = 2 * _CHUNK + 5
    a, b = (rng.integers(0, 256, (n, 16, 18, 3), dtype=np.uint8) for _ in range(2))
    ref = SsimReference(a)
    one_by_one = [SsimReference(a[i : i + 1]).ssim(b[i : i + 1]) for i in range(n)]
    assert np.array_equal(ref.ssim(b).numpy(), np.concatenate([s.numpy() for s in one_by_one]))
    assert np.array_equal(ref.ssim(b[:40]).numpy(), ref.ssim(b).numpy()[:40])
    assert np.array_equal(mse_per_image(a, b).numpy(), np.concatenate([mse_per_image(a[i : i + 1], b[i : i + 1]).numpy()
                                                                       for i in range(n)]))

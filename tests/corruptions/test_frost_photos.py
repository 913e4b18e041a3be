"""Frost over the reference's photographs: found without importing imagecorruptions, cropped as it crops.

A fake ``imagecorruptions`` package (its ``__init__`` raises, so importing it would fail the test)
with generated photographs of the reference's shapes stands in for the installed one, so these
tests run everywhere; the last test uses the real photographs where the package is installed.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

from domainbench import corruptions
from domainbench.corruptions import CorruptionError, device
from domainbench.corruptions.kernels import frost_photos

#: the reference's photographs' (height, width), divided by 5 (small files, same aspect ratios and
#: still covering every branch of its resize rule for the image sizes below)
SHAPES = [(120, 180), (63, 112), (63, 112), (70, 105), (99, 132), (64, 97)]
#: image sizes: fits every photograph, too tall for some, too wide for some, too big for all
SIZES = [(48, 64), (100, 60), (40, 150), (200, 240)]
SEVERITY_WEIGHTS = {1: (1.0, 0.4), 2: (0.8, 0.6), 3: (0.7, 0.7), 4: (0.65, 0.7), 5: (0.6, 0.75)}


def _clear_caches() -> None:
    frost_photos._folder_for.cache_clear()
    frost_photos.rescaled_photo.cache_clear()
    frost_photos._photo.cache_clear()
    importlib.invalidate_caches()


@pytest.fixture
def fake_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A site folder first on sys.path holding an unimportable imagecorruptions with generated frost photographs."""
    pkg = tmp_path / "site" / "imagecorruptions"
    (pkg / "frost").mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise ImportError('the frost lookup must not import imagecorruptions')\n")
    rng = np.random.default_rng(7)
    for name, (h, w) in zip(frost_photos.FILES, SHAPES):
        smooth = cv2.resize(rng.integers(0, 256, (h // 8 + 2, w // 8 + 2, 3), dtype=np.uint8), (w, h), interpolation=cv2.INTER_CUBIC)
        photo = np.clip(smooth.astype(np.int16) + rng.integers(-30, 30, (h, w, 3)), 0, 255).astype(np.uint8)
        cv2.imwrite(str(pkg / "frost" / name), photo)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.delenv(frost_photos.ENV, raising=False)
    monkeypatch.delitem(sys.modules, "imagecorruptions", raising=False)
    _clear_caches()
    yield pkg / "frost"
    _clear_caches()


@pytest.fixture
def procedural(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(frost_photos.ENV, "procedural")
    _clear_caches()
    yield
    _clear_caches()


def reference_frost(x: np.ndarray, severity: int, folder: Path, idx: int, x_start: int, y_start: int) -> np.ndarray:
    """imagecorruptions 1.1.2's ``frost`` (corruptions.py) with its three random draws given, float64 as there."""
    c = SEVERITY_WEIGHTS[severity]
    frost = cv2.imread(str(folder / frost_photos.FILES[idx]))
    frost_shape = frost.shape
    x_shape = np.array(x).shape
    scaling_factor = 1
    if frost_shape[0] >= x_shape[0] and frost_shape[1] >= x_shape[1]:
        scaling_factor = 1
    elif frost_shape[0] < x_shape[0] and frost_shape[1] >= x_shape[1]:
        scaling_factor = x_shape[0] / frost_shape[0]
    elif frost_shape[0] >= x_shape[0] and frost_shape[1] < x_shape[1]:
        scaling_factor = x_shape[1] / frost_shape[1]
    elif frost_shape[0] < x_shape[0] and frost_shape[1] < x_shape[1]:
        scaling_factor = np.maximum(x_shape[0] / frost_shape[0], x_shape[1] / frost_shape[1])
    scaling_factor *= 1.1
    new_shape = (int(np.ceil(frost_shape[1] * scaling_factor)), int(np.ceil(frost_shape[0] * scaling_factor)))
    frost_rescaled = cv2.resize(frost, dsize=new_shape, interpolation=cv2.INTER_CUBIC)
    assert 0 <= x_start < max(frost_rescaled.shape[0] - x_shape[0], 1)
    assert 0 <= y_start < max(frost_rescaled.shape[1] - x_shape[1], 1)
    frost_rescaled = frost_rescaled[x_start : x_start + x_shape[0], y_start : y_start + x_shape[1]][..., [2, 1, 0]]
    return np.uint8(np.clip(c[0] * np.array(x) + c[1] * frost_rescaled, 0, 255))


def test_the_installed_folder_is_found_without_importing_the_package(fake_package: Path) -> None:
    assert frost_photos.photo_folder() == fake_package
    assert frost_photos.texture_source() == "imagenet-c"
    assert "imagecorruptions" not in sys.modules


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("severity", [1, 3, 5])
def test_frost_is_the_references_crop_and_blend(fake_package: Path, photo, size, severity) -> None:
    h, w = size
    images = np.stack([photo(h, w), photo(h, w, "flower.jpg"), photo(h, w)[::-1].copy(), photo(h, w)[:, ::-1].copy()])
    out, drawn = corruptions.corrupt_batch(images, "frost", severity=severity, seeds=[3, 4, 5, 6], return_drawn=True)
    assert drawn["texture"] == ["imagenet-c"] * 4
    for img, o, idx, (top, left) in zip(images, out, drawn["look"], drawn["crop"]):
        ref = reference_frost(img, severity, fake_package, idx, top, left)
        np.testing.assert_array_equal(o, ref)


def test_the_draws_are_the_references_in_its_order(fake_package: Path) -> None:
    """Photograph from integers(0, 5) (never the sixth), then crop top and left, all from the image's seed."""
    img = np.full((48, 64, 3), 100, np.uint8)
    _, drawn = corruptions.corrupt_batch(np.stack([img] * 40), "frost", severity=2, seeds=list(range(40)), return_drawn=True)
    for seed, idx, crop in zip(range(40), drawn["look"], drawn["crop"]):
        rng = np.random.default_rng(seed)
        assert idx == int(rng.integers(0, 5))
        big = frost_photos.rescaled_photo(fake_package, idx, 48, 64)
        assert crop == [int(rng.integers(0, big.shape[0] - 48)), int(rng.integers(0, big.shape[1] - 64))]
    assert set(drawn["look"]) == {0, 1, 2, 3, 4}


def test_rescaled_size_follows_the_references_four_cases() -> None:
    # 900 * 1.1 is 990.0000000000001 in floating point, so the reference's ceil gives 991 columns
    assert frost_photos.rescaled_size((600, 900), 224, 224) == (660, 991)
    assert frost_photos.rescaled_size((600, 900), 1024, 1024) == (1127, 1690)  # both short: the larger ratio, 1024 / 600
    for photo_hw in [(600, 900), (315, 560), (350, 527), (495, 660)]:
        for h, w in [(224, 224), (400, 300), (200, 700), (1024, 1024), (32, 1000), (1000, 32)]:
            frost = np.zeros((*photo_hw, 3), np.uint8)
            x_shape = (h, w, 3)
            scaling_factor = 1
            if frost.shape[0] >= x_shape[0] and frost.shape[1] >= x_shape[1]:
                scaling_factor = 1
            elif frost.shape[0] < x_shape[0] and frost.shape[1] >= x_shape[1]:
                scaling_factor = x_shape[0] / frost.shape[0]
            elif frost.shape[0] >= x_shape[0] and frost.shape[1] < x_shape[1]:
                scaling_factor = x_shape[1] / frost.shape[1]
            else:
                scaling_factor = np.maximum(x_shape[0] / frost.shape[0], x_shape[1] / frost.shape[1])
            scaling_factor *= 1.1
            expected = (int(np.ceil(frost.shape[0] * scaling_factor)), int(np.ceil(frost.shape[1] * scaling_factor)))
            got = frost_photos.rescaled_size(photo_hw, h, w)
            assert got == expected and got[0] > h and got[1] > w, (photo_hw, h, w)


def test_grey_images_take_the_references_grey_of_the_crop(fake_package: Path, photo) -> None:
    grey = cv2.cvtColor(photo(48, 64), cv2.COLOR_RGB2GRAY)
    out, drawn = corruptions.corrupt_batch(grey[None], "frost", severity=4, seeds=[9], return_drawn=True)
    (top, left), idx = drawn["crop"][0], drawn["look"][0]
    crop = frost_photos.rescaled_photo(fake_package, idx, 48, 64)[top : top + 48, left : left + 64].astype(np.float64)
    expected = np.uint8(np.clip(0.65 * grey + 0.7 * (crop @ [0.2989, 0.5870, 0.1140]), 0, 255))
    assert out.shape == (1, 48, 64)
    np.testing.assert_array_equal(out[0], expected)


def test_the_device_kernel_gives_the_cpu_pixels_over_photographs(fake_package: Path, photo) -> None:
    batch = np.stack([photo(48, 64), photo(48, 64, "flower.jpg"), photo(48, 64)[::-1].copy()])
    for severity in (1, 5):
        cpu, cpu_drawn = corruptions.corrupt_batch(batch, "frost", severity=severity, seeds=[1, 2, 3], return_drawn=True)
        dev, dev_drawn = device.corrupt_batch(batch, "frost", severity=severity, seeds=[1, 2, 3], return_drawn=True)
        assert isinstance(dev, torch.Tensor) and dev_drawn == cpu_drawn
        np.testing.assert_array_equal(cpu, dev.numpy())
    grey = cv2.cvtColor(photo(48, 64), cv2.COLOR_RGB2GRAY)[None].repeat(2, axis=0)
    cpu = corruptions.corrupt_batch(grey, "frost", severity=3, seeds=5)
    np.testing.assert_array_equal(cpu, device.corrupt_batch(torch.from_numpy(grey), "frost", severity=3, seeds=5).numpy())


def test_a_fixed_texture_replays_its_source_image_by_image(fake_package: Path, photo) -> None:
    batch = np.stack([photo(48, 64)] * 3)
    fixed = {"texture": ["procedural", None, "imagenet-c"]}
    cpu, drawn = corruptions.corrupt_batch(batch, "frost", severity=3, seeds=[1, 2, 3], return_drawn=True, drawn=fixed)
    assert drawn["texture"] == ["procedural", "imagenet-c", "imagenet-c"] and drawn["crop"][0] is None
    assert frost_photos.texture_of(drawn) == "mixed"
    procedural_only = corruptions.corrupt_batch(batch[:1], "frost", severity=3, seeds=[1], drawn={"texture": ["procedural"]})
    np.testing.assert_array_equal(cpu[:1], procedural_only)
    dev, dev_drawn = device.corrupt_batch(batch, "frost", severity=3, seeds=[1, 2, 3], return_drawn=True, drawn=fixed)
    assert dev_drawn == drawn and np.abs(cpu[1:].astype(np.int16) - dev.numpy()[1:]).max() <= 1


def test_procedural_when_forced_or_missing(procedural, photo) -> None:
    out, drawn = corruptions.corrupt_batch(photo(48, 64)[None], "frost", severity=3, seeds=[1], return_drawn=True)
    assert frost_photos.photo_folder() is None and drawn["texture"] == ["procedural"] and "crop" not in drawn
    assert frost_photos.texture_of(drawn) == "procedural" and frost_photos.texture_of({}) is None
    with pytest.raises(CorruptionError, match="needs the reference's frost photographs"):
        corruptions.corrupt_batch(photo(48, 64)[None], "frost", severity=3, seeds=[1], drawn={"texture": ["imagenet-c"]})
    with pytest.raises(CorruptionError, match="neither"):
        corruptions.corrupt_batch(photo(48, 64)[None], "frost", severity=3, seeds=[1], drawn={"texture": ["painted"]})


def test_a_folder_without_the_photographs_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, photo) -> None:
    monkeypatch.setenv(frost_photos.ENV, str(tmp_path))
    _clear_caches()
    try:
        with pytest.raises(CorruptionError, match=r"lacks the frost photograph\(s\) frost1.png"):
            corruptions.corrupt(photo(48, 64), "frost", severity=1)
    finally:
        monkeypatch.delenv(frost_photos.ENV)
        _clear_caches()


def _installed() -> Path | None:
    folder = frost_photos._installed_folder()
    return folder if folder is not None and (folder / "frost1.png").is_file() else None


@pytest.mark.skipif(_installed() is None, reason="imagecorruptions==1.1.2 not installed (make install adds it, --no-deps)")
def test_with_the_real_photographs_frost_matches_the_reference_statistics(monkeypatch: pytest.MonkeyPatch) -> None:
    """The stored reference statistics (2 photos x 10 draws per severity) within the benchmark's tolerance."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from imagenet_c_fidelity import PSNR_TOL, SSIM_TOL, cell_seed, psnr, ssim

    monkeypatch.delenv(frost_photos.ENV, raising=False)
    _clear_caches()
    data = Path(__file__).parent / "data"
    doc = json.loads((data / "imagenet_c_reference.json").read_text())
    images = [cv2.imread(str(data / n), cv2.IMREAD_COLOR)[..., ::-1].copy() for n in doc["images"]]
    for sev in range(1, 6):
        ref = np.array(doc["cells"][f"frost/{sev}"], dtype=float).mean(axis=0)
        # more draws than the reference's 20 so that our mean is steady; photograph choice dominates the spread
        ours = np.mean([(ssim(img, o), psnr(img, o)) for r in range(20) for i, img in enumerate(images)
                        for o in [corruptions.corrupt(img, "frost", severity=sev, seed=cell_seed(r, "frost", sev, i))]], axis=0)
        assert abs(ours[0] - ref[0]) <= SSIM_TOL and abs(ours[1] - ref[1]) <= PSNR_TOL, (sev, ours, ref)

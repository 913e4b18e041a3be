"""Bad inputs and bad parameters give clear CorruptionErrors (never OpenCV crashes)."""

from __future__ import annotations

import numpy as np
import pytest

from domainbench import corruptions
from domainbench.corruptions import CorruptionError

GOOD = np.zeros((16, 16, 3), np.uint8)


@pytest.mark.parametrize(
    "image,match",
    [
        (np.zeros((32, 32, 3), np.float32), "dtype uint8.*255"),
        (np.zeros((0, 0, 3), np.uint8), "empty"),
        (np.zeros((32, 32, 4), np.uint8), "1 or 3 channels.*alpha"),
        (np.zeros((1, 1), np.uint8), "at least 16x16"),
        (np.zeros((15, 40, 3), np.uint8), "at least 16x16"),
        (np.zeros((2, 32, 32, 3), np.uint8), "shape"),
        ([[0] * 32] * 32, "numpy array"),
    ],
)
@pytest.mark.parametrize("name", ["gaussian_blur", "jpeg_compression", "rotation", "saturate"])
def test_bad_images(image, match, name):
    with pytest.raises(CorruptionError, match=match):
        corruptions.corrupt(image, name, severity=2)


def test_bad_batches_and_seeds():
    batch = np.zeros((3, 16, 16, 3), np.uint8)
    with pytest.raises(CorruptionError, match="3 images"):
        corruptions.corrupt_batch(batch, "fog", severity=1, seeds=[1, 2])
    with pytest.raises(CorruptionError, match="seed"):
        corruptions.corrupt(GOOD, "fog", severity=1, seed=-1)
    with pytest.raises(CorruptionError, match="seed"):
        corruptions.corrupt(GOOD, "fog", severity=1, seed=1.5)  # type: ignore[arg-type]
    with pytest.raises(CorruptionError, match="images must have shape"):
        corruptions.corrupt_batch(GOOD[..., 0], "fog", severity=1)  # one image is not a batch
    with pytest.raises(CorruptionError, match="16x3"):
        corruptions.corrupt_batch(GOOD, "fog", severity=1)  # (16, 16, 3) reads as 16 grey 16x3 images
    assert corruptions.corrupt_batch(list(batch), "fog", severity=1).shape == batch.shape


@pytest.mark.parametrize("severity", [0, 6, -1, 2.0, True, "3"])
def test_bad_severity(severity):
    with pytest.raises(CorruptionError, match="severity must be an integer 1..5"):
        corruptions.corrupt(GOOD, "fog", severity=severity)


def test_exactly_one_of_severity_or_params():
    with pytest.raises(CorruptionError, match="exactly one"):
        corruptions.corrupt(GOOD, "fog")
    with pytest.raises(CorruptionError, match="exactly one"):
        corruptions.resolve_params("fog", severity=2, params={"density": 1.0})


def test_out_of_range_parameter_names_parameter_and_range():
    with pytest.raises(CorruptionError, match=r"'sigma' = 50 .*float in \[0.1, 20\]"):
        corruptions.validate_params("gaussian_blur", {"sigma": 50})
    with pytest.raises(CorruptionError, match=r"'quality' = 0 .*int in \[1, 100\]"):
        corruptions.corrupt(GOOD, "jpeg_compression", params={"quality": 0})
    with pytest.raises(CorruptionError, match=r"no parameter\(s\) 'sgma'.*sigma \(float in \[0.1, 20\]\)"):
        corruptions.validate_params("gaussian_blur", {"sgma": 2})
    with pytest.raises(CorruptionError, match="'quality' = 'high'"):
        corruptions.validate_params("jpeg_compression", {"quality": "high"})


def test_resolve_params_fills_from_severity_three():
    assert corruptions.resolve_params("snow", severity=5) == corruptions.get("snow").ladder[5]
    resolved = corruptions.resolve_params("snow", params={"threshold": 0.8})
    assert resolved == {**corruptions.get("snow").ladder[3], "threshold": 0.8}
    img = np.random.default_rng(0).integers(0, 255, (32, 32, 3), dtype=np.uint8)
    np.testing.assert_array_equal(corruptions.corrupt(img, "snow", params=resolved, seed=4),
                                  corruptions.corrupt(img, "snow", params={"threshold": 0.8}, seed=4))

"""Test images for the corruption tests: real photographs bundled with scikit-learn, resized."""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

import cv2
import numpy as np
import pytest
from sklearn.datasets import load_sample_image


@lru_cache
def _photo(height: int, width: int, which: str) -> np.ndarray:
    img = cv2.resize(load_sample_image(which), (width, height), interpolation=cv2.INTER_AREA)
    img.setflags(write=False)
    return img


@pytest.fixture(scope="session")
def photo() -> Callable[..., np.ndarray]:
    """photo(height, width, which="china.jpg") -> read-only (height, width, 3) uint8 photograph."""
    return lambda height, width, which="china.jpg": _photo(height, width, which)

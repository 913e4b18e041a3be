"""Generated images as compact payloads: PNG bytes (lossless: what is stored is what was scored), base64."""

from __future__ import annotations

import base64
import io

import numpy as np
from PIL import Image


def to_png_b64(image: np.ndarray) -> str:
    arr = np.asarray(image, dtype=np.uint8)
    if arr.ndim == 3 and arr.shape[-1] == 1:
        arr = arr[..., 0]
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="PNG", optimize=True)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def from_png_b64(payload: str, like: tuple[int, ...] | None = None) -> np.ndarray:
    """The decoded uint8 image; ``like`` restores a trailing channel axis of 1 that PNG drops."""
    arr = np.asarray(Image.open(io.BytesIO(base64.b64decode(payload))))
    if like is not None and len(like) == 3 and like[-1] == 1 and arr.ndim == 2:
        arr = arr[..., None]
    return arr

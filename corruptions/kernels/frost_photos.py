"""ImageNet-C's frost photographs: found in an installed ``imagecorruptions`` 1.1.2, cropped as it crops them.

The reference overlays a crop of one of its frost photographs (shipped inside its package folder,
``imagecorruptions/frost/``). When that package is installed (``pip install 'domainbench[imagenet-c]'``,
or ``pip install --no-deps imagecorruptions==1.1.2``: only its data files are read) frost uses the
photographs; otherwise the procedural ice texture of ``weather.py``. The package is located without
being imported (``importlib.util.find_spec`` of a top-level name runs none of its code): it may not
import at all under NumPy 2.

``DOMAINBENCH_FROST_PHOTOS`` overrides the search: a folder holding ``frost1.png`` ... ``frost6.jpg``,
or ``procedural`` to use the procedural texture even where the photographs are installed.
"""

from __future__ import annotations

import importlib.util
import os
from functools import lru_cache
from pathlib import Path
from typing import Literal

import cv2
import numpy as np

from domainbench.corruptions.draws import record
from domainbench.corruptions.errors import CorruptionError

TextureSource = Literal["imagenet-c", "procedural"]
ENV = "DOMAINBENCH_FROST_PHOTOS"
#: the reference's list; it draws ``np.random.randint(5)``, so the sixth photograph is never used
FILES = ("frost1.png", "frost2.png", "frost3.png", "frost4.jpg", "frost5.jpg", "frost6.jpg")
N_DRAWN = 5


def _installed_folder() -> Path | None:
    try:
        spec = importlib.util.find_spec("imagecorruptions")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "frost"


@lru_cache(maxsize=8)
def _folder_for(override: str | None) -> Path | None:
    if override is not None and override.strip():
        if override.strip().lower() == "procedural":
            return None
        folder = Path(override).expanduser()
        missing = [f for f in FILES[:N_DRAWN] if not (folder / f).is_file()]
        if missing:
            raise CorruptionError(
                f"{ENV}={override!r} lacks the frost photograph(s) {', '.join(missing)}; point it at imagecorruptions' "
                f"frost folder, or set it to 'procedural'"
            )
        return folder
    folder = _installed_folder()
    if folder is None or not all((folder / f).is_file() for f in FILES[:N_DRAWN]):
        return None
    return folder


def photo_folder() -> Path | None:
    """The folder of the reference's frost photographs, or None where frost falls back to its procedural texture."""
    return _folder_for(os.environ.get(ENV))


def texture_source() -> TextureSource:
    """Which ice layer frost overlays in this environment."""
    return "procedural" if photo_folder() is None else "imagenet-c"


@lru_cache(maxsize=8)
def _photo(path: str) -> np.ndarray:
    img = cv2.imread(path, cv2.IMREAD_COLOR)
    if img is None:
        raise CorruptionError(f"frost photograph {path} cannot be read; reinstall imagecorruptions==1.1.2 or set {ENV}=procedural")
    img.setflags(write=False)
    return img


def rescaled_size(photo_hw: tuple[int, int], h: int, w: int) -> tuple[int, int]:
    """(height, width) the reference resizes a photograph of ``photo_hw`` to before cropping h x w from it.

    The reference enlarges the photograph just enough to cover the image (by the larger of the two
    ratios when both sides are short) and then by a further 10%, always.
    """
    ph, pw = photo_hw
    if ph >= h and pw >= w:
        factor = 1.0
    elif ph < h and pw >= w:
        factor = h / ph
    elif ph >= h and pw < w:
        factor = w / pw
    else:
        factor = float(np.maximum(h / ph, w / pw))
    factor *= 1.1
    return int(np.ceil(ph * factor)), int(np.ceil(pw * factor))


@lru_cache(maxsize=16)
def rescaled_photo(folder: Path, index: int, h: int, w: int) -> np.ndarray:
    """Photograph ``index`` resized (bicubic, as the reference) to cover an h x w image, RGB uint8, read-only."""
    bgr = _photo(str(folder / FILES[index]))
    rh, rw = rescaled_size(bgr.shape[:2], h, w)
    rgb = np.ascontiguousarray(cv2.resize(bgr, (rw, rh), interpolation=cv2.INTER_CUBIC)[..., ::-1])
    rgb.setflags(write=False)
    return rgb


def photo_crop(folder: Path, h: int, w: int, rng: np.random.Generator) -> np.ndarray:
    """One image's ice layer: the reference's draws in its order (photograph, crop top, crop left), (h, w, 3) uint8.

    ``look`` is the photograph (0..4, as the procedural texture's look), ``crop`` the crop's [top, left].
    """
    index = int(record(rng, "look", int(rng.integers(0, N_DRAWN))))
    big = rescaled_photo(folder, index, h, w)
    top = int(rng.integers(0, max(big.shape[0] - h, 1)))
    left = int(rng.integers(0, max(big.shape[1] - w, 1)))
    top, left = (int(v) for v in record(rng, "crop", [top, left]))
    if not (0 <= top <= big.shape[0] - h and 0 <= left <= big.shape[1] - w):
        raise CorruptionError(f"frost crop [{top}, {left}] does not fit the {big.shape[0]}x{big.shape[1]} photograph for a {h}x{w} image")
    return big[top : top + h, left : left + w]


def grey(rgb: np.ndarray) -> np.ndarray:
    """The reference's ``rgb2gray`` weights, (..., 3) -> (..., 1) float64."""
    return (rgb.astype(np.float64) @ np.array([0.2989, 0.5870, 0.1140]))[..., None]


def blend_truncated(x: np.ndarray, ice: np.ndarray, image_weight: float, frost_weight: float) -> np.ndarray:
    """``np.uint8(np.clip(image_weight * x + frost_weight * ice, 0, 255))`` in float64 as the reference (which
    truncates rather than rounds): the same pixels bit for bit."""
    out = float(image_weight) * x.astype(np.float64) + float(frost_weight) * ice.astype(np.float64)
    np.clip(out, 0, 255, out=out)
    return out.astype(np.uint8)


def texture_of(drawn: dict | None) -> str | None:
    """The texture source of a batch from what its kernel drew (``drawn['texture']``, or a composition's
    ``drawn['steps'][k]['texture']``): one of the two sources, ``"mixed"`` where a caller fixed different
    ones per image, None for a corruption without one."""
    steps = (drawn or {}).get("steps") or [drawn or {}]
    textures = sorted({t for step in steps for t in (step or {}).get("texture") or [] if t is not None})
    if not textures:
        return None
    return textures[0] if len(textures) == 1 else "mixed"


__all__ = ["ENV", "FILES", "TextureSource", "blend_truncated", "grey", "photo_crop", "photo_folder", "rescaled_photo",
           "rescaled_size", "texture_of", "texture_source"]

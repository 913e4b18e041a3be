"""Image files as the RGB uint8 pixels the engine evaluates, whatever their mode and orientation.

Pillow's ``convert("RGB")`` clips 16-bit greys (``I;16``, ``I``) to 255, so most pixels of a
16-bit PNG would come out white; they are scaled to 8 bits here instead. The EXIF orientation a
camera records is applied, so a portrait photo is evaluated upright, as every viewer shows it.
Palette, LA, CMYK and the other modes go through Pillow's own conversion.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # Pillow is imported where images are decoded: the store's records import this package
    from PIL import Image

# modes whose values span 16 bits (0..65535): scaled by 255/65535, not clipped
_WIDE = ("I;16", "I;16L", "I;16B", "I;16N", "I")


def to_rgb(im: Image.Image) -> Image.Image:
    """``im`` upright (EXIF orientation applied) as an 8-bit RGB image."""
    from PIL import Image, ImageOps

    im = ImageOps.exif_transpose(im)
    if im.mode in _WIDE:
        wide = np.asarray(im, dtype=np.float64)
        grey = np.clip(np.rint(wide * (255.0 / 65535.0)), 0, 255).astype(np.uint8)
        return Image.fromarray(grey, mode="L").convert("RGB")
    if im.mode == "F":  # floats: 0..1 as most writers of float images mean it
        grey = np.clip(np.rint(np.asarray(im, dtype=np.float64) * 255.0), 0, 255).astype(np.uint8)
        return Image.fromarray(grey, mode="L").convert("RGB")
    return im if im.mode == "RGB" else im.convert("RGB")


def display_name(name: str) -> str:
    """A file or folder name from the file system as text: undecodable bytes written ``\\xff``.

    On Linux a name that is not UTF-8 arrives with lone surrogates (``surrogateescape``), which no
    store, JSON writer or terminal accepts; its bytes are shown as escapes instead.
    """
    try:
        name.encode("utf-8")
        return name
    except UnicodeEncodeError:
        return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")

"""Contact sheets: one PNG per corruption with columns clean, severity 1..5 (``domainbench gallery``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
import io
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

from domainbench.corruptions.api import corrupt
from domainbench.corruptions.errors import CorruptionError
from domainbench.corruptions.registry import get, names as all_names

LABEL_HEIGHT = 18
GAP = 4


def contact_sheet(image: np.ndarray, name: str, seed: int = 0) -> np.ndarray:
    """(H + label, 6 W + gaps, 3) uint8 sheet: clean, then severities 1..5 of ``name``."""
    spec = get(name)
    tiles = [image] + [corrupt(image, spec.name, severity=s, seed=seed) for s in range(1, 6)]
    tiles = [np.repeat(t[..., None], 3, -1) if t.ndim == 2 else (np.repeat(t, 3, -1) if t.shape[-1] == 1 else t) for t in tiles]
    h, w = tiles[0].shape[:2]
    sheet = Image.new("RGB", (6 * w + 5 * GAP, h + LABEL_HEIGHT), (255, 255, 255))
    draw = ImageDraw.Draw(sheet)
    for i, tile in enumerate(tiles):
        x = i * (w + GAP)
        sheet.paste(Image.fromarray(tile), (x, LABEL_HEIGHT))
        label = "clean" if i == 0 else f"{spec.name} s{i}"
        draw.text((x + 2, 3), label, fill=(0, 0, 0))
    return np.asarray(sheet)


def write_gallery(
    image: np.ndarray,
    out_dir: str | Path,
    names: Sequence[str] | None = None,
    seed: int = 0,
    write: Callable[[Path, bytes], object] = Path.write_bytes,
) -> list[Path]:
    """Write ``<out_dir>/<name>.png`` for each corruption (all when ``names`` is None); returns the paths.

    ``write(path, png_bytes)`` stores one sheet (the CLI passes its atomic, special-file-refusing writer).
    """
    chosen = all_names() if names is None else [get(n).name for n in names]  # unknown names fail before writing
    if not chosen:
        raise CorruptionError("no corruptions selected for the gallery")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{name}.png" for name in chosen]
    for name, path in zip(chosen, paths):
        png = io.BytesIO()
        Image.fromarray(contact_sheet(image, name, seed=seed)).save(png, format="PNG")
        write(path, png.getvalue())
    return paths

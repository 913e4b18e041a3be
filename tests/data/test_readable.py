"""Unreadable image files: the cheap scan a run makes before it writes anything.

The scan's verdict is checked against Pillow's full decode of every file (the independent
reference): a file is unreadable exactly when decoding all of it raises.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from domainbench.data.readable import check_readable, find_unreadable
from domainbench.errors import UserInputError

def _encoded(fmt: str, seed: int = 0, **save: object) -> bytes:
    rng = np.random.default_rng(seed)
    buf = io.BytesIO()
    Image.fromarray(rng.integers(0, 255, (24, 32, 3), dtype=np.uint8)).save(buf, format=fmt, **save)
    return buf.getvalue()


def _full_decode_fails(path: Path) -> bool:
    try:
        with Image.open(path) as im:
            im.convert("RGB").load()
        return False
    except Exception:  # noqa: BLE001
        return True


def test_scan_finds_exactly_the_files_a_full_decode_rejects(tmp_path: Path) -> None:
    jpeg, png = _encoded("JPEG", quality=90), _encoded("PNG")
    files = {
        "ok.jpg": jpeg,
        "ok_trailing_bytes.jpg": jpeg + b"\0" * 100,  # padding after the end marker: Pillow reads it
        "ok.png": png,
        "ok.gif": _encoded("GIF"),
        "ok.bmp": _encoded("BMP"),
        "truncated.jpg": jpeg[: len(jpeg) // 2],
        "truncated.png": png[: len(png) // 2],
        "truncated.bmp": _encoded("BMP")[:200],
        "garbage.jpg": b"\xff\xd8garbage",
        "empty.png": b"",
        "text.png": b"not an image at all",
    }
    paths = []
    for name, data in sorted(files.items()):
        (tmp_path / name).write_bytes(data)
        paths.append(tmp_path / name)
    found = find_unreadable(paths)
    assert [Path(p).name for _, p, _ in found] == sorted(n for n in files if not n.startswith("ok"))
    assert [Path(p).name for _, p, _ in found] == [p.name for p in paths if _full_decode_fails(p)]
    assert [i for i, _, _ in found] == [i for i, p in enumerate(paths) if not p.name.startswith("ok")]
    assert dict((Path(p).name, why) for _, p, why in found)["truncated.jpg"].startswith("OSError: image file is truncated")


def test_check_readable_names_the_first_file_and_counts_the_others(tmp_path: Path) -> None:
    for name in ("a.png", "b.png", "c.png"):
        (tmp_path / name).write_bytes(b"broken")
    (tmp_path / "0.png").write_bytes(_encoded("PNG"))
    paths = sorted(tmp_path.iterdir())
    with pytest.raises(UserInputError) as e:
        check_readable(paths)
    msg = str(e.value)
    assert msg.startswith(f"{tmp_path / 'a.png'}: cannot decode (UnidentifiedImageError: ")
    assert msg.endswith("(2 more unreadable files found); remove or fix it, or pass --skip-unreadable")
    assert "\n" not in msg
    check_readable(paths[:1])  # a good file passes
    check_readable(None)  # in-memory datasets (the bundled sample) have no files to scan

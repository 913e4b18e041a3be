"""Finding a folder dataset's undecodable files before a run writes anything.

A run refuses a dataset with an unreadable image unless the user chose ``--skip-unreadable``:
a silently smaller dataset changes every number. Decoding every file twice (once here, once in
the run) would double the run's decode cost, so this scan is cheap and exact where it can be:

- every file is opened (Pillow reads only its header): not an image, empty, a wrong format;
- a JPEG without its end-of-image marker, or a PNG without its IEND chunk, near the end of the
  file (the usual form of a truncated download or copy) is decoded in full to confirm it;
- formats without such a marker (GIF, BMP, TIFF, WebP) are decoded in full.

What this misses (damage inside a JPEG that still has its end marker and that Pillow rejects)
the run finds when it decodes the file, and fails with the same message.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from domainbench.data.decoding import display_name
from domainbench.errors import UserInputError

#: bytes read from a file's end when looking for its format's end marker (trailing padding fits)
_TAIL = 4096
_END_MARKERS = {"JPEG": b"\xff\xd9", "MPO": b"\xff\xd9", "PNG": b"IEND"}


def unreadable_reason(path: Path) -> str | None:
    """Why ``path`` cannot be decoded as an image, or None when it can (see the module docstring)."""
    from PIL import Image

    from domainbench.data.decoding import to_rgb

    try:
        with Image.open(path) as im:
            marker = _END_MARKERS.get(im.format or "")
            if marker is not None and marker in _tail(path):
                return None
            to_rgb(im).load()  # no marker: decode it all, as the run would
        return None
    except Exception as e:  # noqa: BLE001 - any decoder failure makes the file unreadable
        return display_name(f"{type(e).__name__}: {e}")


def _tail(path: Path) -> bytes:
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        f.seek(max(0, f.tell() - _TAIL))
        return f.read()


def find_unreadable(paths: Sequence[Path]) -> list[tuple[int, str, str]]:
    """(index, path, reason) of each file of ``paths`` that does not decode, in order."""
    # opening files is I/O (a network file system, a cold disk): threads overlap the waits
    with ThreadPoolExecutor(min(8, 2 * (os.cpu_count() or 1)), thread_name_prefix="domainbench-scan") as pool:
        reasons = list(pool.map(unreadable_reason, paths, chunksize=64))
    return [(i, display_name(str(p)), why) for i, (p, why) in enumerate(zip(paths, reasons)) if why is not None]


def unreadable_error(path: str, why: str, others: int = 0, run_id: str | None = None) -> UserInputError:
    """The one-line refusal of an unreadable image (and how many more were found with it); ``run_id``:
    the run it stopped, which can go on without the file."""
    more = f" ({others} more unreadable file{'s' if others != 1 else ''} found)" if others else ""
    fix = (f"remove or fix it and start a new run, or go on without it: `domainbench run --resume {run_id} --skip-unreadable`"
           if run_id else "remove or fix it, or pass --skip-unreadable")
    return UserInputError(f"{path}: cannot decode ({why}){more}; {fix}")


def check_readable(paths: Sequence[Path] | None) -> None:
    """Refuse a dataset with an undecodable file, naming the first one; in-memory datasets pass."""
    if not paths:
        return
    bad = find_unreadable(paths)
    if bad:
        _, path, why = bad[0]
        raise unreadable_error(path, why, len(bad) - 1)

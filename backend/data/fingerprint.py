"""What identifies a dataset's content: a run stores it, a resume checks that it did not change.

A path alone does not pin a dataset: files get added, renamed or re-encoded, and a relative path
means another folder from another working directory. The fingerprint counts the evaluated files,
hashes their sorted relative paths and sizes, and hashes the bytes of a fixed sample of them
(every k-th file, at most ``SAMPLED_FILES``), cheap enough for a resume of a large folder. The
bundled sample is identified by the hash of its file (its version).

``dataset_fingerprint(ds)`` is the one function to call, for a resume check or to compare the
datasets of two runs (``a == b``).
"""

from __future__ import annotations

import hashlib
import os
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

SAMPLED_FILES = 16
_CHUNK = 1 << 20


class DatasetFingerprint(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["files", "sample", "arrays"]
    files: int  # files evaluated (images of the sample)
    root: str | None = None  # the absolute folder the relative paths start from
    listing_sha256: str = ""  # sorted "relative path\0size" lines
    content_sha256: str = ""  # the bytes of the sampled files, in listing order
    sampled: int = 0
    version: str | None = None  # the bundled sample's file hash

    def describe(self) -> str:
        if self.kind == "sample":
            return f"the bundled sample version {self.version} ({self.files} images)"
        return (f"{self.files} files under {self.root}, listing {self.listing_sha256[:12]}, "
                f"content of {self.sampled} sampled files {self.content_sha256[:12]}")

    def differences(self, other: DatasetFingerprint) -> str:
        """What differs between two datasets' content, in words ("" when it is the same, wherever it lies)."""
        what = [name for name, a, b in (("file count", self.files, other.files), ("kind", self.kind, other.kind),
                                        ("file names or sizes", self.listing_sha256, other.listing_sha256),
                                        ("file contents", self.content_sha256, other.content_sha256),
                                        ("version", self.version, other.version)) if a != b]
        return ", ".join(what)


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


@lru_cache(maxsize=4)
def _sample_version(path: str, size: int, mtime_ns: int) -> str:
    return _sha256_file(Path(path))[:16]


def sample_version() -> str:
    """The bundled sample's version: the first 16 hex digits of its file's SHA-256."""
    from domainbench.data import SAMPLE_PATH

    st = SAMPLE_PATH.stat()
    return _sample_version(str(SAMPLE_PATH), st.st_size, st.st_mtime_ns)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return -1  # listed but missing or unreadable: the run reports it; a change of that shows here


def _content_hash(path: Path) -> bytes:
    try:
        return bytes.fromhex(_sha256_file(path))
    except OSError:
        return b"unreadable"


def _common_root(paths: list[Path]) -> Path:
    return Path(os.path.commonpath([str(p.parent) for p in paths]))


def dataset_fingerprint(ds: object) -> DatasetFingerprint:
    """The fingerprint of a ``Dataset`` (the images a run evaluates, after ``--limit``)."""
    paths: list[Path] | None = getattr(ds, "paths", None)
    if paths is None:
        n = len(ds)  # type: ignore[arg-type]
        if getattr(ds, "name", "").split("[")[0] == "sample":
            return DatasetFingerprint(kind="sample", files=n, version=sample_version())
        import numpy as np  # in-memory arrays from a plug-in: their bytes are the content

        arrays = np.ascontiguousarray(getattr(ds, "arrays"))
        return DatasetFingerprint(kind="arrays", files=n, content_sha256=hashlib.sha256(arrays.tobytes()).hexdigest())
    absolute = [Path(os.path.abspath(p)) for p in paths]
    root = _common_root(absolute) if absolute else Path("/")
    entries = sorted((os.fsencode(p.relative_to(root)), p) for p in absolute)
    listing, content = hashlib.sha256(), hashlib.sha256()
    for rel, p in entries:
        listing.update(rel + b"\0" + str(_size(p)).encode() + b"\n")
    step = max(1, -(-len(entries) // SAMPLED_FILES))
    sampled = entries[::step]
    for rel, p in sampled:
        content.update(rel + b"\0" + _content_hash(p))
    return DatasetFingerprint(kind="files", files=len(entries), root=os.fsencode(root).decode("utf-8", "backslashreplace"),
                              listing_sha256=listing.hexdigest(), content_sha256=content.hexdigest(), sampled=len(sampled))

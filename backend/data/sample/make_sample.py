"""Rebuild the bundled Fashion-MNIST sample: 100 test images per class, seed 0.

    python -m domainbench.data.sample.make_sample [--source DIR] [--out FILE]

The source is the Debian package ``dataset-fashion-mnist`` (MIT licence, see LICENSE.txt).
"""

from __future__ import annotations

import argparse
import gzip
from pathlib import Path

import numpy as np

DEBIAN_DIR = Path("/usr/share/datasets/fashion-mnist")
SAMPLE_PATH = Path(__file__).resolve().parent / "fashion_mnist_sample.npz"
# prompt-friendly names, in label order 0..9 (the official names are "T-shirt/top", ...)
CLASSES: tuple[str, ...] = (
    "t-shirt", "trouser", "pullover", "dress", "coat",
    "sandal", "shirt", "sneaker", "bag", "ankle boot",
)
PER_CLASS = 100
SEED = 0


def read_idx(path: Path) -> np.ndarray:
    """Read a (gzipped) IDX file: big-endian magic 0x00 0x00 dtype ndim, then the dims."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        raw = f.read()
    if raw[:2] != b"\x00\x00" or raw[2] != 0x08:
        raise ValueError(f"{path} is not an unsigned-byte IDX file (magic {raw[:4].hex()})")
    ndim = raw[3]
    dims = tuple(int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if data.size != int(np.prod(dims)):
        raise ValueError(f"{path}: header says {dims} but holds {data.size} bytes")
    return data.reshape(dims)


def load_split(split: str, source: Path = DEBIAN_DIR) -> tuple[np.ndarray, np.ndarray]:
    """``split`` is "train" or "t10k"; returns uint8 images (N, 28, 28) and int64 labels (N,)."""
    if not (source / f"{split}-images-idx3-ubyte.gz").is_file():
        raise FileNotFoundError(
            f"Fashion-MNIST {split} files not found in {source}: install the Debian package "
            "dataset-fashion-mnist (apt-get install dataset-fashion-mnist) or pass --source DIR"
        )
    images = read_idx(source / f"{split}-images-idx3-ubyte.gz")
    labels = read_idx(source / f"{split}-labels-idx1-ubyte.gz").astype(np.int64)
    if len(images) != len(labels):
        raise ValueError(f"{source}: {len(images)} {split} images but {len(labels)} labels")
    return images, labels


def select_balanced(labels: np.ndarray, per_class: int = PER_CLASS, seed: int = SEED) -> np.ndarray:
    """Indices of ``per_class`` items of each class, drawn without replacement, sorted."""
    rng = np.random.default_rng(seed)
    picks = [rng.choice(np.flatnonzero(labels == c), per_class, replace=False) for c in range(len(CLASSES))]
    return np.sort(np.concatenate(picks))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", type=Path, default=DEBIAN_DIR)
    ap.add_argument("--out", type=Path, default=SAMPLE_PATH)
    args = ap.parse_args()
    images, labels = load_split("t10k", args.source)
    idx = select_balanced(labels)
    np.savez_compressed(
        args.out,
        images=images[idx],
        labels=labels[idx],
        classes=np.array(CLASSES),
        source_index=idx.astype(np.int64),
    )
    print(f"wrote {args.out} ({len(idx)} images, {args.out.stat().st_size / 1024:.0f} KiB)")


if __name__ == "__main__":
    main()

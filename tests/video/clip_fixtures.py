"""Fixtures of the clip tests: short clips of the bundled sample's items, made with PyAV (no downloads)."""

from __future__ import annotations

from pathlib import Path

from domainbench.data.clip_samples import write_sample_clips


def sample_clips(root: Path) -> Path:
    """Two 10-frame 32-pixel clips of each of three classes under ``root/CLASS/``."""
    return write_sample_clips(root, per_class=2, frames=10, size=32, classes=3, seed=1)

"""Fixtures of the clip tests: sample clips made with PyAV, and until the temporal corruptions land
(``domainbench.corruptions.clips``), a stand-in ``corrupt_clip`` that applies image corruptions frame by frame."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import numpy as np

from domainbench.data.clip_samples import write_sample_clips


def ensure_corrupt_clip() -> None:
    try:
        import domainbench.corruptions.clips  # noqa: F401
        return
    except ImportError:
        pass
    from domainbench.corruptions import corrupt_batch, derive_seed

    def corrupt_clip(name: str, frames: np.ndarray, severity: int, *, seed: int, fps: float,
                     mode: str | None = None) -> np.ndarray:
        seeds = [seed] * len(frames) if mode == "static" else [derive_seed(seed, i) for i in range(len(frames))]
        return corrupt_batch(frames, name, severity, seeds=seeds)

    shim = types.ModuleType("domainbench.corruptions.clips")
    shim.corrupt_clip = corrupt_clip  # type: ignore[attr-defined]
    shim.is_temporal = lambda name: False  # type: ignore[attr-defined]
    sys.modules["domainbench.corruptions.clips"] = shim


def has_temporal() -> bool:
    try:
        from domainbench.corruptions.clips import is_temporal

        return bool(is_temporal("flicker"))
    except (ImportError, Exception):
        return False


def sample_clips(root: Path) -> Path:
    return write_sample_clips(root, per_class=2, frames=10, size=32, classes=3, seed=1)

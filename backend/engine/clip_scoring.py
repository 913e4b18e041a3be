"""A clip run's cells and their corrupted frames, the same on every executor (``engine.clip_kind`` corrupts in this
process, ``engine.clip_ray`` in Ray tasks): the cell, each clip's corruption seed, the corrupted frames.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from domainbench.data.clips import DecodedClip

CLEAN = "clean"


@dataclass(frozen=True)
class ClipCell:
    corruption: str
    severity: int
    #: static | independent for an image corruption; None for the clean cell and a temporal corruption
    mode: str | None

    @property
    def key(self) -> str:
        if self.corruption == CLEAN:
            return CLEAN
        return f"{self.corruption}:{self.severity}" + (f"/{self.mode}" if self.mode else "")


#: one (model, cell) to compute: the cell, and the models of the run it still lacks there
Todo = list[tuple[ClipCell, list[str]]]
#: a computed unit as a part hands it back: (model, cell, the unit's fields)
Scored = tuple[str, ClipCell, dict[str, Any]]


def clip_seed(seed: int, clip: str) -> int:
    """A clip's corruption seed: from the run's seed and the clip's name (every cell, process and order alike)."""
    return int.from_bytes(hashlib.sha256(f"{seed}\0{clip}".encode()).digest()[:4], "little") & 0x7FFFFFFF


def corrupt(cell: ClipCell, clip: DecodedClip, seed: int) -> np.ndarray:
    if cell.corruption == CLEAN:
        return clip.frames
    from domainbench.corruptions.clips import corrupt_clip

    return corrupt_clip(cell.corruption, clip.frames, cell.severity, seed=clip_seed(seed, clip.clip.name),
                        fps=clip.fps, mode=cell.mode)


__all__ = ["CLEAN", "ClipCell", "Scored", "Todo", "clip_seed", "corrupt"]

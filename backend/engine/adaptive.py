"""Adaptive evaluation: rounds of images in a seeded random order; a cell stops early when it is settled.

A cell (corruption, severity) stops once, for every model, the anytime-valid confidence sequence
of its top-1 accuracy is narrower than the target width, or once every pair of models is decided
(the confidence sequence of their paired accuracy difference excludes 0). Betting confidence
sequences (``domainbench.stats.confseq``) keep their coverage under this peeking, so the stopped
cells' intervals stay valid. The order is a seeded permutation of the dataset (images of one class
are often stored together; a stream must be in random order for its running mean to mean
anything). Each cell's stored units are the images it used.

The clean pass runs as long as any corrupted cell does: it is every flip's reference.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import TYPE_CHECKING

import numpy as np

from domainbench.errors import UserInputError
from domainbench.metrics.aggregate import CLEAN
from domainbench.stats.confseq import betting_cs, log_capital

if TYPE_CHECKING:
    from domainbench.engine.tasks import Cell, RunContext
    from domainbench.store import Store
    from domainbench.store.records import UnitRecord

DEFAULT_TARGET_WIDTH = 0.1
#: candidate means searched by the stopping checks (spacing 0.0025; the interval is widened by a step)
STOP_GRID = 401
#: images per round when the run config sets no shard size
ROUND_IMAGES = 50


def adaptive_shards(n_images: int, shard_size: int | None, seed: int) -> list[np.ndarray]:
    """The dataset's positions in a seeded random order, cut into rounds."""
    order = np.random.default_rng([seed, 0xADA]).permutation(n_images)
    size = shard_size or ROUND_IMAGES
    return [np.sort(order[i:i + size]) for i in range(0, n_images, size)]


@dataclass
class AdaptiveStopping:
    """Which cells are still evaluated; fed each finished round's stored units."""

    models: list[str]
    cells: list[tuple[str, int]]
    confidence: float = 0.95
    target_width: float = DEFAULT_TARGET_WIDTH
    stopped: dict[tuple[str, int], int] = field(default_factory=dict)
    #: per (model, corruption, severity): correctness bits in arrival order
    _bits: dict[tuple[str, str, int], list[np.ndarray]] = field(default_factory=dict)
    _labels: dict[int, int] = field(default_factory=dict)
    #: the units already counted: a resumed run's plan may hand a replayed round over again, and
    #: counting its evidence twice would stop cells early (different results from an uninterrupted run)
    _seen: set[tuple[str, str, int, int]] = field(default_factory=set)

    def active(self, corruption: str, severity: int) -> bool:
        if corruption == CLEAN:
            return not self.finished()
        return (corruption, severity) not in self.stopped

    def finished(self) -> bool:
        return all(c in self.stopped for c in self.cells if c[0] != CLEAN)

    def observe(self, units: Sequence[UnitRecord]) -> None:
        """Add one round's stored units (any order; units already added are skipped), then stop the
        cells that are settled."""
        units = [u for u in units if (u.model, u.corruption, u.severity, u.shard) not in self._seen]
        self._seen.update((u.model, u.corruption, u.severity, u.shard) for u in units)
        for u in units:
            if u.labels is not None:
                self._labels.update(zip(u.indices, u.labels, strict=True))
        for u in sorted(units, key=lambda u: (u.shard, u.model, u.corruption, u.severity)):
            labels = np.array([self._labels[i] for i in u.indices])
            self._bits.setdefault((u.model, u.corruption, u.severity), []).append(np.asarray(u.preds) == labels)
        for cell in self.cells:
            if cell[0] != CLEAN and cell not in self.stopped and self._settled(cell):
                self.stopped[cell] = len(self._stream(self.models[0], cell))

    def _stream(self, model: str, cell: tuple[str, int]) -> np.ndarray:
        parts = self._bits.get((model, *cell), [])
        return np.concatenate(parts).astype(float) if parts else np.zeros(0)

    def _settled(self, cell: tuple[str, int]) -> bool:
        streams = [self._stream(m, cell) for m in self.models]
        if not streams[0].size or len({s.size for s in streams}) > 1:
            return False  # some model has not scored this round's images yet
        alpha = 1 - self.confidence
        narrow = all(np.subtract(*reversed(betting_cs(s, self.confidence, STOP_GRID))) <= self.target_width
                     for s in streams)
        if narrow:
            return True
        if len(streams) < 2:
            return False
        # decided: for every pair, mean(a - b) = 0 (i.e. (a - b + 1) / 2 = 1/2) rejected at some time
        return all(log_capital((a - b + 1) / 2, 0.5, alpha)[0] >= math.log(1 / alpha)
                   for a, b in combinations(streams, 2))


def adaptive_stopping(store: Store, ctx: RunContext, cells: Sequence[Cell]) -> AdaptiveStopping:
    """The stopping state of a run, replaying its stored rounds in order (a resumed run picks up where it stopped)."""
    cfg = ctx.cfg
    if not ctx.dataset.labelled:
        raise UserInputError("--adaptive needs a labelled dataset: it stops a cell by its accuracy")
    state = AdaptiveStopping(models=[m.name for m in ctx.models], cells=[(c.corruption, c.severity) for c in cells],
                             target_width=cfg.target_width or DEFAULT_TARGET_WIDTH)
    units = store.units(ctx.run_id)
    for shard in sorted({u.shard for u in units}):
        state.observe([u for u in units if u.shard == shard])
    return state


def sequential_intervals(units: Sequence[UnitRecord], confidence: float) -> dict[tuple[str, str, int], dict[str, tuple[float, float]]]:
    """Per cell of an adaptive run, the betting confidence sequences of top-1 accuracy and flip
    probability over its images in the order they were evaluated (round by round)."""
    labels: dict[int, int] = {}
    clean: dict[tuple[str, int], int] = {}
    for u in units:
        if u.labels is not None:
            labels.update(zip(u.indices, u.labels, strict=True))
        if u.corruption == CLEAN:
            clean.update({(u.model, i): p for i, p in zip(u.indices, u.preds, strict=True)})
    streams: dict[tuple[str, str, int], list[UnitRecord]] = {}
    for u in units:
        streams.setdefault(u.cell, []).append(u)
    out: dict[tuple[str, str, int], dict[str, tuple[float, float]]] = {}
    for cell, parts in streams.items():
        parts.sort(key=lambda u: u.shard)
        idx = [i for u in parts for i in u.indices]
        preds = np.array([p for u in parts for p in u.preds])
        found: dict[str, tuple[float, float]] = {}
        if labels:
            found["top1_accuracy"] = betting_cs(preds == np.array([labels[i] for i in idx]), confidence)
        if cell[1] != CLEAN:
            found["label_flip_probability"] = betting_cs(preds != np.array([clean[(cell[0], i)] for i in idx]), confidence)
        out[cell] = found
    return out

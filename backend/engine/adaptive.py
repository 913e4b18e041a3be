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

from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import TYPE_CHECKING

import numpy as np

from domainbench.errors import UserInputError
from domainbench.metrics.aggregate import CLEAN
from domainbench.stats.confseq import anytime_p_value, betting_cs, class_balance_weights, weighted_difference_stream

if TYPE_CHECKING:
    from domainbench.engine.tasks import Cell, RunContext
    from domainbench.records.report import RunReport
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


def _round_order(indices: Sequence[int], shard: int, seed: int) -> np.ndarray:
    """Positions of a round's images in the order its streams take them: a seeded permutation of the round's images
    by index (the same order :func:`arrival_ranks` gives them)."""
    by_index = np.argsort(np.asarray(indices), kind="stable")
    perm = np.random.default_rng([seed, 0xADA, int(shard) % (2 ** 32)]).permutation(by_index.size)
    return by_index[np.argsort(perm, kind="stable")]


@dataclass
class AdaptiveStopping:
    """Which cells are still evaluated; fed each finished round's stored units."""

    models: list[str]
    cells: list[tuple[str, int]]
    confidence: float = 0.95
    target_width: float = DEFAULT_TARGET_WIDTH
    #: the run's seed: it orders the images within a round (``arrival_ranks``)
    seed: int = 0
    stopped: dict[tuple[str, int], int] = field(default_factory=dict)
    #: per (model, corruption, severity): correctness bits and image indices in arrival order
    _bits: dict[tuple[str, str, int], list[np.ndarray]] = field(default_factory=dict)
    _indices: dict[tuple[str, str, int], list[np.ndarray]] = field(default_factory=dict)
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
            order = _round_order(u.indices, u.shard, self.seed)
            idx = np.asarray(u.indices)[order]
            labels = np.array([self._labels[i] for i in idx])
            self._bits.setdefault((u.model, u.corruption, u.severity), []).append(np.asarray(u.preds)[order] == labels)
            self._indices.setdefault((u.model, u.corruption, u.severity), []).append(idx)
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
        narrow = all(np.subtract(*reversed(betting_cs(s, self.confidence, STOP_GRID))) <= self.target_width
                     for s in streams)
        if narrow:
            return True
        if len(streams) < 2:
            return False
        # decided: for every pair, the verdict's own anytime-valid test (metrics.comparison) rejects "no difference"
        # in class-balanced accuracy: the paired differences weighted by the class balance of the images seen so far
        seen = np.array(list(self._labels))
        weight = dict(zip(seen.tolist(), class_balance_weights(np.array(list(self._labels.values()))).tolist(), strict=True))
        w = np.array([weight[i] for i in np.concatenate(self._indices[(self.models[0], *cell)])])
        return all(anytime_p_value(weighted_difference_stream(a - b, w), self.confidence) < 1 - self.confidence
                   for a, b in combinations(streams, 2))


def adaptive_stopping(store: Store, ctx: RunContext, cells: Sequence[Cell]) -> AdaptiveStopping:
    """The stopping state of a run, replaying its stored rounds in order (a resumed run picks up where it stopped)."""
    cfg = ctx.cfg
    if not ctx.dataset.labelled:
        raise UserInputError("--adaptive needs a labelled dataset: it stops a cell by its accuracy")
    state = AdaptiveStopping(models=[m.name for m in ctx.models], cells=[(c.corruption, c.severity) for c in cells],
                             target_width=cfg.target_width or DEFAULT_TARGET_WIDTH, seed=cfg.seed)
    units = store.units(ctx.run_id)
    for shard in sorted({u.shard for u in units}):
        state.observe([u for u in units if u.shard == shard])
    return state


def arrival_ranks(units: Sequence[UnitRecord], indices: np.ndarray, seed: int) -> np.ndarray:
    """Each of ``indices``' images' position in an adaptive run's evaluation stream: by round (its units' shard),
    and within a round in a seeded random order (a round stores its images sorted, often class by class, and a
    betting sequence needs its stream in random order). The order depends on the seed and the rounds alone, never
    on an outcome, so a test run along it stays valid at any round the run stopped at."""
    shard_of: dict[int, int] = {}
    for u in units:
        for i in u.indices:
            shard_of[int(i)] = min(shard_of.get(int(i), u.shard), u.shard)
    order = np.asarray(indices)
    shards = np.array([shard_of.get(int(i), np.iinfo(np.int64).max) for i in order], dtype=np.int64)
    within = np.zeros(order.size, dtype=np.int64)
    for s in np.unique(shards):
        members = np.flatnonzero(shards == s)
        within[members[_round_order(order[members], int(s), seed)]] = np.arange(members.size)
    ranks = np.empty(order.size, dtype=np.int64)
    ranks[np.lexsort((within, shards))] = np.arange(order.size)
    return ranks


def _balanced_sequence(right: np.ndarray, labels: np.ndarray, classes: np.ndarray,
                       confidence: float) -> tuple[float, float]:
    """Balanced accuracy's anytime-valid interval: each class's betting sequence at level 1 - alpha / classes (a
    class's images arrive in random order too, so each is a valid stream), all of which hold at once with probability
    >= 1 - alpha (union bound); the mean of their ends then holds the mean of the per-class accuracies. A class the
    cell has not seen yet contributes [0, 1]. Wide with few images per class, and valid at any stop."""
    level = 1 - (1 - confidence) / classes.size
    ends = [betting_cs(right[labels == c], level, STOP_GRID) if np.any(labels == c) else (0.0, 1.0) for c in classes]
    return float(np.mean([e[0] for e in ends])), float(np.mean([e[1] for e in ends]))


def sequential_intervals(units: Sequence[UnitRecord], confidence: float,
                         seed: int = 0) -> dict[tuple[str, str, int], dict[str, tuple[float, float]]]:
    """Per cell of an adaptive run, the anytime-valid intervals of top-1 accuracy, balanced accuracy and flip
    probability over its images in the order they were evaluated (``arrival_ranks``): betting confidence sequences,
    balanced accuracy's combined over the classes (:func:`_balanced_sequence`)."""
    labels: dict[int, int] = {}
    clean: dict[tuple[str, int], int] = {}
    for u in units:
        if u.labels is not None:
            labels.update(zip(u.indices, u.labels, strict=True))
        if u.corruption == CLEAN:
            clean.update({(u.model, i): p for i, p in zip(u.indices, u.preds, strict=True)})
    every = np.array(sorted({int(i) for u in units for i in u.indices}), dtype=np.int64)
    rank = dict(zip(every.tolist(), arrival_ranks(units, every, seed).tolist(), strict=True))
    classes = np.unique(list(labels.values()))
    streams: dict[tuple[str, str, int], list[UnitRecord]] = {}
    for u in units:
        streams.setdefault(u.cell, []).append(u)
    out: dict[tuple[str, str, int], dict[str, tuple[float, float]]] = {}
    for cell, parts in streams.items():
        pairs = sorted(((rank[int(i)], int(i), p) for u in parts for i, p in zip(u.indices, u.preds, strict=True)))
        idx = [i for _, i, _ in pairs]
        preds = np.array([p for _, _, p in pairs])
        found: dict[str, tuple[float, float]] = {}
        if labels:
            truth = np.array([labels[i] for i in idx])
            found["top1_accuracy"] = betting_cs(preds == truth, confidence)
            found["balanced_accuracy"] = _balanced_sequence(preds == truth, truth, classes, confidence)
        if cell[1] != CLEAN:
            found["label_flip_probability"] = betting_cs(preds != np.array([clean[(cell[0], i)] for i in idx]), confidence)
        out[cell] = found
    return out


def sequential_model_intervals(units: Sequence[UnitRecord], report: RunReport, confidence: float,
                               seed: int = 0) -> dict[str, dict[str, tuple[float, float] | None]]:
    """Per model of an adaptive run, anytime-valid intervals of its model-level numbers where one exists.

    The clean accuracy is the clean cell's balanced-accuracy sequence. A mean over k cells (the mean corrupted
    accuracy, the PD-safe cells' accuracy) is the mean of the cells' sequences at level 1 - alpha / k each: all k
    hold at once with probability >= 1 - alpha (Bonferroni), so the means of their ends hold the mean. mCE, rCE
    and mFR are ratios to the baseline's errors, which no such sequence bounds: they get no interval (None)."""
    alpha = 1 - confidence
    common = [tuple(k) for k in report.classification.common_cells]
    safety = {(t.corruption, t.severity): t.safe for t in report.threat}
    plain = sequential_intervals(units, confidence, seed)
    # the PD-safe cells each model has (the report's safe-cell accuracy averages the model's own)
    safe = {m.model: [k for k in safety if safety[k] and (m.model, *k) in plain] for m in report.models}
    joint = {k: sequential_intervals(units, 1 - alpha / k, seed)
             for k in {len(common), *(len(v) for v in safe.values())} if k}

    def mean_of(model: str, cells: list[tuple[str, int]]) -> tuple[float, float] | None:
        ends = [joint[len(cells)].get((model, *c), {}).get("balanced_accuracy") for c in cells]
        if not cells or any(e is None for e in ends):
            return None
        return float(np.mean([e[0] for e in ends])), float(np.mean([e[1] for e in ends]))  # type: ignore[index]

    return {m.model: {"clean_accuracy": plain.get((m.model, CLEAN, 0), {}).get("balanced_accuracy"),
                      "mean_corrupted_accuracy": mean_of(m.model, common),
                      "safe_accuracy": mean_of(m.model, safe[m.model]),
                      "mce": None, "rce": None, "mfr": None}
            for m in report.models}

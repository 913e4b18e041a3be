"""Per-image outcomes of a run, aligned by dataset index across models and cells.

Intervals over images (bootstrap) and paired tests (McNemar) need to know, image by image,
whether each model got it right in each cell. :func:`image_outcomes` is the one place that
reads them from the stored units (their per-image ``preds``/``indices``, and the labels the
clean pass stores), so a more compact stored form only has to change this function.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from domainbench.records.config import SHIFT_PREFIX
from domainbench.metrics.aggregate import CLEAN, CellKey
from domainbench.metrics.classification import MetricInputError

if TYPE_CHECKING:
    from domainbench.store.records import UnitRecord

#: where a cell did not evaluate an image; distinct from ``models.generative.UNPARSED`` (-1, an answer that named
#: no class), which is a prediction, and a wrong one: it stays in the pair and counts against its model
MISSING = -2


@dataclass(frozen=True)
class ImageOutcomes:
    """Predictions of every (model, corruption, severity) cell on the run's images.

    ``indices``: sorted dataset indices of the images any cell evaluated; ``labels``: their
    true classes (None for an unlabelled dataset); ``preds[cell]``: the predicted class of each
    image, ``MISSING`` where the cell did not evaluate that image (``UNPARSED`` where a generative model's answer
    named no class: present, never correct).
    """

    indices: np.ndarray
    labels: np.ndarray | None
    preds: dict[CellKey, np.ndarray] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return int(self.indices.size)

    def cell(self, model: str, corruption: str, severity: int) -> np.ndarray:
        try:
            return self.preds[(model, corruption, severity)]
        except KeyError:
            raise MetricInputError(f"no per-image predictions for model {model!r}, cell {corruption}@{severity}") from None

    def present(self, model: str, corruption: str, severity: int) -> np.ndarray:
        return self.cell(model, corruption, severity) != MISSING

    def correct(self, model: str, corruption: str, severity: int) -> np.ndarray:
        """Bool per image: the cell's prediction is the label (False where missing)."""
        if self.labels is None:
            raise MetricInputError("the run's dataset is unlabelled: no per-image correctness")
        p = self.cell(model, corruption, severity)
        return (p == self.labels) & (p != MISSING)

    def flipped(self, model: str, corruption: str, severity: int) -> np.ndarray:
        """Bool per image: the corrupted prediction differs from the model's clean one."""
        p = self.cell(model, corruption, severity)
        clean = self.cell(model, CLEAN, 0)
        return (p != clean) & (p != MISSING) & (clean != MISSING)

    def models(self) -> list[str]:
        return sorted({k[0] for k in self.preds})


def image_outcomes(units: Iterable[UnitRecord]) -> ImageOutcomes:
    """Align the stored units' per-image predictions by dataset index (real-shift cells: :func:`shift_outcomes`)."""
    units = [u for u in units if not u.corruption.startswith(SHIFT_PREFIX)]
    if not units:
        raise MetricInputError("no units: nothing was evaluated yet")
    indices = np.unique(np.concatenate([np.asarray(u.indices, dtype=np.int64) for u in units]))
    label_of: dict[int, int] = {}
    for u in units:
        if u.labels is not None:
            for i, y in zip(u.indices, u.labels, strict=True):
                label_of[i] = y
    labelled = any(u.confusion is not None for u in units)
    labels = None
    if labelled:
        missing = [int(i) for i in indices if int(i) not in label_of]
        if missing:
            raise MetricInputError(f"no stored label for images {missing[:5]}: the run's clean pass is incomplete; "
                                   "resume the run")
        labels = np.array([label_of[int(i)] for i in indices], dtype=np.int64)
    preds: dict[CellKey, np.ndarray] = {}
    for u in units:
        if len(u.preds) != len(u.indices):
            raise MetricInputError(f"unit ({u.model}, {u.corruption}@{u.severity}, shard {u.shard}) stores "
                                   f"{len(u.preds)} predictions for {len(u.indices)} images")
        row = preds.setdefault(u.cell, np.full(indices.size, MISSING, dtype=np.int64))
        row[np.searchsorted(indices, np.asarray(u.indices, dtype=np.int64))] = u.preds
    return ImageOutcomes(indices=indices, labels=labels, preds=preds)


def shift_outcomes(units: Iterable[UnitRecord]) -> dict[str, ImageOutcomes]:
    """Per real-shift cell (``shift:NAME``), its own images' outcomes: a shift's images are not the dataset's,
    so they are bootstrapped on their own, with the labels their units store (None: an unlabelled shift)."""
    by_cell: dict[str, list[UnitRecord]] = {}
    for u in units:
        if u.corruption.startswith(SHIFT_PREFIX):
            by_cell.setdefault(u.corruption, []).append(u)
    out = {}
    for cell, members in by_cell.items():
        indices = np.unique(np.concatenate([np.asarray(u.indices, dtype=np.int64) for u in members]))
        labels = None
        if all(u.labels is not None for u in members):
            label_of = {int(i): int(y) for u in members for i, y in zip(u.indices, u.labels, strict=True)}
            labels = np.array([label_of[int(i)] for i in indices], dtype=np.int64)
        preds: dict[CellKey, np.ndarray] = {}
        for u in members:
            row = preds.setdefault(u.cell, np.full(indices.size, MISSING, dtype=np.int64))
            row[np.searchsorted(indices, np.asarray(u.indices, dtype=np.int64))] = u.preds
        out[cell] = ImageOutcomes(indices=indices, labels=labels, preds=preds)
    return out

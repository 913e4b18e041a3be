"""Per-image outcomes of a run, aligned by dataset index across models and cells.

Intervals over images (bootstrap) and paired tests (McNemar) need to know, image by image,
whether each model got it right in each cell. :func:`image_outcomes` is the one place that
reads them from the stored units (their per-image ``preds``/``indices``, and the labels the
clean pass stores), so a more compact stored form only has to change this function.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from itertools import chain
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from domainbench.records.config import SHIFT_PREFIX
from domainbench.metrics.aggregate import CLEAN, CellKey
from domainbench.metrics.classification import MetricInputError
from domainbench.records.packed import PackedArray

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


class UnitPredictions(NamedTuple):
    """What :func:`image_outcomes` reads of one unit: its cell, its per-image arrays, and whether its dataset is
    labelled (a unit stores a confusion matrix only then). A ``UnitRecord`` (:meth:`of`) or a stored unit's
    fields read without validating the document (``Store.unit_predictions``, :meth:`from_stored`)."""

    model: str
    corruption: str
    severity: int
    shard: int
    preds: Any
    indices: Any
    labels: Any | None
    labelled: bool

    @property
    def cell(self) -> CellKey:
        return (self.model, self.corruption, self.severity)

    @classmethod
    def of(cls, unit: UnitRecord) -> UnitPredictions:
        return cls(unit.model, unit.corruption, unit.severity, unit.shard, unit.preds, unit.indices, unit.labels,
                   unit.confusion is not None)

    @classmethod
    def from_stored(cls, doc: Mapping[str, Any]) -> UnitPredictions:
        """From ``Store.unit_predictions``' fields: arrays as stored (a plain list or a packed one)."""
        # a document written without per-image arrays reads as the record's defaults: none, no labels
        return cls(doc["model"], doc["corruption"], doc["severity"], doc["shard"], _stored_array(doc.get("preds"), []),
                   _stored_array(doc.get("indices"), []), _stored_array(doc.get("labels"), None),
                   bool(doc["labelled"]))


def _stored_array(value: Any, missing: Any) -> Any:
    """A stored per-image array: a packed one decoded, a plain list kept (concatenated with the others at once),
    ``missing`` where none is stored."""
    if value is None:
        return missing
    return PackedArray.coerce(value) if isinstance(value, dict) else value


def _concat(arrays: list[Any]) -> np.ndarray:
    """The arrays end to end as int64; plain lists (small units) in one pass rather than one array each."""
    if all(isinstance(a, list) for a in arrays):
        return np.fromiter(chain.from_iterable(arrays), dtype=np.int64, count=sum(map(len, arrays)))
    return np.concatenate([np.asarray(a, dtype=np.int64) for a in arrays] or [np.empty(0, dtype=np.int64)])


def _last_of_each(positions: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct positions, sorted; the value stored last at each): an image a later unit stored again keeps the
    later unit's value, as filling in stored order would."""
    distinct, first = np.unique(positions[::-1], return_index=True)
    return distinct, values[::-1][first]


def image_outcomes(units: Iterable[UnitRecord | UnitPredictions]) -> ImageOutcomes:
    """Align the stored units' per-image predictions by dataset index (real-shift cells: :func:`shift_outcomes`).

    Vectorised over all units at once (a run of small shards holds thousands): the arrays are concatenated in
    stored order and a value stored twice for an image keeps the later unit's, as a loop over the units would."""
    found = [u if isinstance(u, UnitPredictions) else UnitPredictions.of(u) for u in units]
    found = [u for u in found if not u.corruption.startswith(SHIFT_PREFIX)]
    if not found:
        raise MetricInputError("no units: nothing was evaluated yet")
    sizes = np.fromiter((len(u.indices) for u in found), dtype=np.int64, count=len(found))
    for u, n in zip(found, sizes, strict=True):
        if len(u.preds) != n:
            raise MetricInputError(f"unit ({u.model}, {u.corruption}@{u.severity}, shard {u.shard}) stores "
                                   f"{len(u.preds)} predictions for {n} images")
    stored = _concat([u.indices for u in found])
    indices = np.unique(stored)
    labels = None
    if any(u.labelled for u in found):
        with_labels = [u for u in found if u.labels is not None]
        for u in with_labels:
            if len(u.labels) != len(u.indices):
                raise MetricInputError(f"unit ({u.model}, {u.corruption}@{u.severity}, shard {u.shard}) stores "
                                       f"{len(u.labels)} labels for {len(u.indices)} images")
        known, label_of = _last_of_each(_concat([u.indices for u in with_labels]),
                                        _concat([u.labels for u in with_labels]))
        missing = np.setdiff1d(indices, known, assume_unique=True)
        if missing.size:
            raise MetricInputError(f"no stored label for images {missing[:5].tolist()}: the run's clean pass is "
                                   "incomplete; resume the run")
        labels = label_of[np.searchsorted(known, indices)]
    cells: dict[CellKey, int] = {}
    cell_of_unit = np.array([cells.setdefault(u.cell, len(cells)) for u in found], dtype=np.int64)
    cell_of_value = np.repeat(cell_of_unit, sizes)
    position = np.searchsorted(indices, stored)
    value = _concat([u.preds for u in found])
    out: dict[CellKey, np.ndarray] = {}
    for cell, c in cells.items():
        mine = cell_of_value == c
        row = np.full(indices.size, MISSING, dtype=np.int64)
        at, v = _last_of_each(position[mine], value[mine])
        row[at] = v
        out[cell] = row
    return ImageOutcomes(indices=indices, labels=labels, preds=out)


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

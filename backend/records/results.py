"""The typed results of classification: what a stored unit holds and what a run's summary reports.

Plain data (pydantic models and their invariants), below the store, which keeps them, and below
the metrics, which compute them (:mod:`domainbench.metrics.aggregate`), so that neither imports
upward. Conventions: :mod:`domainbench.metrics.aggregate`.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer, PlainValidator, model_validator

from domainbench.records.confusion import SparseConfusion
from domainbench.records.drawn_params import pack_params, unpack_params
from domainbench.records.unit_sums import CalibrationCounts, DamageSums

CLEAN = "clean"
UNIT_SCHEMA_VERSION = 2
SUMMARY_SCHEMA_VERSION = 1

CellKey = tuple[str, str, int]  # (model, corruption, severity)


# --------------------------------------------------------------------------- unit documents


def _class_names(v: Any) -> list[str]:
    """A unit's class list. The store hands every unit of a run the same list object (one label
    set, ``store/labelsets.py``): it is checked once, not once a unit (1,000 names × 10,000 units)."""
    last = _CLASS_LISTS.get(id(v))
    if last is not None and last[0] is v:
        return last[1]
    if not isinstance(v, (list, tuple)) or not all(isinstance(c, str) for c in v):
        raise ValueError("classes must be a list of class names (strings)")
    out = list(v)
    if len(_CLASS_LISTS) > 64:
        _CLASS_LISTS.clear()
    _CLASS_LISTS[id(v)] = (v, out)  # holding v keeps its id from being reused while cached
    return out


_CLASS_LISTS: dict[int, tuple[Any, list[str]]] = {}
ClassNames = Annotated[list[str], PlainValidator(_class_names)]


def _params(v: Any) -> dict[str, Any]:
    if not isinstance(v, Mapping):
        raise ValueError("params must be a mapping of parameter names to values")
    return unpack_params(v)


#: a unit's parameters; units stored before draws were left out also hold what the corruption drew per image
#: (``params["drawn"]``, plain or packed: ``domainbench.records.drawn_params``; ``query.drawn_of`` reads either kind)
UnitParams = Annotated[dict[str, Any], PlainValidator(_params), PlainSerializer(pack_params, when_used="json")]


class UnitDocument(BaseModel):
    """One stored unit of work; extra keys written by the store (``_id`` …) are ignored."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    #: 1: dense confusion rows, per-image lists; 2: sparse confusion, packed per-image arrays
    schema_version: Literal[1, 2]
    run_id: str
    model: str
    corruption: str
    severity: int
    shard: int = Field(ge=0)
    n: int = Field(ge=0)
    confusion: SparseConfusion | None
    flips: int = Field(ge=0)
    n_unreadable: int = Field(default=0, ge=0)
    params: UnitParams = Field(default_factory=dict)
    seed: int
    classes: ClassNames
    #: ECE/NLL sums of the unit's labelled images (None: unlabelled, generative without scores, or stored before)
    calibration: CalibrationCounts | None = Field(default=None, exclude_if=lambda v: v is None)
    #: SSIM/MSE sums of the unit's corrupted images against their clean ones (None: clean pass, or stored before)
    damage: DamageSums | None = Field(default=None, exclude_if=lambda v: v is None)

    @model_validator(mode="before")
    @classmethod
    def _dense_shape(cls, data: Any) -> Any:
        """A dense (older) confusion must be C×C for the unit's C classes: said before it is made sparse."""
        if isinstance(data, Mapping) and isinstance(data.get("confusion"), list) and isinstance(data.get("classes"), list):
            c, rows = len(data["classes"]), data["confusion"]
            if len(rows) != c or any(not isinstance(r, list) or len(r) != c for r in rows):
                lengths = sorted({len(r) if isinstance(r, list) else -1 for r in rows})
                raise ValueError(f"confusion must be {c}×{c} to match classes, got {len(rows)} rows of lengths {lengths}")
        return data

    @model_validator(mode="after")
    def _consistent(self) -> UnitDocument:
        if not self.classes:
            raise ValueError("classes is empty; a unit must list the dataset's classes")
        if _has_duplicates(tuple(self.classes)):
            raise ValueError("classes contains duplicates")
        if self.corruption == CLEAN:
            if self.severity != 0:
                raise ValueError(f"the clean pass must have severity 0, got {self.severity}")
            if self.flips != 0:
                raise ValueError(f"the clean pass cannot flip predictions, got flips={self.flips}")
        elif self.severity < 1:
            raise ValueError(f"a corruption's severity must be >= 1, got {self.severity}")
        if self.flips > self.n:
            raise ValueError(f"flips={self.flips} exceeds the number of images n={self.n}")
        if self.confusion is not None:
            c = len(self.classes)
            if self.confusion.n_classes != c:
                raise ValueError(f"confusion must be {c}×{c} to match classes, got {self.confusion.n_classes} classes")
            total = self.confusion.total
            if total != self.n:
                raise ValueError(
                    f"confusion counts {total} images but n={self.n}; n must count exactly "
                    "the evaluated images (unreadable ones go to n_unreadable)"
                )
        return self

    @property
    def cell(self) -> CellKey:
        return (self.model, self.corruption, self.severity)


@functools.lru_cache(maxsize=64)
def _has_duplicates(classes: tuple[str, ...]) -> bool:
    # every unit of a run repeats one class list: checked once, not once a unit (1,000 names × 10,000 units)
    return len(set(classes)) != len(classes)


# --------------------------------------------------------------------------- summaries


class CellSummary(BaseModel):
    corruption: str
    severity: int
    n: int
    n_unreadable: int
    flips: int
    #: label flip probability; 0 for the clean pass by definition; None for a real-shift cell of images not
    #: paired with clean ones (``shift:NAME`` of class folders): nothing to flip from
    lfp: float | None
    #: balanced accuracy; ``None`` when the dataset is unlabelled
    accuracy: float | None
    #: nonzero cells of the summed confusion matrix (``np.asarray`` gives it dense)
    confusion: SparseConfusion | None
    #: whether the cell is shared by every model and so enters the aggregates
    in_common: bool
    #: calibration (labelled images) and damage (corrupted cells) sums; None where not measured
    calibration: CalibrationCounts | None = None
    damage: DamageSums | None = None


class ModelSummary(BaseModel):
    model: str
    is_baseline: bool
    labeled: bool
    clean_accuracy: float | None
    clean: CellSummary | None
    #: corrupted cells, sorted by (corruption, severity); all of the model's cells
    cells: list[CellSummary]
    mean_corrupted_accuracy: float | None
    mce: float | None
    rce: float | None
    mfr: float | None
    pearson_acc_lfp: float | None
    ce_per_corruption: dict[str, float | None]
    rce_per_corruption: dict[str, float | None]
    fr_per_corruption: dict[str, float | None]
    #: why a number is ``None`` or which corruptions a mean leaves out
    notes: list[str]

    def cell(self, corruption: str, severity: int) -> CellSummary:
        for c in self.cells:
            if c.corruption == corruption and c.severity == severity:
                return c
        raise KeyError((corruption, severity))


class RunSummary(BaseModel):
    schema_version: Literal[1] = SUMMARY_SCHEMA_VERSION
    baseline: str
    classes: list[str]
    run_ids: list[str]
    #: (corruption, severity) cells every model has; the aggregates use exactly these
    common_cells: list[tuple[str, int]]
    #: per model, its cells outside ``common_cells`` (left out of its aggregates)
    dropped_cells: dict[str, list[tuple[str, int]]]
    models: list[ModelSummary]

    def model(self, name: str) -> ModelSummary:
        for m in self.models:
            if m.model == name:
                return m
        raise KeyError(name)


# --------------------------------------------------------------------------- breaking points


class BreakingPoint(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str
    corruption: str
    #: balanced accuracy the model falls below: one per run, the same for every model (default: halfway from the
    #: baseline's clean value to chance)
    threshold: float
    #: position on the continuous scale (0 weakest, 1 strongest); None: it never falls below the threshold
    breaking_point: float | None
    breaking_point_ci_low: float | None
    breaking_point_ci_high: float | None
    #: the scale positions evaluated and the balanced accuracy at each
    evaluated: list[tuple[float, float]]
    n_images: int
    #: level of the accuracy intervals the breaking point's interval is read from (records before it: 0.95)
    confidence: float = 0.95
    #: the model whose clean balanced accuracy set ``threshold`` (the run's baseline); None: a threshold given
    #: with --breaking-point, or a record from before the threshold was shared
    threshold_model: str | None = None
    #: classes among the images (a seeded sample stratified by class); None: a record from before the sample was
    n_classes: int | None = None

"""The documents the store holds, one pydantic model per collection, checked on write and on read.

Every record carries ``schema_version``. Reading a record written by a newer domainbench is a
clear error (upgrade); an older record is migrated here, in one place, before validation.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from domainbench.records.config import SHIFTS_SCHEMA_VERSION, DomainConfig, FmrSettings, RunConfig
from domainbench.data.fingerprint import DatasetFingerprint
from domainbench.errors import UserInputError
from domainbench.records.packed import PackedArray
from domainbench.records.report import REPORT_SCHEMA_VERSION, RunReport
from domainbench.records.results import UNIT_SCHEMA_VERSION, BreakingPoint, UnitDocument
from domainbench.store.collections import Collection

RunStatus = Literal["queued", "running", "done", "failed", "interrupted", "cancelled"]


class StoreVersionError(UserInputError):
    """The store holds documents this version of domainbench cannot read."""


def _as_long_as(v: list[Any], info: Any, reference: str) -> list[Any]:
    """A per-image list field validator's check: ``v`` has one entry per entry of the field ``reference``."""
    ref = info.data.get(reference)
    if ref is not None and len(v) != len(ref):
        raise ValueError(f"{info.field_name} has {len(v)} entries but {reference} has {len(ref)}")
    return v


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DomainRecord(DomainConfig):
    """A planned domain, stored once per distinct plan (keyed by a hash of its content)."""

    domain_id: str
    created_at: str = ""

    def config(self) -> DomainConfig:
        """The plan itself, without the store's id and time (what `plan -o` writes)."""
        return DomainConfig.model_validate(self.model_dump(exclude={"domain_id", "created_at"}))


class DatasetInfo(_Record):
    name: str
    size: int
    classes: list[str]
    labelled: bool
    # the absolute spec the run evaluates and what its files were (a resume refuses a changed dataset)
    path: str | None = None
    fingerprint: DatasetFingerprint | None = None
    #: per real shift (``[[shift]]``), what its folder's files were (a resume refuses a changed one)
    shifts: dict[str, DatasetFingerprint] = Field(default_factory=dict, exclude_if=lambda v: not v)


class RunRecord(_Record):
    schema_version: Literal[3] = 3
    run_id: str
    domain_id: str
    domain: DomainConfig
    config: RunConfig
    status: RunStatus
    created_at: str
    dataset: DatasetInfo | None = None
    environment: dict[str, Any] = Field(default_factory=dict)
    #: the process working on the run: a "running" run whose process is gone was interrupted
    pid: int | None = None
    host: str | None = None
    resumed_at: str | None = None
    finished_at: str | None = None
    error: str | None = None
    n_unreadable: int | None = None
    unreadable: list[str] = Field(default_factory=list)
    #: seconds per stage: "run" -> decode/corruption waits, each model -> preprocess/forward/scoring/store
    #: and the images it scored (``domainbench.engine.timings``); empty for runs from before it was recorded
    timings: dict[str, dict[str, float]] = Field(default_factory=dict)
    #: mean PD threat of moving an image onto an image of another class (the unsafe scale)
    different_class_threat: float | None = None
    threat_anchors_per_class: int | None = None
    #: severity-ladder version per planned corruption (CorruptionSpec.ladder_version); a corruption
    #: missing here ran on version 1, from before ladders were versioned
    ladder_versions: dict[str, int] = Field(default_factory=dict)
    #: the FMR search of a run made by ``domainbench fmr``
    fmr: FmrSettings | None = None
    #: a run kind other than the built-in two (``engine.kinds``): its registered name and its settings as
    #: JSON; left out of a dump when unset, so corruption and FMR runs read and store as before
    kind: str | None = Field(default=None, exclude_if=lambda v: v is None)
    kind_settings: dict[str, Any] | None = Field(default=None, exclude_if=lambda v: v is None)
    # -- the work queue (backend/store/queue.py): set on runs launched into the queue only --
    queued_at: str | None = None
    #: the worker that holds the run; its claim is good until ``lease_until`` (Unix seconds)
    worker: str | None = None
    lease_until: float | None = None
    #: how many times a worker claimed the run (a run that keeps killing its worker stops)
    attempts: int = Field(default=0, ge=0)
    #: incremented by every claim and never reset: the fencing token of the lease's holder
    #: (``domainbench.store.fence``); left out of a dump while 0, so runs never queued read as before
    lease_epoch: int = Field(default=0, ge=0, exclude_if=lambda v: not v)
    #: per model and corruption, where balanced accuracy breaks (``run --breaking-point``); left out of a dump when empty
    breaking_points: list[BreakingPoint] = Field(default_factory=list, exclude_if=lambda v: not v)

    def ladder_version(self, corruption: str) -> int:
        return self.ladder_versions.get(corruption, 1)


class VLMUnitExtras(_Record):
    """What a generative model adds to a unit, per image of the shard (docs/generative-vlms.md)."""

    #: raw answers, first 200 characters (generate mode)
    answers: list[str] | None = None
    #: predictions per question (questions x images) when several --question are asked
    question_preds: list[list[int]] | None = None
    #: answers that named no class (stored prediction -1)
    unparsed: int = Field(default=0, ge=0)


class UnitRecord(UnitDocument):
    """One (run, model, corruption, severity, shard): sufficient statistics and per-image predictions.

    Per-image arrays are packed (``domainbench.records.packed``) and decode only when read, so reports,
    which need the counts alone, never decode them. Version 1 stored them as plain lists and
    the confusion densely; both still read (the migration only relabels the version).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: Literal[2] = UNIT_SCHEMA_VERSION  # type: ignore[assignment]
    preds: PackedArray = Field(default_factory=PackedArray)
    indices: PackedArray = Field(default_factory=PackedArray)
    #: true labels of the shard's images, stored with the clean pass only
    labels: PackedArray | None = None
    #: per image, 1 where the prediction is the true label (labelled data; None before version 2)
    hits: PackedArray | None = None
    #: per image, the softmax probability of the predicted class over the label set at the
    #: model's logit scale (float32; None before version 2)
    confidence: PackedArray | None = None
    #: where the unit's images were corrupted: "cpu" (numpy kernels) or "device" (torch kernels on the
    #: models' device, see --corrupt-on); None for the clean pass and for units stored before it was recorded
    corrupted_on: Literal["cpu", "device"] | None = None
    #: frost's ice layer: "imagenet-c" (crops of the reference's photographs) or "procedural" (see
    #: corruptions.kernels.frost_photos); None for other corruptions and for units stored before it was recorded
    frost_texture: Literal["imagenet-c", "procedural", "mixed"] | None = None
    elapsed_s: float | None = None
    computed_at: str | None = None
    #: the corruption's severity-ladder version (CorruptionSpec.ladder_version); units stored before it existed read as 1
    ladder_version: int = 1
    #: a generative model's confidences, answers and per-question predictions; None for dual encoders
    vlm: VLMUnitExtras | None = Field(default=None, exclude_if=lambda v: v is None)


class ThreatRecord(_Record):
    """PD threat sums of one corruption cell over one shard (model-independent)."""

    schema_version: Literal[1] = 1
    run_id: str
    corruption: str
    severity: int = Field(ge=1)
    shard: int = Field(ge=0)
    n: int = Field(ge=0)
    sum: float
    sum_sq: float
    n_above_1: int = Field(ge=0)
    max: float


class StabilityRecord(_Record):
    """Per-image stability metrics of one (model, corruption) over one shard's stability subset."""

    schema_version: Literal[1] = 1
    run_id: str
    model: str
    corruption: str
    shard: int = Field(ge=0)
    indices: list[int]
    #: perturbed versions per image (the parameter grid's size)
    points: int
    grid: list[dict[str, Any]] = Field(default_factory=list)
    divergence_radius: list[float]
    cosine: list[float]
    euclidean: list[float]
    #: upper - lower certificate of each radius
    gap: list[float] | None = None

    @field_validator("cosine", "euclidean")
    @classmethod
    def _one_per_image(cls, v: list[float], info: Any) -> list[float]:
        return _as_long_as(v, info, "divergence_radius")


class FmrUnitRecord(_Record):
    """One (run, tested model, shard) of an FMR run: per-image outcomes and the generated images.

    ``oracle_clean`` / ``oracle_final`` hold each oracle member's vote (in the run's oracle
    order) on the clean and on the kept image. ``images`` / ``originals`` are base64 PNGs of
    the kept and the clean image where at least one step was accepted, else None.
    """

    schema_version: Literal[1] = 1
    run_id: str
    model: str
    shard: int = Field(ge=0)
    search: str
    seed: int
    indices: list[int]
    labels: list[int]
    clean_preds: list[int]
    final_preds: list[int]
    validated: list[bool]
    steps: list[int]
    oracle_clean: list[list[int]]
    oracle_final: list[list[int]]
    ops: list[list[tuple[str, float]]]
    images: list[str | None]
    originals: list[str | None]
    elapsed_s: float | None = None
    computed_at: str | None = None

    @field_validator("labels", "clean_preds", "final_preds", "validated", "steps", "oracle_clean", "oracle_final",
                     "ops", "images", "originals")
    @classmethod
    def _one_per_image(cls, v: list[Any], info: Any) -> list[Any]:
        return _as_long_as(v, info, "indices")


class TaskUnitRecord(_Record):
    """One (run, model, cell) of a VQA or retrieval run (``engine.task_kind``), stored as soon as it is computed.

    ``outcomes``: per metric, [per-outcome values, the image of each] (``metrics.task_report.vqa_outcomes`` /
    ``retrieval_outcomes``), from which the row's numbers, intervals at any confidence and the paired tests are
    computed; ``raw``: the model's answers (VQA) or per-query ranks and top-1 items (retrieval), what a later cell's
    flips and top-1 changes compare with; ``predictions``: the export's prediction rows.
    """

    schema_version: Literal[1] = 1
    run_id: str
    model: str
    corruption: str
    severity: int = Field(ge=0)
    head: dict[str, Any]
    outcomes: dict[str, list[list[float]]]
    raw: dict[str, list[Any]]
    predictions: list[dict[str, Any]]
    computed_at: str | None = None


class ClipUnitRecord(_Record):
    """One (run, model, cell) of a clip run (``engine.clip_kind``), stored as soon as it is computed.

    ``cell``: the cell's key (``clean``, ``flicker:4``, ``gaussian_noise:3/static``); ``preds``: per clip (in the
    run's ``kind_settings["clips"]`` order), each sampled frame's predicted class; ``mean_preds``: per clip, the
    prediction of its frames' mean embedding (None for a model without embeddings: a generative VLM);
    ``video_preds`` / ``video_answers``: per clip, a video-input model's answer to the whole clip (None otherwise). Runs stored
    before this collection keep their units on the run record (``kind_settings["units"]``), read unchanged.
    """

    schema_version: Literal[1] = 1
    run_id: str
    model: str
    cell: str
    preds: list[list[int]]
    mean_preds: list[int] | None = None
    video_preds: list[int] | None = None
    video_answers: list[str] | None = None
    computed_at: str | None = None


class LabelSetRecord(_Record):
    """A class list stored once and named by the digest of its JSON (``domainbench.store.labelsets``)."""

    schema_version: Literal[1] = 1
    labelset_id: str
    classes: list[str]


class TextEmbeddingRecord(_Record):
    """A cached zero-shot classifier: one L2-normalised float32 row per class (``engine/text_cache.py``)."""

    schema_version: Literal[1] = 1
    cache_key: str
    model: str
    n_classes: int = Field(ge=1)
    n_templates: int = Field(ge=1)
    rows: list[PackedArray]
    created_at: str | None = None


RECORDS: dict[Collection, type[BaseModel]] = {
    Collection.DOMAINS: DomainRecord,
    Collection.RUNS: RunRecord,
    Collection.UNITS: UnitRecord,
    Collection.STABILITY: StabilityRecord,
    Collection.THREAT: ThreatRecord,
    Collection.FMR: FmrUnitRecord,
    Collection.TASK_UNITS: TaskUnitRecord,
    Collection.CLIP_UNITS: ClipUnitRecord,
    # a finished run's report (rebuildable from the other records)
    Collection.SUMMARIES: RunReport,
    Collection.LABELSETS: LabelSetRecord,
    Collection.TEXT_EMBEDDINGS: TextEmbeddingRecord,
}

CURRENT_VERSIONS: dict[Collection, int] = {
    Collection.DOMAINS: SHIFTS_SCHEMA_VERSION,
    Collection.RUNS: 3,
    Collection.UNITS: UNIT_SCHEMA_VERSION,
    Collection.STABILITY: 1,
    Collection.THREAT: 1,
    Collection.FMR: 1,
    Collection.TASK_UNITS: 1,
    Collection.CLIP_UNITS: 1,
    Collection.SUMMARIES: REPORT_SCHEMA_VERSION,
    Collection.LABELSETS: 1,
    Collection.TEXT_EMBEDDINGS: 1,
}


def _migrate_run_1(doc: dict[str, Any]) -> dict[str, Any]:
    # version 1 called the different-class threat "threat_reference", a name the metrics
    # module also used for its per-anchor loop
    doc = dict(doc)
    doc["different_class_threat"] = doc.pop("threat_reference", None)
    doc["schema_version"] = 2
    return doc


def _migrate_run_2(doc: dict[str, Any]) -> dict[str, Any]:
    # version 3 added the queue fields, all optional: a version-2 run was never queued
    return {**doc, "schema_version": 3}


def _migrate_unit_1(doc: dict[str, Any]) -> dict[str, Any]:
    # version 2 packs per-image lists and keeps the confusion sparse; the record types read
    # version 1's plain lists and dense rows as they are (no hits or confidences were stored)
    return {**doc, "schema_version": 2}


#: (collection, version) -> function lifting a document to version + 1; None: not migratable
MIGRATIONS: dict[tuple[Collection, int], Any] = {
    (Collection.RUNS, 1): _migrate_run_1,
    (Collection.RUNS, 2): _migrate_run_2,
    (Collection.UNITS, 1): _migrate_unit_1,
    # a version-1 summary was an untyped dict; the report is rebuilt from the units instead
    (Collection.SUMMARIES, 1): None,
    # version 2 called a PD cell safe by its mean threat alone; version 3 by the share of images above it
    (Collection.SUMMARIES, 2): None,
}


#: collections whose record type reads every version up to the current one as it is: a plan's version says what
#: it holds (2: compositions, 3: real shifts), and a version-1 plan stays version 1 (its content, and so its domain id, unchanged)
READ_AS_IS = frozenset({Collection.DOMAINS})


def upgrade(collection: str, doc: dict[str, Any], where: str) -> dict[str, Any] | None:
    """The document lifted to the current version; None when it must be rebuilt (summaries)."""
    current = CURRENT_VERSIONS[collection]
    version = doc.get("schema_version", 1)
    if not isinstance(version, int) or version > current:
        raise StoreVersionError(
            f"{where} holds a {collection} document of schema version {version!r}, written by a newer "
            f"domainbench (this one reads up to {current}); upgrade domainbench to read it"
        )
    while version < current and collection not in READ_AS_IS:
        step = MIGRATIONS.get((collection, version), "missing")
        if step is None:
            return None
        if step == "missing":
            raise StoreVersionError(
                f"{where} holds a {collection} document of schema version {version}, which this domainbench "
                f"cannot migrate to {current}; re-run the run or use an older domainbench"
            )
        doc = step(doc)
        version = doc["schema_version"]
    return doc


def validate(collection: str, doc: BaseModel | dict[str, Any]) -> BaseModel:
    """The record model of ``doc``; a plain dict is validated, a model of the wrong kind rejected."""
    model = RECORDS[collection]
    if isinstance(doc, model):
        return doc
    if isinstance(doc, BaseModel):
        doc = doc.model_dump(mode="json")
    try:
        return model.model_validate(doc)
    except ValidationError as e:
        first = e.errors()[0]
        loc = ".".join(str(p) for p in first["loc"]) or "document"
        key = {k: doc.get(k) for k in ("run_id", "model", "corruption", "severity", "shard") if k in doc}
        raise ValueError(f"invalid {collection} document {key}: {loc}: {first['msg']}") from None

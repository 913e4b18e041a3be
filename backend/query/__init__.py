"""Reading results: the one place `show`, `export` and the UI read runs, reports and per-image records.

The frontend reads through these functions only, never the engine's internals or the store's
collections, so a change of how results are stored or rebuilt is made here once. Everything
here reads; nothing writes. Unit documents are loaded only where a page needs per-image values
(a cell's predictions); progress and cache keys count keys, never documents.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cache
from typing import TYPE_CHECKING, Any

import numpy as np

from domainbench.records.config import SHIFT_PREFIX
from domainbench.query.compare import flip_comparison, paired_comparison, pooled_comparison, run_pairs
from domainbench.query.confidence import OutcomesReader, RunOutcomes, load_draws, load_intervals, read_outcomes
from domainbench.query.export import breaking_section, cell_fields, cell_rows, csv_rows, to_csv, to_json
from domainbench.query.shift import RealShiftResult, real_shift_results
from domainbench.engine.reports import build_report, load_report
from domainbench.engine.vlm_units import load_unparseable_rates
from domainbench.errors import UserInputError
from domainbench.metrics.comparison import Comparison, FlipVerdict
from domainbench.metrics.compare_intervals import RunDraws, aligned
from domainbench.metrics.confidence import RunIntervals
from domainbench.metrics.shift_match import ShiftMatch, matches_section, shift_matches
from domainbench.records.report import RunReport
from domainbench.store import Store
from domainbench.store.records import DomainRecord, FmrUnitRecord, RunRecord, StabilityRecord, UnitRecord
from domainbench.stats.bootstrap import DEFAULT_RESAMPLES
from domainbench.stats.intervals import DEFAULT_CONFIDENCE
from domainbench.store.status import run_status

if TYPE_CHECKING:
    from domainbench.query.gate import CheckResult
    from domainbench.metrics.letters import TiedGroups
    from domainbench.engine.jobs import Corrupted
    from domainbench.engine.tasks import Cell

FINISHED = "done"
CLEAN = "clean"

__all__ = [
    # the store's handle and its record types, for the readers' annotations (the frontend imports nothing of the store)
    "Store", "RunRecord", "StabilityRecord", "FmrUnitRecord", "run_status", "find_run",
    "CELL_FIELDS", "cell_fields", "FINISHED", "OutcomesReader", "check", "groups", "RunOutcomes", "cell_rows", "cell_units", "comparison", "draws", "drawn_of", "intervals", "outcomes", "outcomes_once", "run_draws", "pairs", "clean_units", "model_units", "task_run", "task_verdict_lines", "task_prediction_columns", "done_cells", "expected_cells", "export_csv", "export_json", "export_rows", "flip_verdicts", "task_gallery_pixels", "clip_run", "clip_prediction_rows", "clip_verdict_lines", "clip_strip", "pooled",
    "fmr_records", "get_run", "list_runs", "recreate", "recreate_images", "report", "report_of", "run_fingerprint",
    "run_progress", "shift_matches_of", "stability_records", "stored_domain", "stored_domains", "unit_counts",
    "real_shift", "RealShiftResult",
]


def __getattr__(name: str) -> Any:
    if name == "CELL_FIELDS":  # the export's columns, read from the metric registry on each use
        return cell_fields()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# --------------------------------------------------------------------------- runs


def finetune_lineage(models: Sequence[str]) -> list[str]:
    """For each ``local:`` fine-tune among ``models``: one line of its lineage (base, plan, λ; docs/finetune.md)."""
    from domainbench.models.finetune_guard import lineage

    return [line for m in models if (line := lineage(m)) is not None]


def list_runs(store: Store) -> list[RunRecord]:
    """Every stored run, newest first."""
    return store.list_runs()


def find_run(store: Store, run_id: str) -> RunRecord | None:
    """The run, or None when the store has none by that id."""
    return store.get_run(run_id)


def get_run(store: Store, run_id: str) -> RunRecord:
    """The run, or a ``UserInputError`` naming the store and where to find the runs."""
    run = store.get_run(run_id)
    if run is None:
        raise UserInputError(f"no run {run_id!r} in {store.description}; pick one from the runs table or `domainbench ls`")
    return run


#: run kinds of VQA and retrieval runs (``engine.task_kind.TASK_KINDS``, named here so a read imports no torch)
TASK_KINDS = ("vqa", "retrieval")


def expected_cells(run: RunRecord) -> int:
    """Cells a finished run has: per model the clean pass, every severity, every composition and every real
    shift (one cell each, as ``engine.runner`` evaluates them), or one FMR search."""
    if run.fmr is not None:
        return len(run.config.models)
    per_model = (1 + sum(len(c.severities) for c in run.domain.corruptions) + len(run.domain.compositions)
                 + len(run.domain.shift))
    return len(run.config.models) * per_model


def done_cells(store: Store, run: RunRecord) -> int:
    """Cells with at least one stored unit: (model, corruption, severity) of a corruption run,
    the model of an FMR run (one search per model). Only keys are read, never documents."""
    if run.fmr is not None:
        return len({k[1] for k in store.fmr.keys(run_id=run.run_id)})
    if run.kind in TASK_KINDS:  # a VQA or retrieval run stores one unit per (model, cell)
        return len(store.task_units.keys(run_id=run.run_id))
    if run.kind == "clip":  # one unit per (model, cell): a clip_units document, or on an older clip run's record
        return len(store.clip_units.keys(run_id=run.run_id)) + len((run.kind_settings or {}).get("units", {}))
    return len({(k[1], k[2], k[3]) for k in store.units.keys(run_id=run.run_id)})


def run_progress(store: Store, run: RunRecord) -> float:
    """Share of the run's planned cells with at least one stored unit (see ``done_cells``)."""
    return min(1.0, done_cells(store, run) / max(expected_cells(run), 1))


def unit_keys(store: Store, run: RunRecord) -> set[tuple[Any, ...]]:
    """The keys of the run's stored units (an FMR run's: its search shards); keys only, never documents.
    The last key field is the shard."""
    return store.fmr.keys(run_id=run.run_id) if run.fmr is not None else store.units.keys(run_id=run.run_id)


def stored_units(store: Store, run_id: str) -> int:
    """How many units the run has stored (keys only)."""
    return len(store.units.keys(run_id=run_id))


def unit_counts(store: Store, run: RunRecord) -> tuple[int, int]:
    """(:func:`stored_units`, :func:`done_cells`) of the run, its unit keys read once where both count them (a
    corruption run: reading a large run's keys scans its unit rows)."""
    if run.fmr is not None or run.kind in TASK_KINDS:
        return stored_units(store, run.run_id), done_cells(store, run)
    if run.kind == "clip":  # one unit per (model, cell), each its own clip_units document
        done = done_cells(store, run)
        return done, done
    keys = store.units.keys(run_id=run.run_id)
    return len(keys), len({(k[1], k[2], k[3]) for k in keys})


def run_fingerprint(store: Store, run_id: str) -> tuple[Any, ...]:
    """A cache key of everything derived from a run's stored results.

    A run that is not running cannot change its results without changing its status (or
    being resumed), so its status and timestamps suffice and no key is counted; a running
    run also counts what it stored so far, so each new unit draws the page anew.
    """
    run = store.get_run(run_id)
    if run is None:
        return ("missing",)
    status = run_status(run)
    if status != "running":
        return (status, run.resumed_at, run.finished_at)
    return (
        status,
        run.resumed_at,
        len(store.units.keys(run_id=run_id)),
        len(store.threat.keys(run_id=run_id)),
        len(store.stability.keys(run_id=run_id)),
    )


# --------------------------------------------------------------------------- reports


def report_of(store: Store, run: RunRecord, baseline: str | None = None) -> RunReport:
    """The stored report of a finished run, re-based when asked; otherwise one built from the stored units.

    Only a finished run's stored report is trusted: a resumed run still holds the report of
    its previous finish, which its new units may already have outgrown.
    """
    if run_status(run) != FINISHED:
        return build_report(store, run.run_id, baseline)
    return load_report(store, run.run_id, baseline)


def report(store: Store, run_id: str, baseline: str | None = None) -> RunReport:
    """The run's report against ``baseline`` (default: the run's own), as `show` prints it."""
    run = store.get_run(run_id)
    if run is None:
        raise UserInputError(f"no run {run_id!r} in {store.description}; see `domainbench ls`")
    return report_of(store, run, baseline)


def shift_matches_of(report: RunReport) -> list[ShiftMatch]:
    """Per real-shift cell (``shift:NAME``), the synthetic cell that behaves most like it, with its sentence."""
    return shift_matches(report.classification)


def real_shift(store: Store, report: RunReport, confidence: float = DEFAULT_CONFIDENCE,
               read: OutcomesReader = read_outcomes) -> list[RealShiftResult]:
    """Per real-shift cell (``shift:NAME``): each model's accuracy on the real images with its interval (flips where
    unlabelled), the paired test between the models on them, the synthetic cell that behaves most like them, and the
    sentence that says it (``query.shift``): `show`, the run page's verdict and ``export --format json`` print it."""
    return real_shift_results(store, report, confidence, read)


def outcomes(store: Store, run_id: str) -> RunOutcomes:
    """The run's per-image outcomes (hits, predictions, indices, labels), read from its unit documents: what its
    intervals, resamples and paired tests start from. Each call reads the documents again; the functions below
    take a reader (``read``) that keeps them, e.g. the UI's, once per run state, or :func:`outcomes_once`."""
    return read_outcomes(store, run_id)


def outcomes_once() -> OutcomesReader:
    """A reader of :func:`outcomes` that reads each (store, run) once: for one command that shows several things
    of the same runs (``show``, ``export``: intervals and verdicts)."""
    return cache(read_outcomes)


def per_image_gap(store: Store, run_id: str, read: OutcomesReader = read_outcomes) -> str | None:
    """Why the run's models cannot be paired image by image (its units store no per-image predictions, or they
    cannot be aligned), or None where they can: the paired verdict needs them, the summary's intervals do not."""
    outcomes = read(store, run_id)
    if outcomes.images is None:
        return outcomes.problem
    if outcomes.images.n == 0:
        return "this run's units store none, only counts"
    return None


def intervals(store: Store, report: RunReport, confidence: float = DEFAULT_CONFIDENCE,
              read: OutcomesReader = read_outcomes) -> RunIntervals:
    """Every interval of the report (seeded by the run: the same run gives the same intervals), as ``show`` prints them."""
    return load_intervals(store, report, confidence, read=read)


def run_draws(store: Store, report: RunReport, resamples: int = DEFAULT_RESAMPLES, seed: int | None = None,
              read: OutcomesReader = read_outcomes) -> RunDraws | str:
    """One run's numbers under each draw of its images' multipliers (seeded by the run, or by ``seed``), or why
    there are none (no per-image outcomes stored, a partial clean pass)."""
    try:
        return load_draws(store, report, resamples, seed, read)
    except ValueError as e:  # MetricInputError
        return str(e)


#: :func:`run_draws`' shape: (store, report, resamples, seed or None for the run's own) -> draws or why none
DrawsLoader = Callable[[Store, RunReport, int, "int | None"], "RunDraws | str"]


def draws(store: Store, reports: list[RunReport], resamples: int = DEFAULT_RESAMPLES,
          load: DrawsLoader = run_draws) -> dict[str, RunDraws | str]:
    """Per run, :func:`run_draws` paired across the runs for averaging (``metrics.compare_intervals``): runs on
    the same images are resampled jointly (with the first such run's seed), runs on other images independently;
    a run alone keeps the resamples of its own intervals. ``load``: a cached :func:`run_draws`."""
    found: dict[str, RunDraws | str] = {}
    seed_of: dict[str, int] = {}
    for r in reports:
        d = load(store, r, resamples, None)
        if isinstance(d, RunDraws) and d.seed != seed_of.setdefault(d.images, d.seed):
            d = load(store, r, resamples, seed_of[d.images])
        found[r.run_id] = d
    paired = iter(aligned([d for d in found.values() if isinstance(d, RunDraws)]))
    return {rid: next(paired) if isinstance(d, RunDraws) else d for rid, d in found.items()}


def pairs(store: Store, report: RunReport, confidence: float = DEFAULT_CONFIDENCE,
          read: OutcomesReader = read_outcomes) -> dict[str, object]:
    """The paired tests of the run's models, as ``export --format json`` writes them."""
    return run_pairs(store, report, confidence, read)


def comparison(store: Store, run_ids: list[str], models: list[str] | None = None,
               confidence: float = DEFAULT_CONFIDENCE, read: OutcomesReader = read_outcomes) -> Comparison:
    """The paired comparison of the runs' models: plain verdicts and per-cell tests (``compare``, ``show``)."""
    return paired_comparison(store, run_ids, models, confidence, read=read)


def pooled(store: Store, run_ids: list[str], confidence: float = DEFAULT_CONFIDENCE,
           read: OutcomesReader = read_outcomes) -> Comparison:
    """The paired comparison over every run's corrupted cells (runs of several domains on the same images): the
    Compare page's tied groups (``query.compare.pooled_comparison``)."""
    return pooled_comparison(store, run_ids, confidence, read=read)


def flip_verdicts(store: Store, run_ids: list[str], confidence: float = DEFAULT_CONFIDENCE,
                  read: OutcomesReader = read_outcomes) -> list[FlipVerdict]:
    """The label-free comparison of the runs' models, by label flips (an unlabelled run's verdict)."""
    return flip_comparison(store, run_ids, confidence, read=read)


def export_csv(report: RunReport, store: Store | None = None, confidence: float = DEFAULT_CONFIDENCE) -> str:
    """``domainbench export --format csv``: one row per model × cell; with the store, the intervals (and a
    generative run's unparseable rates, the breaking points of a run made with --breaking-point)."""
    if store is None:
        return to_csv(report)
    return to_csv(*_export_sources(report, store, confidence))


def export_rows(report: RunReport, store: Store | None = None,
                confidence: float = DEFAULT_CONFIDENCE) -> tuple[list[str], list[dict[str, Any]]]:
    """The columns and rows of ``export_csv`` (the Python API's ``Run.to_pandas``), values unformatted."""
    if store is None:
        return csv_rows(report)
    return csv_rows(*_export_sources(report, store, confidence))


def _export_sources(report: RunReport, store: Store, confidence: float) -> tuple[Any, ...]:
    run = store.get_run(report.run_id)
    read = outcomes_once()  # the intervals and the groups' paired tests: the run's units read once
    tied = _groups_if_any(store, report, confidence, read)
    return (report, intervals(store, report, confidence, read), load_unparseable_rates(store, report.run_id),
            run.breaking_points if run is not None else [], None if tied is None else tied.letters)


def _groups_if_any(store: Store, report: RunReport, confidence: float, read: OutcomesReader) -> TiedGroups | None:
    """The run's tied groups, or None where its models cannot be paired (one model, no labels, no image that two
    models both evaluated): an export then has no group column rather than failing."""
    if not (len(report.model_names) > 1 and report.models[0].labeled):
        return None
    try:
        return groups(store, report, confidence, read)
    except UserInputError:
        return None


def groups(store: Store, report: RunReport, confidence: float = DEFAULT_CONFIDENCE,
           read: OutcomesReader = read_outcomes) -> TiedGroups:
    """The tied groups of a run's models (compact letter display of its verdicts' Holm-adjusted tests): the
    exports' ``group`` column, ``show``'s line, the UI's ranking. Needs two models on labelled images."""
    return paired_comparison(store, [report.run_id], confidence=confidence, read=read).groups


def export_json(run: RunRecord, report: RunReport, store: Store | None = None,
                confidence: float = DEFAULT_CONFIDENCE) -> str:
    """``domainbench export --format json``: the run and its report (intervals, pairs and verdicts need the store)."""
    shifts = matches_section(shift_matches_of(report))
    if store is None:
        return to_json(run, report, extra=shifts)
    read = outcomes_once()  # the intervals and the pairs of one run: its units read once
    found = _groups_if_any(store, report, confidence, read)
    tied = {} if found is None else {"groups": found.model_dump(mode="json")}
    real = [r.as_json() for r in real_shift(store, report, confidence, read)]
    return to_json(run, report, intervals(store, report, confidence, read),
                   {**pairs(store, report, confidence, read), **tied, **breaking_section(run.breaking_points), **shifts,
                    **({"real_shift": real} if real else {})})


# --------------------------------------------------------------------------- per-image records


def cell_units(store: Store, run_id: str, corruption: str, severity: int) -> list[UnitRecord]:
    """The units of one cell (every model and shard): per-image predictions."""
    return store.units(run_id, corruption=corruption, severity=severity)


def task_run(store: Store, run_id: str) -> Any:
    """A VQA or retrieval run's stored result (``engine.task_kind.TaskResult``): its rows with intervals, paired
    tests and answers (or queries). Imports the task machinery (torch) only when a task run is read."""
    from domainbench.engine.task_kind import load_task_run

    return load_task_run(store, run_id)


def task_gallery_pixels(result: Any, corruption: str, severity: int, images: list[int]) -> Any:
    """(clean, corrupted) pixels of a task run's ``images`` in one cell, re-created from its manifest and seed."""
    from domainbench.engine.task_eval import gallery_pixels

    run = result.run
    cfg = run.config
    return gallery_pixels(run.domain, result.task, cfg.dataset, corruption, severity, images, limit=cfg.limit,
                          seed=cfg.seed, image_size=cfg.image_size)


def clip_run(store: Store, run_id: str) -> Any:
    """A clip run's stored result (``engine.clip_kind.ClipRunResult``): its rows with intervals, paired tests, clips
    and frame predictions. Imports the clip machinery (torch) only when a clip run is read."""
    from domainbench.engine.clip_kind import load_clip_run

    return load_clip_run(store, run_id)


def clip_prediction_rows(result: Any) -> list[dict[str, Any]]:
    """One row per (model, cell, clip, sampled frame), as `export --predictions` writes them."""
    from domainbench.engine.clip_output import prediction_rows

    return prediction_rows(result)


def clip_verdict_lines(result: Any) -> list[str]:
    from domainbench.engine.clip_output import verdict_lines

    return verdict_lines(result)


def clip_strip(result: Any, clip: str, corruption: str, severity: int, mode: str | None) -> tuple[Any, Any]:
    """A clip's sampled frames, clean and corrupted (re-decoded from the run's clips: frames are not stored)."""
    from domainbench.engine.clip_kind import strip_frames

    return strip_frames(result.run, clip, corruption, severity, mode)


def task_verdict_lines(result: Any) -> list[str]:
    """The paired verdicts of a task run that hold after Holm, as `show` prints them."""
    from domainbench.query.task_output import verdict_lines

    return verdict_lines(result)


def task_prediction_columns(task: str) -> tuple[str, ...]:
    """The columns of a task run's answer (VQA) or query (retrieval) rows, as `export --predictions` writes them."""
    from domainbench.query.task_output import RETRIEVAL_PREDICTION_COLUMNS, VQA_PREDICTION_COLUMNS

    return tuple(VQA_PREDICTION_COLUMNS if task == "vqa" else RETRIEVAL_PREDICTION_COLUMNS)


def model_units(store: Store, run_id: str, model: str) -> list[UnitRecord]:
    """Every unit of one model (clean pass and every cell): per-image predictions."""
    return store.units(run_id, model=model)


def clean_units(store: Store, run_id: str, model: str | None = None) -> list[UnitRecord]:
    """The clean pass's units (with the images' labels), of one model or all."""
    where = {"model": model} if model is not None else {}
    return store.units(run_id, **where, corruption=CLEAN, severity=0)


def stability_records(store: Store, run_id: str) -> list[StabilityRecord]:
    """Every per-image stability record of the run."""
    return store.stability(run_id)


def fmr_records(store: Store, run_id: str, model: str | None = None) -> list[FmrUnitRecord]:
    """An FMR run's per-image outcomes and images, of one tested model or all."""
    return store.fmr(run_id, **({"model": model} if model is not None else {}))


def stored_domains(store: Store) -> list[DomainRecord]:
    """Every stored plan, newest first."""
    return sorted(store.domains.find(), key=lambda d: d.created_at, reverse=True)


def stored_domain(store: Store, domain_id: str) -> DomainRecord | None:
    """The plan stored under ``domain_id``; None when there is none."""
    return store.domains.get(domain_id=domain_id)


def recreate(run: RunRecord, corruption: str, severity: int, indices: Sequence[int]) -> tuple[Corrupted, np.ndarray]:
    """A cell's corrupted images and what its corruption drew for each, made again from the run's seed
    (neither is stored).

    Each image's seed is a function of (run seed, corruption, severity, dataset index) only
    (``domainbench.engine.jobs.image_seeds``) and the cell's job is the runner's own
    (``engine.runner.cells_of``: ladder, plan parameters or a composition's steps), so these are the
    pixels the models saw and the values the kernel drew. Returns the images that decoded and their
    indices; severity 0 gives the clean images.
    """
    from domainbench.engine.jobs import Corrupted, run_job

    from domainbench.engine.dataset_pin import check_same_dataset

    ds = _run_dataset(run.config.model_dump_json(include={"dataset", "classes", "image_size", "limit"}))
    check_same_dataset(run, ds)  # the same indices in a changed folder are other images
    batch = ds.load(np.asarray(indices, dtype=np.int64))
    if severity == 0 or corruption == CLEAN:
        return Corrupted(batch.images, {}), batch.indices
    return run_job(_cell(run, corruption, severity).job(0), batch.images, batch.indices, run.config.seed), batch.indices


def _cell(run: RunRecord, corruption: str, severity: int) -> Cell:
    from domainbench.engine.runner import cells_of

    cell = next((c for c in cells_of(run.domain) if (c.corruption, c.severity) == (corruption, severity)), None)
    if cell is None:
        raise UserInputError(f"run {run.run_id} has no cell {corruption} at severity {severity}")
    return cell


def recreate_images(run: RunRecord, corruption: str, severity: int, indices: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """The corrupted images the run evaluated (``recreate``), and the indices of those that decoded."""
    corrupted, kept = recreate(run, corruption, severity, indices)
    return corrupted.images, kept


def drawn_of(run: RunRecord, unit: UnitRecord) -> dict[str, list[Any]]:
    """What the unit's corruption drew per image (a blur angle, shadow polygons, a composition's
    ``steps``), one entry per image of ``unit.indices``, as ``corruptions.corrupt_batch`` returns it.

    Units stored before these were made again hold them in ``params["drawn"]`` (plain lists or
    packed): those are returned as stored. Later units leave them out: they are the same for every
    model of a cell and a pure function of the run's seed, the cell and the images, so they are made
    again here by re-running the cell's corruption on the unit's images (a device-corrupted unit
    drew the same values: its torch kernels draw from the same generators). Refused where that
    could differ from what the run drew: a changed severity ladder, another frost texture, an
    image that no longer decodes.
    """
    if "drawn" in unit.params:
        return unit.params["drawn"]
    if unit.corruption == CLEAN or unit.corruption.startswith(SHIFT_PREFIX):
        return {}
    from domainbench import corruptions
    from domainbench.corruptions.kernels.frost_photos import texture_source
    from domainbench.engine.jobs import composition_steps

    what = f"the draws of {unit.corruption} (severity {unit.severity}, shard {unit.shard}) of run {run.run_id}"
    steps = composition_steps(_cell(run, unit.corruption, unit.severity).job(0))
    # the ladders the cell's kernels used: the unit's own, or its steps' as the run recorded them
    used = {n: run.ladder_versions.get(n) for n, _ in steps} if steps else {unit.corruption: unit.ladder_version}
    changed = sorted(n for n, v in used.items() if v is not None and v != corruptions.get(n).ladder_version)
    if changed:
        raise UserInputError(f"{what} cannot be made again: this domainbench has another severity ladder for "
                             f"{', '.join(changed)} than the run used")
    if unit.frost_texture not in (None, texture_source()):
        raise UserInputError(f"{what} cannot be made again: the run overlaid the {unit.frost_texture} frost texture, "
                             f"this environment uses {texture_source()}")
    corrupted, kept = recreate(run, unit.corruption, unit.severity, list(unit.indices))
    if not np.array_equal(kept, np.asarray(unit.indices)):
        raise UserInputError(f"{what} cannot be made again: images {sorted(set(unit.indices) - set(kept.tolist()))} "
                             "of the run's dataset no longer decode")
    return corrupted.drawn


# not cached: a cached dataset keeps the listing it was opened with, so a folder changed since would pass the
# fingerprint check and its indices name other files (issue 36, item 4)
def _run_dataset(config_json: str) -> Any:
    from domainbench.records.config import RunConfig
    from domainbench.data import open_dataset

    from domainbench.records.label_sets import resolve_classes

    cfg = RunConfig.model_validate_json(config_json)
    return open_dataset(cfg.dataset, classes=resolve_classes(cfg.classes), image_size=cfg.image_size).subset(cfg.limit)


# --------------------------------------------------------------------------- gates


def check(store: Store, run_id: str, requirements: Sequence[str] = (), *, against: str | None = None,
          models: Sequence[str] | None = None, confident: bool = False, confidence: float = DEFAULT_CONFIDENCE,
          baseline: str | None = None) -> CheckResult:
    """``domainbench check``: the run's requirements (``metrics.requirements``) and, ``against`` a baseline run of
    the same plan and images, whether a model regressed significantly (``query.regression``)."""
    from domainbench.query.gate import run_check

    return run_check(store, report(store, run_id, baseline), requirements, against=against, models=models,
                     confident=confident, confidence=confidence, read=outcomes_once())

"""The evaluation engine: one lifecycle for every kind of run, on any executor.

A corruption run corrupts once per (corruption, severity) and feeds every model; an FMR run
(``fmr=`` settings, ``domainbench.fmr.kind``) searches per (tested model, shard). For a
corruption run one unit of work is (run, model, corruption, severity, shard). Units are upserted as soon as
they finish, so a killed run loses at most the units in flight and ``resume`` recomputes
nothing that is stored. Per unit we store sufficient statistics (confusion matrix, flip
count, n, per-image predictions), never only final numbers: metrics are derived later, and
the baseline model can change after the run.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from domainbench import corruptions
from domainbench.config import DomainConfig, FmrSettings, RunConfig
from domainbench.data import Dataset
from domainbench.engine.adaptive import AdaptiveStopping, adaptive_shards, adaptive_stopping
from domainbench.engine.cancel import CancelWatch
from domainbench.engine.dataset_pin import check_same_dataset, dataset_info, open_run_dataset, pinned_config
from domainbench.engine.frost_pin import check_same_frost_texture
from domainbench.engine.jobs import CLEAN, Job
from domainbench.engine.lifecycle import (check_new_run_id, complete_run, create_run, new_run_id, now, restart_run,
                                          stored_run)
from domainbench.engine.local_executor import LocalExecutor
from domainbench.engine.scoring import ModelState
from domainbench.engine import shift_cells
from domainbench.engine.timings import STARTUP, StageTimes
from domainbench.engine.tasks import Cell, RunContext, RunEvents, RunTask, SilentEvents, StabilityTask, ThreatTask
from domainbench.engine.work import Executor, RunStats, ShardWork
from domainbench.errors import UserInputError
from domainbench.store import Store
from domainbench.store.fenced_store import fenced_for_this_process
from domainbench.store.records import RunRecord

if TYPE_CHECKING:
    from domainbench.fmr.kind import FmrKind
    from domainbench.fmr.tested import TestedModel

__all__ = ["Engine", "RunStats", "auto_shard_size", "cells_of", "check_ladders", "ladder_versions", "new_run_id",
           "open_run_dataset"]

def cells_of(domain: DomainConfig) -> list[Cell]:
    cells = [Cell(CLEAN, 0, None)]
    for c in domain.corruptions:
        for s in c.severities:
            # explicit params override the ladder's values at every listed severity
            ladder = corruptions.resolve_params(c.name, severity=s)
            params = {**ladder, **c.params} if c.params else None
            cells.append(Cell(c.name, s, params, params or ladder))
    for comp in domain.compositions:
        # one cell of severity 1 per composition; its steps are its parameters
        steps = {"steps": [[name, severity] for name, severity in comp.pairs]}
        cells.append(Cell(comp.cell_name, 1, steps, steps))
    return cells


def ladder_versions(domain: DomainConfig) -> dict[str, int]:
    """The severity-ladder version of each planned corruption in this domainbench."""
    return {c.name: corruptions.get(c.name).ladder_version for c in domain.corruptions}


def check_ladders(run: RunRecord, has_units: bool) -> dict[str, int]:
    """The run's ladder versions; a run with stored units must still have the ladders it began with.

    Resuming across a recalibration would put units of two severity definitions into one cell.
    """
    current = ladder_versions(run.domain)
    if has_units:
        changed = {n: (run.ladder_version(n), v) for n, v in current.items() if run.ladder_version(n) != v}
        if changed:
            what = ", ".join(f"{n} (v{old} stored, v{new} now)" for n, (old, new) in changed.items())
            raise UserInputError(
                f"run {run.run_id} was computed with other severity ladders: {what}; resuming would mix two "
                "definitions of a severity in one cell, so start a new run of the same domain instead"
            )
    return current


def auto_shard_size(ds: Dataset) -> int:
    """Images per shard so that one corrupted shard is about 32 MB (16..512 images)."""
    per_image = int(np.prod(ds.arrays.shape[1:])) if ds.arrays is not None else ds.image_size**2 * 3
    return int(max(16, min(512, (32 << 20) // per_image)))


class Engine:
    """Owns a run from its checked inputs to its report; where the work runs is the executor's choice."""

    def __init__(self, store: Store, events: RunEvents | None = None, executor: Executor | None = None) -> None:
        self.store = store
        self.events: RunEvents = events or SilentEvents()
        self.executor: Executor = executor or LocalExecutor()
        self.stats = RunStats()
        self.timer = StageTimes()
        self._adaptive: AdaptiveStopping | None = None  # set for a run made with --adaptive
        self._shifts: list[shift_cells.ShiftImages] = []  # the run's real-shift folders, opened
        #: the fixed costs before the first shard (``timings.STARTUP``); an entry point adds its own imports
        self.startup = StageTimes()

    # -- public entry points ----------------------------------------------------------
    def start(self, domain: DomainConfig, cfg: RunConfig, run_id: str | None = None, fmr: FmrSettings | None = None,
              tested: Sequence[TestedModel] | None = None) -> str:
        """Validate everything, then create the run and evaluate it. Returns the run id.

        ``run_id`` lets a caller that launches the run in the background (the UI) know its
        id up front; by default one is made from the time and the domain text. With ``fmr``
        settings the run is an FMR search (``domainbench.fmr.kind``; ``tested``: ready-made
        tested models instead of ``cfg.models``).
        """
        if fmr is not None:
            return self._fmr().start(domain, cfg, fmr, run_id, tested)
        check_new_run_id(self.store, run_id)
        domain.check_catalogue()
        cfg = pinned_config(cfg)
        domain = shift_cells.with_shifts(domain, [])
        with self.startup.stage(STARTUP, "dataset"):
            ds = open_run_dataset(cfg)
        self._shifts = self._open_shifts(domain, cfg, ds)
        models = self._load_models(cfg, ds)
        # nothing is written before every input is known to be good
        with self.startup.stage(STARTUP, "dataset"):
            info = dataset_info(ds, cfg)
        if self._shifts:
            info = info.model_copy(update={"shifts": shift_cells.shift_fingerprints(self._shifts)})
        run_id = create_run(self.store, domain, cfg, run_id, info, self.executor.environment(models),
                            ladder_versions=ladder_versions(domain))
        store = fenced_for_this_process(self.store, run_id)  # `rm --force` stops it before deleting
        return self._evaluate(RunContext(run_id, cfg, domain, ds, store, models, self.events))

    def resume(self, run_id: str, skip_unreadable: bool = False, tested: Sequence[TestedModel] | None = None,
               endpoint: dict[str, Any] | None = None) -> str:
        """Evaluate what a stored run of any kind still lacks: after an interruption, or a queued run's first start.

        ``skip_unreadable`` lets a run that stopped at an unreadable image go on without it (its
        stored units hold none: the run stopped before scoring that image's shard). ``endpoint``:
        openai-vlm transport settings for this session (concurrency, retry_budget, ...; never stored)."""
        run = stored_run(self.store, run_id)
        if endpoint:
            run = run.model_copy(update={"config": run.config.model_copy(update=endpoint)})
        if run.fmr is not None:
            return self._fmr().resume(run, skip_unreadable, tested)
        ladders = check_ladders(run, has_units=bool(self.store.units.keys(run_id=run_id)))
        check_same_frost_texture(self.store, run)
        if run.dataset is None:  # a queued run's first start pins its dataset, as `start` does
            run = run.model_copy(update={"config": pinned_config(run.config)})
        skipping = skip_unreadable and not run.config.skip_unreadable
        if skipping:
            run = run.model_copy(update={"config": run.config.model_copy(update={"skip_unreadable": True})})
        with self.startup.stage(STARTUP, "dataset"):
            ds = open_run_dataset(run.config)
            check_same_dataset(run, ds)
        self._shifts = self._open_shifts(run.domain, run.config, ds)
        if run.dataset is not None:
            shift_cells.check_same_shifts(run_id, run.dataset.shifts, self._shifts)
        models = self._load_models(run.config, ds)
        started: dict[str, Any] = {"resumed_at": now(), **({"config": run.config} if skipping else {})}
        if run.dataset is None:  # a queued run starts here: record what `start` records
            with self.startup.stage(STARTUP, "dataset"):
                info = dataset_info(ds, run.config)
            if self._shifts:
                info = info.model_copy(update={"shifts": shift_cells.shift_fingerprints(self._shifts)})
            started = {"dataset": info, "environment": self.executor.environment(models), "config": run.config}
        restart_run(self.store, run_id, ladder_versions=ladders, **started)
        store = fenced_for_this_process(self.store, run_id)
        return self._evaluate(RunContext(run_id, run.config, run.domain, ds, store, models, self.events))

    def _fmr(self) -> FmrKind:
        from domainbench.fmr.kind import FmrKind

        return FmrKind(self.store, self.executor, self.events, self.stats)

    def _open_shifts(self, domain: DomainConfig, cfg: RunConfig, ds: Dataset) -> list[shift_cells.ShiftImages]:
        if domain.shift and not isinstance(self.executor, LocalExecutor):
            raise UserInputError("real-shift cells (--shift, [[shift]]) run on the local executor; leave out --executor ray")
        if domain.shift and cfg.adaptive:
            raise UserInputError("real-shift cells (--shift, [[shift]]) are evaluated on every image; leave out --adaptive")
        return shift_cells.open_shifts(domain, cfg, ds)

    def _load_models(self, cfg: RunConfig, ds: Dataset) -> list[ModelState]:
        if isinstance(self.executor, LocalExecutor):  # it splits the load into imports, weights and text embeddings
            return self.executor.load_models(self.store, cfg, ds, self.events, timer=self.startup)
        with self.startup.stage(STARTUP, "model load"):  # on the executor's machines: one figure
            return self.executor.load_models(self.store, cfg, ds, self.events)

    # -- the plan -----------------------------------------------------------------------
    def _evaluate(self, ctx: RunContext) -> str:
        cfg, ds = ctx.cfg, ctx.dataset
        cells = cells_of(ctx.domain)
        if cfg.adaptive:
            shards = adaptive_shards(len(ds), cfg.shard_size, cfg.seed)
            self._adaptive = adaptive_stopping(self.store, ctx, cells)
        else:
            shard_size = cfg.shard_size or auto_shard_size(ds)
            shards = [np.arange(i, min(i + shard_size, len(ds))) for i in range(0, len(ds), shard_size)]
        done = self.store.units.keys(run_id=ctx.run_id)
        shift_shard_size = cfg.shard_size or auto_shard_size(ds)
        total = len(shards) * len(cells) * len(ctx.models) + shift_cells.missing_units(ctx, self._shifts, shift_shard_size, set())
        self.events.start(total, len(done))
        tasks: list[RunTask] = []
        if cfg.stability:
            tasks.append(StabilityTask(ctx))
        if cfg.threat and ds.labelled:
            tasks.append(ThreatTask(ctx))
        elif cfg.threat:
            self.events.message("PD threat skipped: it needs labelled images (anchors of other classes)")

        self.stats.skipped_units = len(done)
        stored = self.store.get_run(ctx.run_id)
        self.timer = StageTimes(stored.timings if stored is not None else None)  # a resume adds to its sessions
        for stage, seconds in self.startup.seconds.get(STARTUP, {}).items():
            self.timer.add(STARTUP, stage, seconds)
        for ms in ctx.models:
            ms.timer = self.timer
        work = ShardWork(ctx, shards, cells, done, tasks, self.stats, self.events,
                         plan=lambda: self._plan(ctx, shards, cells, done, tasks), cancel=CancelWatch(self.store, ctx.run_id),
                         adaptive=self._adaptive, timer=self.timer)

        def compute() -> dict[str, Any]:
            self.executor.execute(work)
            # after the clean pass is stored: a paired shift's flips compare with its clean predictions
            shift_cells.score_shifts(ctx, self._shifts, shift_shard_size, work.done, on_unit=work.unit_written)
            if cfg.breaking_point:
                from domainbench.engine.breaking_point import measure_breaking_points

                ctx.store.update_run(ctx.run_id, breaking_points=measure_breaking_points(ctx, cfg.breaking_threshold))
            return {"n_unreadable": len(self.stats.unreadable), "unreadable": [p for _, p, _ in self.stats.unreadable[:100]],
                    "timings": self.timer.rounded()}

        return complete_run(ctx.store, ctx.run_id, compute, stopped=lambda: {"timings": self.timer.rounded()})

    def _plan(self, ctx: RunContext, shards: list[np.ndarray], cells: list[Cell], done: set[tuple[Any, ...]],
              tasks: list[RunTask]) -> Iterator[tuple[int, list[Job]]]:
        """Per shard, the corruption jobs still needed: one per cell, whatever the number of models."""
        run_id, models = ctx.run_id, ctx.models
        for shard in range(len(shards)):
            if self._adaptive is not None and self._adaptive.finished():
                return  # every cell settled: the remaining rounds are not needed
            jobs: dict[tuple[Any, ...], Job] = {}
            for cell in cells:
                if self._adaptive is not None and not self._adaptive.active(cell.corruption, cell.severity):
                    continue
                if cell.corruption != CLEAN and any((run_id, m.name, cell.corruption, cell.severity, shard) not in done for m in models):
                    job = cell.job(shard)
                    jobs[_job_key(job)] = job
            for task in tasks:
                for job in task.jobs(shard, cells):
                    jobs.setdefault(_job_key(job), job)  # a cell both need is corrupted once
            clean_missing = any((run_id, m.name, CLEAN, 0, shard) not in done for m in models)
            if jobs or clean_missing:
                yield shard, _in_plan_order(list(jobs.values()), cells)


def _job_key(job: Job) -> tuple[Any, ...]:
    return (job.corruption, job.severity, job.grid_point, job.n_images)


def _in_plan_order(jobs: list[Job], cells: list[Cell]) -> list[Job]:
    """Cells in the plan's order, then stability grid points: the order jobs ran in before tasks."""
    rank = {(c.corruption, c.severity): i for i, c in enumerate(cells)}
    return sorted(jobs, key=lambda j: (j.stability, rank.get((j.corruption, j.severity), 0)))

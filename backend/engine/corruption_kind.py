"""The corruption run kind: every model on every (corruption, severity) cell of the plan, shard by shard.

What is this kind's own (``engine.kinds.RunKind``): the plan's cells (``tasks.cells_of``) and their
severity-ladder versions (a resume across a recalibration is refused), the frost texture, the
user's real-shift folders (``shift_cells``), ``--adaptive`` stopping, the stability and PD-threat
tasks per shard, and the breaking points. One unit of work is (run, model, corruption, severity,
shard). Its units run in this process (``CellsLocal``, below) or on Ray actors
(``engine.ray_executor.CellsOnRay``); start, resume, pinning and the run record are the engine's.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import Any

import numpy as np

from domainbench import corruptions
from domainbench.records.config import DomainConfig
from domainbench.data import Batch, Dataset
from domainbench.engine import shift_cells
from domainbench.engine.adaptive import AdaptiveStopping, adaptive_shards, adaptive_stopping
from domainbench.engine.cancel import CancelWatch
from domainbench.engine.frost_pin import check_same_frost_texture
from domainbench.engine.input_pipeline import InputPipeline
from domainbench.engine.jobs import CLEAN, Job
from domainbench.engine.kinds import ExecutorPart, KindCapabilities, RunSession, register_kind
from domainbench.engine.lifecycle import complete_run
from domainbench.engine.local_executor import LocalExecutor, local_environment, models_device, submit_job
from domainbench.engine.reports import build_report
from domainbench.engine.tasks import Cell, RunContext, RunTask, StabilityTask, ThreatTask, cells_of
from domainbench.engine.resources import PeakMemory
from domainbench.engine.resources import record as record_resources
from domainbench.engine.timings import STARTUP, StageTimes
from domainbench.engine.work import ShardWork
from domainbench.errors import UserInputError
from domainbench.records.report import RunReport
from domainbench.store import Store
from domainbench.store.fenced_store import fenced_for_this_process
from domainbench.store.records import DatasetInfo, RunRecord

__all__ = ["CellsLocal", "CorruptionKind", "auto_shard_size", "cells_of", "check_ladders", "ladder_versions"]


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


class CorruptionKind:
    """Corruption cells: the default kind (a run record without another kind's settings is one)."""

    name = "corruption"
    #: shift cells and --adaptive run on both executors (the Ray part scores shifts on its actors and
    #: stops adaptively between rounds)
    capabilities = KindCapabilities(executors=("local", "ray"))

    def claims(self, run: RunRecord) -> bool:
        return True  # the fallback: ``kinds.kind_of`` asks the other kinds first

    def settings_of(self, run: RunRecord) -> Any:
        return None

    def record_fields(self, session: RunSession) -> dict[str, Any]:
        return {"ladder_versions": ladder_versions(session.domain)}

    def check(self, session: RunSession) -> None:
        from domainbench.engine.clip_kind import left_out_note, still_image_plan

        session.domain.check_catalogue()
        # the Python API's and the UI's runs too, not only the CLI's; the stored plan is what was evaluated
        session.domain, temporal = still_image_plan(session.domain)
        if temporal:
            session.events.message(left_out_note(temporal))
        session.domain = shift_cells.with_shifts(session.domain, [])  # shift paths absolute, as the run stores them

    def check_resume(self, session: RunSession) -> dict[str, Any]:
        from domainbench.engine.clip_kind import refuse_temporal_on_images

        run = session.run
        assert run is not None
        refuse_temporal_on_images(run.domain)  # a queued run (the UI's launch) reaches the engine here, not in check
        ladders = check_ladders(run, has_units=bool(session.store.units.keys(run_id=run.run_id)))
        check_same_frost_texture(session.store, run)
        return {"ladder_versions": ladders}

    def open(self, session: RunSession) -> None:
        domain, cfg = session.domain, session.cfg
        if domain.shift and cfg.adaptive:
            raise UserInputError("real-shift cells (--shift, [[shift]]) are evaluated on every image; leave out --adaptive")
        shifts = shift_cells.open_shifts(domain, cfg, session.ds)
        run = session.run
        if run is not None and run.dataset is not None:
            shift_cells.check_same_shifts(run.run_id, run.dataset.shifts, shifts)
        session.state["shifts"] = shifts

    def dataset_info(self, session: RunSession, info: DatasetInfo) -> DatasetInfo:
        shifts = session.state.get("shifts") or []
        if shifts:
            info = info.model_copy(update={"shifts": shift_cells.shift_fingerprints(shifts)})
        return info

    def part(self, executor: str) -> ExecutorPart:
        if executor == "local":
            return CellsLocal()
        from domainbench.engine.ray_executor import CellsOnRay  # imports ray: only for --executor ray

        return CellsOnRay()

    def report(self, store: Store, run_id: str) -> RunReport:
        return build_report(store, run_id)

    # -- the plan -----------------------------------------------------------------------
    def evaluate(self, session: RunSession) -> str:
        cfg, ds, events, stats = session.cfg, session.ds, session.events, session.stats
        store = fenced_for_this_process(session.store, session.run_id)  # `rm --force` stops it before deleting
        ctx = RunContext(session.run_id, cfg, session.domain, ds, store, session.models, events)
        shifts: list[shift_cells.ShiftImages] = session.state.get("shifts") or []
        cells = cells_of(ctx.domain)
        adaptive: AdaptiveStopping | None = None
        if cfg.adaptive:
            shards = adaptive_shards(len(ds), cfg.shard_size, cfg.seed)
            adaptive = adaptive_stopping(session.store, ctx, cells)
        else:
            shard_size = cfg.shard_size or auto_shard_size(ds)
            shards = [np.arange(i, min(i + shard_size, len(ds))) for i in range(0, len(ds), shard_size)]
        done = session.store.units.keys(run_id=ctx.run_id)
        shift_shard_size = cfg.shard_size or auto_shard_size(ds)
        total = len(shards) * len(cells) * len(ctx.models) + shift_cells.missing_units(ctx, shifts, shift_shard_size, set())
        events.start(total, len(done))
        tasks: list[RunTask] = []
        if cfg.stability:
            tasks.append(StabilityTask(ctx))
        if cfg.threat and ds.labelled:
            tasks.append(ThreatTask(ctx))
        elif cfg.threat:
            events.message("PD threat skipped: it needs labelled images (anchors of other classes)")

        stats.skipped_units = len(done)
        stored = session.store.get_run(ctx.run_id)
        timer = session.timer = StageTimes(stored.timings if stored is not None else None)  # a resume adds to its sessions
        for stage, seconds in session.startup.seconds.get(STARTUP, {}).items():
            timer.add(STARTUP, stage, seconds)
        meter = PeakMemory()
        for ms in ctx.models:
            ms.timer, ms.meter = timer, meter

        def timings() -> dict[str, dict[str, float]]:
            record_resources(timer.seconds, ctx.models, meter)
            return timer.rounded()
        work = ShardWork(ctx, shards, cells, done, tasks, stats, events,
                         plan=lambda: _plan(ctx, shards, cells, done, tasks, adaptive),
                         cancel=CancelWatch(session.store, ctx.run_id), adaptive=adaptive, timer=timer,
                         shifts=shifts, shift_shard_size=shift_shard_size)
        part = self.part(session.executor.name)

        def compute() -> dict[str, Any]:
            part.execute(session, work)  # the cells, then the shifts (paired ones compare with the stored clean pass)
            if cfg.breaking_point:
                from domainbench.engine.breaking_point import measure_breaking_points

                ctx.store.update_run(ctx.run_id, breaking_points=measure_breaking_points(ctx, cfg.breaking_threshold))
            return {"n_unreadable": len(stats.unreadable), "unreadable": [p for _, p, _ in stats.unreadable[:100]],
                    "timings": timings()}

        return complete_run(ctx.store, ctx.run_id, compute, stopped=lambda: {"timings": timings()}, report=self.report)


def _plan(ctx: RunContext, shards: list[np.ndarray], cells: list[Cell], done: set[tuple[Any, ...]], tasks: list[RunTask],
          adaptive: AdaptiveStopping | None) -> Iterator[tuple[int, list[Job]]]:
    """Per shard, the corruption jobs still needed: one per cell, whatever the number of models."""
    run_id, models = ctx.run_id, ctx.models
    for shard in range(len(shards)):
        if adaptive is not None and adaptive.finished():
            return  # every cell settled: the remaining rounds are not needed
        jobs: dict[tuple[Any, ...], Job] = {}
        for cell in cells:
            if adaptive is not None and not adaptive.active(cell.corruption, cell.severity):
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


class CellsLocal:
    """The corruption kind on the local executor: models in this process, one shard of look-ahead: while the
    models score shard k, the pool corrupts shard k+1 and decodes shard k+2's files."""

    def load(self, session: RunSession) -> Any:
        executor = session.executor
        assert isinstance(executor, LocalExecutor)
        # the local executor splits the load into imports, weights and text embeddings
        return executor.load_models(session.store, session.cfg, session.ds, session.events, timer=session.startup)

    def environment(self, session: RunSession) -> dict[str, Any]:
        return local_environment(session.models)

    def execute(self, session: RunSession, work: ShardWork) -> None:
        cfg = work.ctx.cfg
        # corrupting on the device is this executor's choice: here the models run in this process
        device = models_device(work.ctx.models)
        # one pool decodes and corrupts
        with InputPipeline.for_models(work.ctx.dataset, cfg.workers, device, corrupts=True) as inputs:
            pending: deque[tuple[int, Batch, list[tuple[Job, Any]]]] = deque()
            for shard, todo, batch in inputs.batches(work.plan(), work.shards, work.report_unreadable, work.timer):
                jobs = [(job, submit_job(inputs, job, batch, cfg.seed, cfg.corrupt_on, device, work.stats)) for job in todo]
                pending.append((shard, batch, jobs))
                if len(pending) >= 2:
                    work.consume(*pending.popleft())
            while pending:
                work.consume(*pending.popleft())
        # after the clean pass is stored: a paired shift's flips compare with its clean predictions
        shift_cells.score_shifts(work.ctx, work.shifts, work.shift_shard_size, work.done, on_unit=work.unit_written)


register_kind(CorruptionKind())

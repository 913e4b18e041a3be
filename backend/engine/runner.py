"""The evaluation engine: corrupt once per (corruption, severity), feed every model.

One unit of work is (run, model, corruption, severity, shard). Units are upserted as soon as
they finish, so a killed run loses at most the units in flight and ``resume`` recomputes
nothing that is stored. Per unit we store sufficient statistics (confusion matrix, flip
count, n, per-image predictions), never only final numbers: metrics are derived later, and
the baseline model can change after the run.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import platform
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import numpy as np
import torch

from domainbench import corruptions
from domainbench.config import DomainConfig, RunConfig
from domainbench.data import Batch, Dataset, open_dataset
from domainbench.engine.adaptive import AdaptiveStopping, adaptive_shards, adaptive_stopping
from domainbench.engine.cancel import CancelWatch, RunCancelled
from domainbench.engine.dataset_pin import check_same_dataset, dataset_info, pinned_config
from domainbench.engine.device_corruption import corruption_site, run_device_job
from domainbench.engine.jobs import CLEAN, Corrupted, Job, init_worker, run_job
from domainbench.engine.reports import build_report
from domainbench.engine.scoring import ModelState, load_models
from domainbench.engine.shards import score_shard
from domainbench.engine.timings import RUN, StageTimes
from domainbench.engine.tasks import Cell, RunContext, RunEvents, RunTask, SilentEvents, StabilityTask, ThreatTask
from domainbench.errors import UserInputError
from domainbench.models.generative import VLMOptions
from domainbench.models.label_sets import check_unique, resolve_classes
from domainbench.store import Store
from domainbench.store.records import RunRecord


@dataclass
class RunStats:
    computed_units: int = 0
    skipped_units: int = 0
    corruption_calls: int = 0  # images passed through a corruption kernel
    unreadable: list[tuple[int, str, str]] = field(default_factory=list)


def new_run_id(domain: str) -> str:
    slug = "".join(ch if ch.isalnum() else "-" for ch in domain.lower())[:24].strip("-") or "run"
    while "--" in slug:
        slug = slug.replace("--", "-")
    return f"{datetime.now(timezone.utc):%Y%m%d-%H%M%S}-{slug}-{uuid.uuid4().hex[:4]}"


def cells_of(domain: DomainConfig) -> list[Cell]:
    cells = [Cell(CLEAN, 0, None)]
    for c in domain.corruptions:
        for s in c.severities:
            # explicit params override the ladder's values at every listed severity
            ladder = corruptions.resolve_params(c.name, severity=s)
            params = {**ladder, **c.params} if c.params else None
            cells.append(Cell(c.name, s, params, params or ladder))
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


def auto_workers() -> int:
    # on two cores the model forward pass already uses both; extra processes only contend
    return max(0, min(8, (os.cpu_count() or 1) - 2))


class _InlineFuture:
    """Runs the job when its result is asked for: no process, and no corrupted shard held early."""

    def __init__(self, fn: Callable[[], Corrupted]) -> None:
        self._fn = fn

    def result(self) -> Corrupted:
        return self._fn()


def open_run_dataset(cfg: RunConfig) -> Dataset:
    ds = open_dataset(cfg.dataset, classes=resolve_classes(cfg.classes), image_size=cfg.image_size).subset(cfg.limit)
    check_unique(ds.classes, f"dataset {cfg.dataset}")
    if len(ds.classes) < 2:
        raise UserInputError(
            f"dataset {cfg.dataset} has a single class {ds.classes}: zero-shot accuracy would be 1 by construction; "
            "give at least two classes (--classes a,b for candidate names)"
        )
    return ds


class Engine:
    def __init__(self, store: Store, events: RunEvents | None = None) -> None:
        self.store = store
        self.events: RunEvents = events or SilentEvents()
        self.stats = RunStats()
        self.timer = StageTimes()
        # --corrupt-on and the models' device, set per run by _evaluate; _submit picks each job's site
        self._corrupt_on = "cpu"
        self._model_device = torch.device("cpu")
        self._adaptive: AdaptiveStopping | None = None  # set for a run made with --adaptive

    # -- public entry points ----------------------------------------------------------
    def start(self, domain: DomainConfig, cfg: RunConfig, run_id: str | None = None) -> str:
        """Validate everything, then create the run and evaluate it. Returns the run id.

        ``run_id`` lets a caller that launches the run in the background (the UI) know its
        id up front; by default one is made from the time and the domain text.
        """
        if run_id is not None and (not run_id.strip() or self.store.get_run(run_id) is not None):
            raise UserInputError(f"run id {run_id!r} is empty or already used; choose another or resume it with --resume")
        domain.check_catalogue()
        cfg = pinned_config(cfg)
        ds = open_run_dataset(cfg)
        models = self._load_models(cfg, ds)
        # nothing is written before every input is known to be good
        run_id = run_id or new_run_id(domain.domain)
        did = self.store.domains.save(domain, created_at=_now())
        self.store.put_run(
            RunRecord(
                run_id=run_id,
                domain_id=did,
                domain=domain,
                config=cfg,
                status="running",
                pid=os.getpid(),
                host=platform.node(),
                created_at=_now(),
                dataset=dataset_info(ds, cfg),
                environment=self._environment(models),
                ladder_versions=ladder_versions(domain),
            )
        )
        return self._evaluate(RunContext(run_id, cfg, domain, ds, self.store, models, self.events))

    def resume(self, run_id: str) -> str:
        """Evaluate what a stored run still lacks: after an interruption, or a queued run's first start."""
        run = self.store.get_run(run_id)
        if run is None:
            known = [r.run_id for r in self.store.list_runs()[:5]]
            raise UserInputError(f"no run {run_id!r} in {self.store.description}; recent runs: {known or 'none'} (see `domainbench ls`)")
        if run.fmr is not None:
            raise UserInputError(f"run {run_id} is an FMR run; resume it with `domainbench fmr --resume {run_id}`")
        ladders = check_ladders(run, has_units=bool(self.store.units.keys(run_id=run_id)))
        if run.dataset is None:  # a queued run's first start pins its dataset, as `start` does
            run = run.model_copy(update={"config": pinned_config(run.config)})
        ds = open_run_dataset(run.config)
        check_same_dataset(run, ds)
        models = self._load_models(run.config, ds)
        started: dict[str, Any] = {"resumed_at": _now()}
        if run.dataset is None:  # a queued run starts here: record what `start` records
            started = {"dataset": dataset_info(ds, run.config), "environment": _environment(models),
                       "config": run.config}
        self.store.update_run(run_id, status="running", pid=os.getpid(), host=platform.node(), ladder_versions=ladders,
                              **started)
        self.store.reports.delete(run_id=run_id)  # a report is only ever of a finished run
        return self._evaluate(RunContext(run_id, run.config, run.domain, ds, self.store, models, self.events))

    def _load_models(self, cfg: RunConfig, ds: Dataset) -> list[ModelState]:
        return load_models(cfg.models, ds.classes, cfg.device, cfg.batch_size, cfg.templates, say=self.events.message,
                           vlm=VLMOptions.from_run_config(cfg), cache=self.store)

    def _environment(self, models: list[ModelState]) -> dict[str, Any]:
        return _environment(models)

    # -- the loop ---------------------------------------------------------------------
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
        total = len(shards) * len(cells) * len(ctx.models)
        self.events.start(total, len(done))
        tasks: list[RunTask] = []
        if cfg.stability:
            tasks.append(StabilityTask(ctx))
        if cfg.threat and ds.labelled:
            tasks.append(ThreatTask(ctx))
        elif cfg.threat:
            self.events.message("PD threat skipped: it needs labelled images (anchors of other classes)")

        self.stats.skipped_units = len(done)
        self._cancel = CancelWatch(self.store, ctx.run_id)
        stored = self.store.get_run(ctx.run_id)
        self.timer = StageTimes(stored.timings if stored is not None else None)  # a resume adds to its sessions
        for ms in ctx.models:
            ms.timer = self.timer
        try:
            self._execute(ctx, shards, cells, done, tasks)
        except RunCancelled:
            self.store.update_run(ctx.run_id, timings=self.timer.rounded())
            raise  # the run stays "cancelled", its finished units kept
        except BaseException as e:
            self.store.update_run(ctx.run_id, status="interrupted" if isinstance(e, KeyboardInterrupt) else "failed",
                                  error=f"{type(e).__name__}: {e}"[:500], timings=self.timer.rounded())
            raise

        if cfg.breaking_point:
            from domainbench.engine.breaking_point import measure_breaking_points

            self.store.update_run(ctx.run_id, breaking_points=measure_breaking_points(ctx, cfg.breaking_threshold))
        self.store.put_report(build_report(self.store, ctx.run_id))
        self.store.update_run(
            ctx.run_id,
            status="done",
            finished_at=_now(),
            n_unreadable=len(self.stats.unreadable),
            unreadable=[p for _, p, _ in self.stats.unreadable[:100]],
            timings=self.timer.rounded(),
        )
        return ctx.run_id

    def _execute(self, ctx: RunContext, shards: list[np.ndarray], cells: list[Cell], done: set[tuple[Any, ...]],
                 tasks: list[RunTask]) -> None:
        """The local executor: corruption in a process pool (or inline), models in this process."""
        cfg, ds = ctx.cfg, ctx.dataset
        # corrupting on the device is the local executor's choice: here the models run in this process
        self._corrupt_on = cfg.corrupt_on
        self._model_device = ctx.models[0].model.device if ctx.models else torch.device("cpu")
        workers = auto_workers() if cfg.workers is None else cfg.workers
        # spawn, not fork: forking a process whose torch/OpenMP threads are running can deadlock
        pool = ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn"), initializer=init_worker) if workers > 0 else None
        # decoding files (PIL releases the GIL) runs on a thread one shard ahead of the corruption jobs
        loader = ThreadPoolExecutor(1, thread_name_prefix="domainbench-load")
        try:
            pending: deque[tuple[int, Batch, list[tuple[Job, Any]]]] = deque()
            # one shard of look-ahead: workers corrupt shard k+1 while models score shard k
            for shard, todo, loaded in _loaded_ahead(self._plan(ctx, shards, cells, done, tasks), shards, ds, loader):
                with self.timer.stage(RUN, "decode"):
                    loaded_batch = loaded.result()
                batch = self._report_unreadable(loaded_batch)
                jobs = [(job, self._submit(pool, job, batch, cfg.seed)) for job in todo]
                pending.append((shard, batch, jobs))
                if len(pending) >= 2:
                    self._consume(ctx, cells, done, tasks, *pending.popleft())
            while pending:
                self._consume(ctx, cells, done, tasks, *pending.popleft())
        finally:
            loader.shutdown(cancel_futures=True)
            if pool is not None:
                pool.shutdown(cancel_futures=True)

    def _load_batch(self, ds: Dataset, indices: np.ndarray) -> Batch:
        return self._report_unreadable(ds.load(indices))

    def _report_unreadable(self, batch: Batch) -> Batch:
        if batch.unreadable:
            for idx, path, why in batch.unreadable:
                self.events.message(f"unreadable image skipped: {path} ({why})")
            self.stats.unreadable += batch.unreadable
        return batch

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

    def _submit(self, pool: ProcessPoolExecutor | None, job: Job, batch: Batch, seed: int) -> Future | _InlineFuture:
        self.stats.corruption_calls += len(batch.images[: job.n_images])
        if corruption_site(self._corrupt_on, self._model_device, job.corruption) == "device":
            # runs when the shard is consumed, on the models' device: no worker, no pickled shard
            return _InlineFuture(lambda: run_device_job(job, batch.images, batch.indices, seed, self._model_device))
        if pool is None:
            return _InlineFuture(lambda: run_job(job, batch.images, batch.indices, seed))
        return pool.submit(run_job, job, batch.images, batch.indices, seed)

    def _consume(self, ctx: RunContext, cells: list[Cell], done: set[tuple[Any, ...]], tasks: list[RunTask],
                 shard: int, batch: Batch, jobs: list[tuple[Job, Any]]) -> None:
        if self._adaptive is not None:
            # the plan runs a round or two ahead: cells that stopped since are not scored
            if self._adaptive.finished():
                return
            jobs = [(j, f) for j, f in jobs if j.stability or self._adaptive.active(j.corruption, j.severity)]
        score_shard(ctx, cells, done, tasks, shard, batch, jobs, on_unit=self._unit_written)
        if self._adaptive is not None:
            self._adaptive.observe(self.store.units(ctx.run_id, shard=shard))

    def _unit_written(self, n_images: int) -> None:
        self.stats.computed_units += 1
        self.events.advance(1, n_images)
        self._cancel.check()


def _loaded_ahead(plan: Iterator[tuple[int, list[Job]]], shards: list[np.ndarray], ds: Dataset,
                  loader: ThreadPoolExecutor) -> Iterator[tuple[int, list[Job], Future[Batch]]]:
    """The plan's shards with their batches loading on ``loader``, the next one already started
    when one is handed out: decoding shard k+1 overlaps the work done with shard k (scoring k-1)."""
    ahead: deque[tuple[int, list[Job], Future[Batch]]] = deque()
    for shard, todo in plan:
        ahead.append((shard, todo, loader.submit(ds.load, shards[shard])))
        if len(ahead) == 2:
            yield ahead.popleft()
    yield from ahead


def _job_key(job: Job) -> tuple[Any, ...]:
    return (job.corruption, job.severity, job.grid_point, job.n_images)


def _in_plan_order(jobs: list[Job], cells: list[Cell]) -> list[Job]:
    """Cells in the plan's order, then stability grid points: the order jobs ran in before tasks."""
    rank = {(c.corruption, c.severity): i for i, c in enumerate(cells)}
    return sorted(jobs, key=lambda j: (j.stability, rank.get((j.corruption, j.severity), 0)))


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _environment(models: list[ModelState]) -> dict[str, Any]:
    dev = models[0].model.device if models else torch.device("cpu")
    return {
        "device": str(dev),
        "gpu": torch.cuda.get_device_name(dev) if dev.type == "cuda" else None,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "host_cpus": os.cpu_count(),
    }

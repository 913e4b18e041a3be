"""The protocol of what executes a run, and a corruption run's remaining work as its kind planned it.

The engine (``domainbench.engine.runner.Engine``) owns a run of any kind from start to report; the
run's kind (``engine.kinds``) plans its shards and units and hands the work to its part for the
run's ``Executor``, which only decides where models are loaded and where each shard is corrupted,
searched and scored: in this process (``LocalExecutor``) or on a Ray cluster (``RayExecutor``). A
corruption run's work is a ``ShardWork`` (scored by ``score_shard``), an FMR run's an ``FmrWork``
(``fmr.units``, searched by ``fmr_unit``); both executors run the same unit code, so they store
identical records.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from domainbench.data import Batch
from domainbench.data.readable import unreadable_error
from domainbench.engine.adaptive import AdaptiveStopping
from domainbench.engine.cancel import CancelWatch
from domainbench.engine.jobs import Job
from domainbench.engine.shards import score_shard
from domainbench.engine.tasks import Cell, RunContext, RunEvents, RunStats, RunTask
from domainbench.engine.timings import StageTimes


@dataclass
class ShardWork:
    """What an executor computes: the shards of one run, the cells and tasks still missing from the store."""

    ctx: RunContext
    shards: list[np.ndarray]
    cells: list[Cell]
    #: unit keys already stored (grows as units are written)
    done: set[tuple[Any, ...]]
    tasks: list[RunTask]
    stats: RunStats
    events: RunEvents
    #: per shard, the corruption jobs still needed (the engine's plan)
    plan: Callable[[], Iterator[tuple[int, list[Job]]]]
    #: the user's Cancel, looked at between units (``check`` raises ``RunCancelled``)
    cancel: CancelWatch
    #: a run made with --adaptive: cells stop once their intervals are narrow enough
    adaptive: AdaptiveStopping | None = None
    #: seconds per stage (decoding and corrupting here, each model's stages on the models)
    timer: StageTimes = field(default_factory=StageTimes)
    #: the run's real-shift folders, opened (``shift_cells``): scored after the cells, in shards of ``shift_shard_size``
    shifts: list[Any] = field(default_factory=list)
    shift_shard_size: int = 0

    def report_unreadable(self, batch: Batch) -> Batch:
        """``batch`` (a shard from the input pipeline), its unreadable files counted and reported;
        without --skip-unreadable the first one stops the run (the dataset's scan missed it) before
        its shard is scored."""
        if batch.unreadable and not self.ctx.cfg.skip_unreadable:
            _, path, why = batch.unreadable[0]
            raise unreadable_error(path, why, len(batch.unreadable) - 1, run_id=self.ctx.run_id)
        if batch.unreadable:
            for _idx, path, why in batch.unreadable:
                self.events.message(f"unreadable image skipped: {path} ({why})")
            self.stats.unreadable += batch.unreadable
        return batch

    def consume(self, shard: int, batch: Batch, jobs: list[tuple[Job, Any]]) -> None:
        """Score one shard in this process with its corrupted batches (futures with ``result()``)."""
        if self.adaptive is not None:
            # the plan runs a round or two ahead: cells that stopped since are not scored
            if self.adaptive.finished():
                return
            jobs = [(j, f) for j, f in jobs if j.stability or self.adaptive.active(j.corruption, j.severity)]
        score_shard(self.ctx, self.cells, self.done, self.tasks, shard, batch, jobs, on_unit=self.unit_written)
        if self.adaptive is not None:
            self.adaptive.observe(self.ctx.store.units(self.ctx.run_id, shard=shard))

    def unit_written(self, n_images: int) -> None:
        self.stats.computed_units += 1
        self.events.advance(1, n_images)
        self.cancel.check()


class Executor(Protocol):
    """Where a run's models live and its units are computed: this process (``LocalExecutor``) or a Ray cluster
    (``RayExecutor``). An executor knows no run kind: it offers its services (loading models, an input
    pipeline, actors, corruption tasks) and each kind's ``ExecutorPart`` for it (``engine.kinds``) uses them."""

    #: ``local`` or ``ray``: what ``--executor`` says and a kind's capabilities name
    name: str

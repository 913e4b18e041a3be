"""A run's remaining work as the engine planned it, and the protocol of what executes it.

The engine (``domainbench.engine.runner.Engine``) owns a run of any kind from start to report:
it plans the shards and units, and hands the work to an ``Executor``, which only decides where
models are loaded and where each shard is corrupted, searched and scored: in this process
(``LocalExecutor``) or on a Ray cluster (``RayExecutor``). A corruption run's work is a
``ShardWork`` (scored by ``score_shard``), an FMR run's an ``FmrWork`` (searched by
``fmr_unit``); both executors run the same unit code, so they store identical records.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from domainbench.config import FmrSettings, RunConfig
from domainbench.data import Batch, Dataset
from domainbench.data.readable import unreadable_error
from domainbench.engine.adaptive import AdaptiveStopping
from domainbench.engine.cancel import CancelWatch
from domainbench.engine.jobs import Job
from domainbench.engine.scoring import ModelState
from domainbench.engine.shards import score_shard
from domainbench.engine.tasks import Cell, RunContext, RunEvents, RunStats, RunTask
from domainbench.engine.timings import StageTimes
from domainbench.fmr.tested import TestedModel
from domainbench.fmr.units import FmrModels, FmrWork
from domainbench.store import Store


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
    """Where a run's models live and its shards are corrupted and scored."""

    def load_models(self, store: Store, cfg: RunConfig, ds: Dataset, events: RunEvents) -> list[ModelState]:
        """Load the run's models where they will score (nothing is stored yet)."""

    def environment(self, models: list[ModelState]) -> dict[str, Any]:
        """What the run record keeps of where it ran (device, versions, executor)."""

    def execute(self, work: ShardWork) -> None:
        """Compute every unit of ``work`` and store it by key as it finishes."""

    def load_fmr(self, store: Store, cfg: RunConfig, settings: FmrSettings, ds: Dataset, events: RunEvents,
                 tested: Sequence[TestedModel] | None) -> FmrModels:
        """Load an FMR run's oracle and tested models where they will search, checked (nothing is stored yet);
        ``tested``: ready-made tested models instead of ``cfg.models``."""

    def fmr_environment(self, models: FmrModels) -> dict[str, Any]:
        """What an FMR run's record keeps of where it ran."""

    def execute_fmr(self, work: FmrWork) -> None:
        """Compute every missing (tested model, shard) unit of ``work``, the oracle scoring each shard once."""

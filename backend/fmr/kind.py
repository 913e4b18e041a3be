"""The FMR run kind: what the engine does differently for a run made with FMR settings.

The lifecycle is the engine's (``engine.lifecycle``: created or queued, restarted, completed
with its report); this module only says what an FMR run checks before it is created, how its
units are planned ((tested model, shard), ``fmr.units``) and which executor method computes
them (``Executor.load_fmr`` / ``execute_fmr``). The engine reaches it from ``Engine.start``
with ``fmr=`` settings and from ``Engine.resume`` of a run whose record holds them, so the
CLI, the worker, the UI's launch and the Ray executor run FMR exactly as they run the rest.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from domainbench.config import DomainConfig, FmrSettings, RunConfig
from domainbench.data import Dataset
from domainbench.engine.cancel import CancelWatch
from domainbench.engine.dataset_pin import check_same_dataset, dataset_info, open_run_dataset, pinned_config
from domainbench.engine.lifecycle import check_new_run_id, complete_run, create_run, now, restart_run
from domainbench.engine.tasks import RunEvents, RunStats
from domainbench.engine.work import Executor
from domainbench.fmr.oracle import check_oracle_names
from domainbench.fmr.tested import TestedModel
from domainbench.fmr.units import FmrModels, FmrWork, auto_shard_size, check_fmr_inputs
from domainbench.store import Store
from domainbench.store.fenced_store import fenced_for_this_process
from domainbench.store.records import RunRecord


class FmrKind:
    """Starts and resumes FMR runs for an engine: its store, executor, events and stats."""

    def __init__(self, store: Store, executor: Executor, events: RunEvents, stats: RunStats) -> None:
        self.store, self.executor, self.events, self.stats = store, executor, events, stats

    def start(self, domain: DomainConfig, cfg: RunConfig, settings: FmrSettings, run_id: str | None = None,
              tested: Sequence[TestedModel] | None = None) -> str:
        check_new_run_id(self.store, run_id)
        check_oracle_names(settings.oracle)
        domain.check_catalogue()
        cfg = pinned_config(cfg)
        ds = open_run_dataset(cfg)
        check_fmr_inputs(domain, cfg, settings, ds)
        models = self.executor.load_fmr(self.store, cfg, settings, ds, self.events, tested)
        # nothing is written before every input is known to be good
        run_id = create_run(self.store, domain, cfg, run_id, dataset_info(ds, cfg), self.executor.fmr_environment(models),
                            fmr=settings)
        return self._evaluate(run_id, domain, cfg, settings, ds, models)

    def resume(self, run: RunRecord, skip_unreadable: bool = False, tested: Sequence[TestedModel] | None = None) -> str:
        """What a stored FMR run still lacks: after an interruption, or a queued run's first start
        (``skip_unreadable``: go on past an image file that does not decode, as ``Engine.resume``)."""
        assert run.fmr is not None
        cfg = run.config if run.dataset is not None else pinned_config(run.config)
        skipping = skip_unreadable and not cfg.skip_unreadable
        if skipping:
            cfg = cfg.model_copy(update={"skip_unreadable": True})
        ds = open_run_dataset(cfg)
        check_fmr_inputs(run.domain, cfg, run.fmr, ds)
        check_same_dataset(run, ds)
        models = self.executor.load_fmr(self.store, cfg, run.fmr, ds, self.events, tested)
        started: dict[str, Any] = {"resumed_at": now(), **({"config": cfg} if skipping else {})}
        if run.dataset is None:  # a queued run starts here: record what `start` records
            started = {"dataset": dataset_info(ds, cfg), "environment": self.executor.fmr_environment(models), "config": cfg}
        restart_run(self.store, run.run_id, **started)
        return self._evaluate(run.run_id, run.domain, cfg, run.fmr, ds, models)

    def _evaluate(self, run_id: str, domain: DomainConfig, cfg: RunConfig, settings: FmrSettings, ds: Dataset,
                  models: FmrModels) -> str:
        size = settings.shard_size or auto_shard_size(ds)
        shards = [np.arange(i, min(i + size, len(ds))) for i in range(0, len(ds), size)]
        store = fenced_for_this_process(self.store, run_id)  # `rm --force` stops it before deleting
        done = self.store.fmr.keys(run_id=run_id)
        self.stats.skipped_units = len(done)
        self.events.start(len(shards) * len(models.names), len(done))
        work = FmrWork(run_id, cfg, domain, settings, ds, store, models, shards, done, self.stats, self.events,
                       CancelWatch(self.store, run_id))

        def compute() -> dict[str, Any]:
            self.executor.execute_fmr(work)
            return {}

        return complete_run(store, run_id, compute)

"""The FMR run kind (``engine.kinds.RunKind``): what an FMR run is, for the engine's one lifecycle.

A run whose record holds FMR settings (``RunRecord.fmr``) is this kind's. The kind says what an FMR
run checks before it is created (the oracle's names, the search's needs of the plan and the dataset),
how its units are planned ((tested model, shard), ``fmr.units``), how they load and run on each
executor (``FmrLocal`` below, ``fmr.ray_units.FmrOnRay``) and its report. Start, resume, pinning,
the queue and the worker are the engine's: ``Engine.start(..., fmr=settings)`` (or
``kind="fmr"``), and ``Engine.resume`` of a run whose record holds the settings.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from domainbench.engine.cancel import CancelWatch
from domainbench.engine.input_pipeline import InputPipeline
from domainbench.engine.kinds import ExecutorPart, KindCapabilities, Refusal, RunSession, register_kind
from domainbench.engine.lifecycle import complete_run
from domainbench.engine.local_executor import local_environment, models_device
from domainbench.engine.reports import build_report
from domainbench.fmr.oracle import check_oracle_names
from domainbench.fmr.units import FmrModels, FmrWork, auto_shard_size, check_fmr_inputs, load_fmr_models, score_fmr_shards
from domainbench.records.report import RunReport
from domainbench.store import Store
from domainbench.store.fenced_store import fenced_for_this_process
from domainbench.store.records import DatasetInfo, RunRecord

#: ready-made tested model objects live in the caller's process: Ray's actors cannot be handed them
READY_MADE = Refusal("tested=", lambda s: s.args.get("tested") is not None,
                     "ready-made tested models run on the local executor only; name them in the run config "
                     "(py:MODULE:ATTR, torchvision:CONFIG.json) for --executor ray")


class FmrKind:
    name = "fmr"
    capabilities = KindCapabilities(executors=("local", "ray"), refuses={"ray": (READY_MADE,)})

    def claims(self, run: RunRecord) -> bool:
        return run.fmr is not None

    def settings_of(self, run: RunRecord) -> Any:
        return run.fmr

    def record_fields(self, session: RunSession) -> dict[str, Any]:
        return {"fmr": session.settings}

    def check(self, session: RunSession) -> None:
        check_oracle_names(session.settings.oracle)
        session.domain.check_catalogue()

    def check_resume(self, session: RunSession) -> dict[str, Any]:
        return {}

    def open(self, session: RunSession) -> None:
        check_fmr_inputs(session.domain, session.cfg, session.settings, session.ds)

    def dataset_info(self, session: RunSession, info: DatasetInfo) -> DatasetInfo:
        return info

    def part(self, executor: str) -> ExecutorPart:
        if executor == "local":
            return FmrLocal()
        from domainbench.fmr.ray_units import FmrOnRay  # imports ray: only for --executor ray

        return FmrOnRay()

    def report(self, store: Store, run_id: str) -> RunReport:
        return build_report(store, run_id)

    def evaluate(self, session: RunSession) -> str:
        run_id, settings, ds = session.run_id, session.settings, session.ds
        size = settings.shard_size or auto_shard_size(ds)
        shards = [np.arange(i, min(i + size, len(ds))) for i in range(0, len(ds), size)]
        store = fenced_for_this_process(session.store, run_id)  # `rm --force` stops it before deleting
        done = session.store.fmr.keys(run_id=run_id)
        session.stats.skipped_units = len(done)
        models: FmrModels = session.models
        session.events.start(len(shards) * len(models.names), len(done))
        work = FmrWork(run_id, session.cfg, session.domain, settings, ds, store, models, shards, done, session.stats,
                       session.events, CancelWatch(session.store, run_id))
        part = self.part(session.executor.name)

        def compute() -> dict[str, Any]:
            part.execute(session, work)
            return {}

        return complete_run(store, run_id, compute, report=self.report)


class FmrLocal:
    """FMR on the local executor: the oracle and the tested models in this process."""

    def load(self, session: RunSession) -> FmrModels:
        cfg = session.cfg
        oracle, loaded = load_fmr_models(cfg, session.settings, session.ds, cfg.models, session.args.get("tested"),
                                         cache=session.store)
        return FmrModels([m.name for m in loaded], oracle, {m.name: m for m in loaded})

    def environment(self, session: RunSession) -> dict[str, Any]:
        models: FmrModels = session.models
        return local_environment(models.oracle.members if models.oracle is not None else [])

    def execute(self, session: RunSession, work: FmrWork) -> None:
        oracle = work.models.oracle
        assert oracle is not None, "load first"
        device = models_device(oracle.members)
        with InputPipeline.for_models(work.dataset, work.cfg.workers, device) as inputs:
            score_fmr_shards(work, oracle, work.models.tested,
                             inputs.batches(work.plan(), work.shards, work.report_unreadable))


register_kind(FmrKind())

__all__ = ["FmrKind", "FmrLocal"]

"""FMR on the Ray executor: ``FmrActor``s each hold the oracle and a group of the tested models.

Per shard one actor scores the oracle's votes once (round robin), and each (tested model, shard)
unit is one actor call running ``fmr.units.fmr_unit``, the local executor's unit code, so both
executors store identical records. Every actor builds its zero-shot classifiers through the store's
text-embedding cache, and pins the shards it gets when its models run on CUDA. The actors, the
object store and the waiting are the executor's (``engine.ray_executor.RayExecutor``); this module
is imported only for ``--executor ray``.
"""

from __future__ import annotations

import os
import platform
from typing import Any

import numpy as np
from pydantic import SecretStr

from domainbench.records.config import DomainConfig, FmrSettings, RunConfig
from domainbench.data import Batch, Dataset
from domainbench.engine.dataset_pin import open_run_dataset
from domainbench.engine.input_pipeline import Pinning
from domainbench.engine.kinds import RunSession
from domainbench.engine.local_executor import local_environment, models_device
from domainbench.engine.ray_executor import actor_store, import_modules, live_run_store, session_executor
from domainbench.fmr.oracle import Oracle
from domainbench.fmr.tested import TestedModel
from domainbench.fmr.units import FmrModels, FmrWork, fmr_unit, load_fmr_models
from domainbench.store import Store
from domainbench.store.fence import Fence


class FmrActor:
    """Holds an FMR run's oracle and a group of its tested models; searches (tested model, shard) units
    with the same ``fmr_unit`` the local executor runs, and scores a shard's oracle votes when asked."""

    def __init__(self, store: SecretStr, cfg: dict[str, Any], settings: dict[str, Any], modules: list[str],
                 models: list[str], fence: tuple[str, str, int | None] | None = None) -> None:
        import_modules(modules)
        self.store_uri, self.fence = store, fence
        self.cfg = RunConfig.model_validate(cfg)
        self.settings = FmrSettings.model_validate(settings)
        self.model_names = models
        self.store: Store | None = None
        self.dataset: Dataset | None = None
        self.oracle: Oracle | None = None
        self.tested: dict[str, TestedModel] = {}

    def load(self) -> dict[str, Any]:
        """Open the store and the dataset, load the oracle and this actor's tested models (classifiers
        from the store's text-embedding cache); the environment as the run records it."""
        self.store = actor_store(self.store_uri, self.fence)
        self.dataset = open_run_dataset(self.cfg)
        self.oracle, tested = load_fmr_models(self.cfg, self.settings, self.dataset, self.model_names, cache=self.store)
        self.tested = {m.name: m for m in tested}
        return {**local_environment(self.oracle.members), "host": platform.node(), "pid": os.getpid()}

    def votes(self, batch: Batch) -> np.ndarray:
        """The oracle's votes on a shard's clean images: once per shard, shared by its units."""
        if self.oracle is None:
            self.load()  # a restarted actor: Ray re-ran __init__ only
        assert self.oracle is not None
        return self.oracle.votes(self._pinned(batch).images)

    def unit(self, run_id: str, domain: dict[str, Any], shard: int, batch: Batch, clean_votes: np.ndarray,
             model: str, fence: Fence | None = None) -> int:
        """Search and store one (tested model, shard) unit; the images in it. ``fence``: the driver's."""
        if self.oracle is None:
            self.load()
        assert self.store is not None and self.dataset is not None and self.oracle is not None
        return fmr_unit(live_run_store(self.store, fence), run_id, DomainConfig.model_validate(domain), self.cfg, self.settings,
                        self.dataset.classes, self.oracle, self.tested[model], shard, self._pinned(batch), clean_votes)

    def _pinned(self, batch: Batch) -> Batch:
        """The shard as the models take it: pinned when they run on CUDA."""
        assert self.oracle is not None
        return Pinning.for_device(models_device(self.oracle.members)).batch(batch)


class FmrOnRay:
    """The FMR kind's part for the Ray executor: ``FmrActor``s over groups of the tested models."""

    def load(self, session: RunSession) -> FmrModels:
        """Create FMR actors, each with the oracle and a group of the tested models; the driver keeps the names."""
        executor, cfg, settings = session_executor(session), session.cfg, session.settings
        executor.start_actors(session.store, cfg, session.events, FmrActor, "the oracle on every actor",
                              lambda uri, group, first, fence: (uri, cfg.model_dump(mode="json"),
                                                                settings.model_dump(mode="json"),
                                                                list(executor.options.modules), group, fence))
        return FmrModels(list(cfg.models))

    def environment(self, session: RunSession) -> dict[str, Any]:
        return session_executor(session).environment()

    def execute(self, session: RunSession, work: FmrWork) -> None:
        """Per shard: its clean images (from the input pipeline) into the object store once, the oracle's
        votes once (on one actor, round robin), then one actor call per missing (tested model, shard) unit
        on its model group."""
        executor = session_executor(session)
        ray = executor.ray
        domain = work.domain.model_dump(mode="json")
        fence = getattr(work.store, "fence", None)  # the driver's: the actors' writes carry it (``live_run_store``)
        pending: dict[Any, tuple[int, str, int]] = {}  # unit result -> (actor index, model, shard)
        load = [0] * len(executor.actors)

        def collect() -> None:
            (_, name, shard), images = executor.ready_or_cancelled(pending, load, work.run_id, "fmr", work.cancel)
            work.unit_written(name, shard, images)

        try:
            with executor.inputs(work.dataset, work.cfg) as inputs:
                for shard, todo, batch in inputs.batches(work.plan(), work.shards, work.report_unreadable):
                    ref = ray.put(batch)
                    votes = executor.actors[shard % len(executor.actors)].votes.remote(ref)
                    for name in todo:
                        group = executor.groups[executor.group_of[name]]
                        i = executor.least_loaded(group, load, collect)
                        pending[executor.actors[i].unit.remote(work.run_id, domain, shard, ref, votes, name, fence)] = (i, name, shard)
                        load[i] += 1
            while pending:
                collect()
        finally:
            executor.release()


__all__ = ["FmrActor", "FmrOnRay"]

"""``FmrRunner``: an FMR run through the one engine, for callers that think in FMR terms
(``domainbench fmr``, benchmarks, tests).

It owns no loop of its own: ``start`` is ``Engine.start(..., fmr=settings)`` and ``resume`` is
``Engine.resume`` of an FMR run, on the executor ``options`` choose (local or Ray). The units
are ``fmr.units``'s, the kind's checks ``fmr.kind``'s, the lifecycle ``engine.lifecycle``'s.
"""

from __future__ import annotations

from collections.abc import Sequence

from domainbench.records.config import DomainConfig, FmrSettings, RunConfig
from domainbench.engine.executor_options import ExecutorOptions
from domainbench.engine.lifecycle import stored_run
from domainbench.engine.tasks import RunEvents
from domainbench.errors import UserInputError
from domainbench.fmr.tested import TestedModel, ZeroShotTested
from domainbench.fmr.units import MAX_UNIT_BYTES, auto_shard_size, family_of, unit_record
from domainbench.store import Store


class FmrRunner:
    def __init__(self, store: Store, events: RunEvents | None = None, options: ExecutorOptions | None = None) -> None:
        from domainbench.engine.executors import make_engine

        self.store = store
        self.engine = make_engine(store, events, options)

    @property
    def computed_units(self) -> int:
        return self.engine.stats.computed_units

    @property
    def skipped_units(self) -> int:
        return self.engine.stats.skipped_units

    def start(self, domain: DomainConfig, cfg: RunConfig, settings: FmrSettings, run_id: str | None = None,
              tested: Sequence[TestedModel] | None = None) -> str:
        """Check every input, then create the run and search. ``tested`` overrides ``cfg.models``
        with ready-made models (their names must be ``cfg.models``); nothing is stored on bad input."""
        return self.engine.start(domain, cfg, run_id, fmr=settings, tested=tested)

    def resume(self, run_id: str, tested: Sequence[TestedModel] | None = None) -> str:
        if stored_run(self.store, run_id).fmr is None:
            raise UserInputError(f"run {run_id} is not an FMR run; resume it with `domainbench run --resume {run_id}`")
        return self.engine.resume(run_id, tested=tested)


__all__ = ["MAX_UNIT_BYTES", "FmrRunner", "ZeroShotTested", "auto_shard_size", "family_of", "unit_record"]

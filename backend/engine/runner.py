"""The evaluation engine: one lifecycle for every kind of run, on any executor.

``Engine.start`` and ``Engine.resume`` are written once for every run kind (``engine.kinds``: the
corruption cells of ``engine.corruption_kind``, FMR's search of ``fmr.kind``, the kinds still to come):
the run id, the dataset opened, pinned and fingerprinted, the models loaded before anything is
stored, the run record created or restarted, and the report stored at the end (``engine.lifecycle``).
The kind supplies its checks, its inputs beside the dataset, its plan, its units on the chosen
executor and its report; ``resume`` finds the kind of a stored run in the registry of kinds. Units
are upserted as soon as they finish, so a killed run loses at most the units in flight and ``resume``
recomputes nothing that is stored.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from domainbench.records.config import DomainConfig, FmrSettings, RunConfig
from domainbench.engine.dataset_pin import check_same_dataset, dataset_info, open_run_dataset, pinned_config
from domainbench.engine.kinds import DEFAULT_KIND, RunKind, RunSession, get_kind, kind_of
from domainbench.engine.lifecycle import check_new_run_id, create_run, new_run_id, now, restart_run, stored_run
from domainbench.engine.local_executor import LocalExecutor
from domainbench.engine.tasks import RunEvents, SilentEvents, cells_of
from domainbench.engine.timings import STARTUP, StageTimes
from domainbench.engine.work import Executor, RunStats
from domainbench.store import Store

__all__ = ["Engine", "RunStats", "cells_of", "new_run_id", "open_run_dataset"]


class Engine:
    """Owns a run from its checked inputs to its report; where the work runs is the executor's choice."""

    def __init__(self, store: Store, events: RunEvents | None = None, executor: Executor | None = None) -> None:
        self.store = store
        self.events: RunEvents = events or SilentEvents()
        self.executor: Executor = executor or LocalExecutor()
        self.stats = RunStats()
        self.timer = StageTimes()
        #: the fixed costs before the first shard (``timings.STARTUP``); an entry point adds its own imports
        self.startup = StageTimes()

    # -- public entry points ----------------------------------------------------------
    def start(self, domain: DomainConfig, cfg: RunConfig, run_id: str | None = None, fmr: FmrSettings | None = None,
              tested: Sequence[Any] | None = None, *, kind: str | RunKind | None = None, settings: Any = None,
              **kind_args: Any) -> str:
        """Validate everything, then create the run and evaluate it. Returns the run id.

        ``run_id`` lets a caller that launches the run in the background (the UI) know its id up front;
        by default one is made from the time and the domain text. ``kind``: the run kind (a registered
        name or a ``RunKind``; default the corruption cells) with its ``settings``; ``fmr=settings`` is
        short for ``kind="fmr", settings=settings``. ``tested`` and ``kind_args``: the kind's own
        arguments (FMR: ready-made tested models instead of ``cfg.models``).
        """
        if fmr is not None:
            kind, settings = "fmr", fmr
        k = kind if kind is not None and not isinstance(kind, str) else get_kind(kind or DEFAULT_KIND)
        check_new_run_id(self.store, run_id)
        s = self._session(k, domain, cfg, settings, None, {"tested": tested, **kind_args})
        k.capabilities.check(k.name, s)
        k.check(s)
        s.cfg = pinned_config(s.cfg)
        with self.startup.stage(STARTUP, "dataset"):
            s.dataset = open_run_dataset(s.cfg)
        from domainbench.models.finetune_guard import check_not_training_images

        check_not_training_images(s.cfg.models, s.ds)  # a fine-tune scored on its own training images is refused
        k.open(s)
        part = k.part(self.executor.name)
        s.models = part.load(s)
        # nothing is written before every input is known to be good
        with self.startup.stage(STARTUP, "dataset"):
            info = dataset_info(s.ds, s.cfg)
        s.run_id = create_run(self.store, s.domain, s.cfg, run_id, k.dataset_info(s, info), part.environment(s),
                              **k.record_fields(s))
        return self._evaluate(s)

    def resume(self, run_id: str, skip_unreadable: bool = False, tested: Sequence[Any] | None = None,
               endpoint: dict[str, Any] | None = None) -> str:
        """Evaluate what a stored run of any kind still lacks: after an interruption, or a queued run's first start.

        ``skip_unreadable`` lets a run that stopped at an unreadable image go on without it (its
        stored units hold none: the run stopped before scoring that image's shard). ``endpoint``:
        openai-vlm transport settings for this session (concurrency, retry_budget, ...; never stored)."""
        run = stored_run(self.store, run_id)
        if endpoint:
            run = run.model_copy(update={"config": run.config.model_copy(update=endpoint)})
        k = kind_of(run)
        s = self._session(k, run.domain, run.config, k.settings_of(run), run, {"tested": tested})
        k.capabilities.check(k.name, s)
        own = getattr(k, "resume_run", None)
        if own is not None:  # a kind whose input is not a classification dataset (a task manifest) resumes itself
            return str(own(s))
        restart = k.check_resume(s)
        if run.dataset is None:  # a queued run's first start pins its dataset, as `start` does
            s.cfg = pinned_config(s.cfg)
        skipping = skip_unreadable and not s.cfg.skip_unreadable
        if skipping:
            s.cfg = s.cfg.model_copy(update={"skip_unreadable": True})
        with self.startup.stage(STARTUP, "dataset"):
            s.dataset = open_run_dataset(s.cfg)
            check_same_dataset(run, s.dataset)
        k.open(s)
        part = k.part(self.executor.name)
        s.models = part.load(s)
        started: dict[str, Any] = {"resumed_at": now(), **({"config": s.cfg} if skipping else {})}
        if run.dataset is None:  # a queued run starts here: record what `start` records
            with self.startup.stage(STARTUP, "dataset"):
                info = dataset_info(s.ds, s.cfg)
            started = {"dataset": k.dataset_info(s, info), "environment": part.environment(s), "config": s.cfg}
        restart_run(self.store, run_id, **restart, **started)
        s.run_id = run_id
        return self._evaluate(s)

    def _session(self, kind: RunKind, domain: DomainConfig, cfg: RunConfig, settings: Any, run: Any,
                 args: dict[str, Any]) -> RunSession:
        return RunSession(kind, self.store, self.executor, self.events, self.stats, self.timer, self.startup,
                          domain, cfg, settings, run, {k: v for k, v in args.items() if v is not None})

    def _evaluate(self, session: RunSession) -> str:
        try:
            return session.kind.evaluate(session)
        finally:
            self.timer = session.timer  # the session's stage times, stored with the run by kinds that keep them

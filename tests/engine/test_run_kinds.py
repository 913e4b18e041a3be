"""Run kinds behind one protocol (``engine.kinds``): a kind written outside the engine, registered, runs through
the engine's one start and resume, the queue and a worker; an executor it declares no part for is refused in
one line before anything is stored; stored runs find their kind by their record."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from domainbench.records.config import CorruptionChoice, DomainConfig, FmrSettings, RunConfig
from domainbench.engine.jobs import CLEAN
from domainbench.engine.kinds import RUN_KINDS, KindCapabilities, RunSession, kind_of, register_kind
from domainbench.engine.lifecycle import complete_run, queue_run
from domainbench.engine.local_executor import local_environment
from domainbench.engine.reports import build_report
from domainbench.engine.runner import Engine
from domainbench.engine.shards import score_shard
from domainbench.engine.tasks import Cell, RunContext
from domainbench.errors import UserInputError
from domainbench.store import Store, open_store
from domainbench.store.fenced_store import fenced_for_this_process

DOMAIN = DomainConfig(domain="kinds", corruptions=[CorruptionChoice(name="brightness", severities=[2])])


class CleanPassKind:
    """A toy third kind: only the clean pass, in shards of its own settings' size; the local executor only."""

    name = "clean-pass"
    capabilities = KindCapabilities(executors=("local",))

    def claims(self, run: Any) -> bool:
        return False  # its runs name it (RunRecord.kind)

    def settings_of(self, run: Any) -> Any:
        return run.kind_settings

    def record_fields(self, session: RunSession) -> dict[str, Any]:
        return {"kind": self.name, "kind_settings": session.settings}

    def check(self, session: RunSession) -> None:
        if session.settings.get("shard_size", 0) < 1:
            raise UserInputError("shard_size: give a positive number of images")

    def check_resume(self, session: RunSession) -> dict[str, Any]:
        return {}

    def open(self, session: RunSession) -> None:
        pass

    def dataset_info(self, session: RunSession, info: Any) -> Any:
        return info

    def part(self, executor: str) -> Any:
        return _LocalPart()

    def report(self, store: Store, run_id: str) -> Any:
        return build_report(store, run_id)

    def evaluate(self, session: RunSession) -> str:
        ds, size = session.ds, session.settings["shard_size"]
        store = fenced_for_this_process(session.store, session.run_id)
        ctx = RunContext(session.run_id, session.cfg, session.domain, ds, store, session.models, session.events)
        done = session.store.units.keys(run_id=session.run_id)
        session.stats.skipped_units = len(done)

        def counted(n: int) -> None:
            session.stats.computed_units += 1

        def compute() -> dict[str, Any]:
            for k, start in enumerate(range(0, len(ds), size)):
                batch = ds.load(np.arange(start, min(start + size, len(ds))))
                score_shard(ctx, [Cell(CLEAN, 0, None)], done, [], k, batch, [], on_unit=counted)
            return {}

        return complete_run(store, session.run_id, compute, report=self.report)


class _LocalPart:
    def load(self, session: RunSession) -> Any:
        return session.executor.load_models(session.store, session.cfg, session.ds, session.events)  # type: ignore[attr-defined]

    def environment(self, session: RunSession) -> dict[str, Any]:
        return local_environment(session.models)

    def execute(self, session: RunSession, work: Any) -> None:
        raise AssertionError("the toy kind computes in its own evaluate")


@pytest.fixture
def clean_pass() -> Iterator[CleanPassKind]:
    kind = CleanPassKind()
    register_kind(kind)
    yield kind
    RUN_KINDS.unregister(kind.name)


def cfg(**kw: Any) -> RunConfig:
    return RunConfig(**({"models": ["embedded:fmnist-plain"], "limit": 40, "shard_size": 20, "workers": 0,
                         "stability": False, "threat": False} | kw))


def _clean(store: Store, run_id: str) -> dict[tuple[str, int], tuple[list[int], list[int]]]:
    return {(u.model, u.shard): (list(u.indices), list(u.preds)) for u in store.units(run_id, corruption=CLEAN)}


def test_a_kind_from_outside_the_engine_starts_queues_and_resumes_through_the_one_lifecycle(
        home: Path, clean_pass: CleanPassKind) -> None:
    from domainbench.app.worker import Worker

    store = open_store()
    reference = Engine(store).start(DOMAIN, cfg())  # the corruption kind's clean pass of the same images
    started = Engine(store).start(DOMAIN, cfg(), kind="clean-pass", settings={"shard_size": 20})
    run = store.get_run(started)
    assert run.status == "done" and run.kind == "clean-pass" and run.kind_settings == {"shard_size": 20}
    assert run.dataset is not None and run.dataset.size == 40 and run.environment["device"] == "cpu"
    assert {u.corruption for u in store.units(started)} == {CLEAN}
    assert _clean(store, started) == _clean(store, reference) and len(_clean(store, started)) == 2
    assert store.get_report(started) is not None and kind_of(run) is clean_pass

    # queued (its kind on the record), then taken by a worker: the worker resumes it as any run
    queued = queue_run(store, DOMAIN, cfg(), kind="clean-pass", kind_settings={"shard_size": 10}).run_id
    lines: list[str] = []
    assert Worker(store, name="w", say=lines.append).serve(until_idle=True) == 1
    assert store.get_run(queued).status == "done" and len(_clean(store, queued)) == 4
    assert sorted(i for ix, _ in _clean(store, queued).values() for i in ix) == list(range(40))
    assert any(f"run {queued}: done: 4 units computed, 0 already stored" in line for line in lines)

    # a corruption run and an FMR run are found by their records as before
    assert kind_of(store.get_run(reference)).name == "corruption"
    fmr = store.get_run(reference).model_copy(update={"fmr": FmrSettings(oracle=["embedded:fmnist-plain"])})
    assert kind_of(fmr).name == "fmr"


def test_an_executor_a_kind_has_no_part_for_is_refused_in_one_line_before_anything_is_stored(
        home: Path, clean_pass: CleanPassKind) -> None:
    pytest.importorskip("ray")
    from domainbench.engine.executors import ExecutorOptions, make_engine

    store = open_store()
    engine = make_engine(store, options=ExecutorOptions(kind="ray"))
    with pytest.raises(UserInputError) as e:
        engine.start(DOMAIN, cfg(), run_id="r", kind="clean-pass", settings={"shard_size": 20})
    assert str(e.value) == "--executor ray: clean-pass runs execute on local; choose --executor local"
    assert store.get_run("r") is None and store.list_runs() == []


def test_a_stored_run_of_a_kind_not_installed_is_one_clear_error(home: Path, clean_pass: CleanPassKind) -> None:
    store = open_store()
    run_id = queue_run(store, DOMAIN, cfg(), kind="clean-pass", kind_settings={"shard_size": 20}).run_id
    RUN_KINDS.unregister("clean-pass")  # a worker without the plug-in
    with pytest.raises(UserInputError, match=r"^unknown run kind 'clean-pass'"):
        Engine(store).resume(run_id)
    assert store.get_run(run_id).status == "queued" and store.units.keys(run_id=run_id) == set()

"""Cancelling a run while it is evaluated: the engine (run from a terminal) and a worker stop at the
next unit, keep the finished units and leave the run "cancelled"; resuming it computes only the rest."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from domainbench.records.config import CorruptionChoice, DomainConfig, RunConfig
from domainbench.engine import cancel
from domainbench.engine.cancel import RunCancelled
from domainbench.engine.runner import Engine
from domainbench.engine.tasks import SilentEvents
from domainbench.service.launch import enqueue_run
from domainbench.store import open_store
from domainbench.store.queue import queue_of
from domainbench.app.worker import Worker

DOMAIN = DomainConfig(domain="cancel test", corruptions=[CorruptionChoice(name="brightness", severities=[1, 2, 3])])
#: 2 shards x (clean + 3 severities) x 1 model
TOTAL_UNITS = 8


def cfg(model: str = "fake:a") -> RunConfig:
    return RunConfig(models=[model], limit=20, shard_size=10, workers=0, stability=False, threat=False)


@pytest.fixture(autouse=True)
def _look_at_every_unit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cancel, "CHECK_EVERY_S", 0.0)


class CancelAfterFirstUnit(SilentEvents):
    """Clicks Cancel (as the UI does) once the first unit is stored."""

    def __init__(self, store) -> None:  # noqa: ANN001
        self.store, self.run_id = store, None

    def advance(self, units: int, images: int) -> None:
        run = next(r for r in self.store.list_runs() if r.status == "running")
        if self.run_id is None:
            self.run_id = run.run_id
            queue_of(self.store).cancel(run.run_id)


def test_engine_stops_at_the_next_unit_and_resumes_the_rest(home: Path) -> None:
    store = open_store()
    events = CancelAfterFirstUnit(store)
    with pytest.raises(RunCancelled, match="was cancelled.*--resume"):
        Engine(store, events).start(DOMAIN, cfg())
    run = store.get_run(events.run_id)
    assert run.status == "cancelled" and run.error is None
    assert len(store.units(run.run_id)) == 1  # stopped right after the unit that saw the cancel
    queue_of(store).requeue(run.run_id)
    engine = Engine(store)
    engine.resume(run.run_id)
    assert store.get_run(run.run_id).status == "done"
    assert engine.stats.computed_units == TOTAL_UNITS - 1 and len(store.units(run.run_id)) == TOTAL_UNITS


def test_a_worker_stops_a_cancelled_run_and_releases_it(home: Path) -> None:
    store = open_store()
    run_id = enqueue_run(store, DOMAIN, cfg("fake:slow")).run_id
    said: list[str] = []
    worker = Worker(store, name="w1", lease_s=30, poll_s=0.1, say=said.append)
    thread = threading.Thread(target=worker.run_one)
    thread.start()
    deadline = time.time() + 60
    while not store.units(run_id) and time.time() < deadline:
        time.sleep(0.02)
    queue_of(store).cancel(run_id)
    thread.join(60)
    assert not thread.is_alive()
    run = store.get_run(run_id)
    assert run.status == "cancelled" and run.lease_until is None
    assert 1 <= len(store.units(run_id)) < TOTAL_UNITS
    assert any("cancelled" in line for line in said), said
    assert queue_of(store).claim("w2", 30) is None  # nobody picks it up again until it is resumed

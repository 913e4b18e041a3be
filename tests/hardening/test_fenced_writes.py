"""Every write of a worker is fenced by its lease, inside the write: after a takeover, a stale
worker's write through any path changes nothing."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from domainbench.records.config import CorruptionChoice, DomainConfig, RunConfig
from domainbench.records.confusion import SparseConfusion
from domainbench.store import open_store
from domainbench.store.fence import Fence
from domainbench.store.fenced_store import FencedStore
from domainbench.store.queue import LeaseLost, queue_of
from domainbench.store.records import RunRecord, UnitRecord


def _queued(store, run_id: str = "r1") -> RunRecord:  # noqa: ANN001
    from domainbench.store.repositories import domain_id

    domain = DomainConfig(domain="d", corruptions=[CorruptionChoice(name="brightness", severities=[1])])
    run = RunRecord(run_id=run_id, domain_id=domain_id(domain), domain=domain, config=RunConfig(models=["fake:a"]),
                    status="queued", created_at="2026-01-01T00:00:00")
    return queue_of(store).enqueue(run)


def _unit(run_id: str, shard: int) -> UnitRecord:
    labels, preds = np.array([0, 1]), np.array([0, 0])
    return UnitRecord(run_id=run_id, model="fake:a", corruption="clean", severity=0, shard=shard, n=2,
                      confusion=SparseConfusion.from_pairs(labels, preds, 2), flips=0, preds=preds,
                      indices=np.arange(2 * shard, 2 * shard + 2), labels=labels, params={}, seed=0,
                      classes=["a", "b"], computed_at="t")


def _snapshot(store) -> dict:  # noqa: ANN001
    from domainbench.store.collections import KEY_FIELDS

    return {c: sorted(map(str, store.find(c))) for c in KEY_FIELDS}


@pytest.fixture
def takeover(home: Path):  # noqa: ANN201
    """(store, stale view, fresh view): worker w1's lease ran out and w2 claimed the run."""
    store = open_store()
    _queued(store)
    q = queue_of(store)
    assert q.claim("w1", lease_s=0.2).run_id == "r1"
    stale = FencedStore(store, Fence("r1", "w1"))
    stale.units.put(_unit("r1", 0))  # while it holds the lease, its writes land
    time.sleep(0.3)
    assert q.claim("w2", lease_s=60).worker == "w2"
    return store, stale, FencedStore(store, Fence("r1", "w2"))


def _writes(view) -> dict:  # noqa: ANN001
    from domainbench.engine.reports import build_report

    report = build_report(view.inner, "r1")
    return {
        "unit": lambda: view.units.put(_unit("r1", 1)),
        "units via upsert": lambda: view.upsert("units", _unit("r1", 2)),
        "units via upsert_many": lambda: view.upsert_many("units", [_unit("r1", 3)]),
        "report": lambda: view.put_report(report),
        "domain": lambda: view.put_domain(view.get_run("r1").domain.model_dump() | {"domain_id": "x", "created_at": ""}),
        "run record": lambda: view.put_run(view.get_run("r1").model_copy(update={"status": "failed"})),
        "run update": lambda: view.update_run("r1", status="failed"),
        "delete units": lambda: view.units.delete(run_id="r1"),
        "delete run": lambda: view.delete_run("r1"),
    }


def test_a_stale_workers_every_write_path_changes_nothing(takeover) -> None:  # noqa: ANN001
    store, stale, fresh = takeover
    before = _snapshot(store)
    assert len(store.find("units")) == 1
    for name, write in _writes(stale).items():
        with pytest.raises(LeaseLost):
            write()
        assert _snapshot(store) == before, name
    fresh.units.put(_unit("r1", 1))  # the worker holding the lease writes
    assert len(store.find("units")) == 2


def test_the_fence_is_checked_inside_the_sqlite_transaction(takeover, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    """A check in Python before the write would pass here: the takeover happens after it."""
    store, stale, _ = takeover
    from domainbench.store.sqlite_store import SQLiteStore

    # the stale worker's own clock still says it holds the lease; only the stored run says otherwise
    assert isinstance(store, SQLiteStore)
    with pytest.raises(LeaseLost):
        store.upsert_many("units", [_unit("r1", 5)], fence=Fence("r1", "w1"))
    with pytest.raises(LeaseLost):
        store.delete("units", fence=Fence("r1", "w1"), run_id="r1")
    assert len(store.find("units")) == 1


def test_fence_holds_by_hand() -> None:
    f = Fence("r", "w")
    assert f.holds({"worker": "w", "status": "running", "lease_until": 10.0}, now=9.0)
    assert not f.holds({"worker": "w", "status": "running", "lease_until": 10.0}, now=11.0)
    assert not f.holds({"worker": "x", "status": "running", "lease_until": 10.0}, now=9.0)
    assert not f.holds({"worker": None, "status": "queued", "lease_until": None}, now=9.0)  # requeued
    assert not f.holds(None)


def test_mongo_fence_refuses_a_stale_write(monkeypatch: pytest.MonkeyPatch) -> None:
    mongomock = pytest.importorskip("mongomock")
    from domainbench.store.mongo_store import MongoStore

    store = MongoStore("mongodb://localhost/x", client=mongomock.MongoClient())
    _queued(store)
    q = queue_of(store)
    q.claim("w1", lease_s=0.2)
    time.sleep(0.3)
    q.claim("w2", lease_s=60)
    stale, fresh = FencedStore(store, Fence("r1", "w1")), FencedStore(store, Fence("r1", "w2"))
    fresh.units.put(_unit("r1", 0))
    before = _snapshot(store)
    for name, write in _writes(stale).items():
        with pytest.raises(LeaseLost):
            write()
        assert _snapshot(store) == before, name
    fresh.units.put(_unit("r1", 1))
    assert len(store.find("units")) == 2


def test_a_ray_actor_writes_under_the_workers_lease_epoch(home: Path) -> None:
    """The worker hands its fence, epoch included, to its Ray actors: after a takeover their writes are refused."""
    from domainbench.engine.ray_executor import ShardActor, store_locator

    store = open_store()
    _queued(store)
    q = queue_of(store)
    run = q.claim("w1", lease_s=60)
    _, uri = store_locator(FencedStore(store, Fence(run.run_id, "w1", run.lease_epoch)))
    cfg = RunConfig(models=["fake:a"], stability=False, threat=False).model_dump(mode="json")
    actor = ShardActor(uri, cfg, [], ["fake:a"], False, (run.run_id, "w1", run.lease_epoch))
    actor.dataset = object()  # _begin only hands it on; no model is loaded for a write
    actor._begin("r1", run.domain.model_dump(mode="json"))
    assert actor.store.fence == Fence("r1", "w1", 1)
    actor.store.units.put(_unit("r1", 0))
    store.update_run("r1", lease_until=0.0)  # w1's lease runs out
    # a new claim under the same name (a worker restarted with `--name w1`): only the epoch tells them apart
    assert q.claim("w1", lease_s=60).lease_epoch == 2
    with pytest.raises(LeaseLost):
        actor.store.units.put(_unit("r1", 1))
    assert [u.shard for u in store.find("units")] == [0]


def _terminal_run(store, run_id: str = "r1"):  # noqa: ANN001, ANN202
    """A run started from a terminal (no worker): its record names the driver's pid and host."""
    from domainbench.store.repositories import domain_id

    domain = DomainConfig(domain="d", corruptions=[CorruptionChoice(name="brightness", severities=[1])])
    run = RunRecord(run_id=run_id, domain_id=domain_id(domain), domain=domain, config=RunConfig(models=["fake:a"]),
                    status="running", created_at="2026-01-01T00:00:00", pid=4242, host="driver-host")
    store.put_run(run)
    return run


@pytest.mark.parametrize("end", ["done", "cancelled", "failed", "deleted"])
def test_a_ray_actor_of_a_terminal_run_writes_nothing_once_the_run_ended(home: Path, end: str) -> None:
    """A run from a terminal on Ray: its actors write under the driver's process fence and only while the run is
    "running"; a call still in flight when the run finished, was cancelled or deleted adds no unit."""
    from domainbench.engine.ray_executor import ShardActor, store_locator
    from domainbench.store.fence import ProcessFence, RunFencedOut, fence_out

    store = open_store()
    run = _terminal_run(store)
    _, uri = store_locator(store)
    cfg = RunConfig(models=["fake:a"], stability=False, threat=False).model_dump(mode="json")
    actor = ShardActor(uri, cfg, [], ["fake:a"], False)  # a terminal run's actors are made before the run exists
    actor.dataset = object()  # _begin only hands it on; no model is loaded for a write
    driver = ProcessFence("r1", worker="", pid=4242, host="driver-host")
    ctx = actor._begin("r1", run.domain.model_dump(mode="json"), driver)
    ctx.store.units.put(_unit("r1", 0))  # while the run runs, its units land
    ctx.store.update_run("r1", threat_anchors_per_class=3)  # and its record updates (the threat task's)
    assert store.get_run("r1").threat_anchors_per_class == 3
    if end == "deleted":
        fence_out(store, "r1")
        store.delete_run("r1")
    else:
        store.update_run("r1", status=end)
    with pytest.raises(LeaseLost):
        ctx.store.units.put(_unit("r1", 1))
    assert [u.shard for u in store.find("units")] == ([] if end == "deleted" else [0])
    if end == "deleted":  # and nothing a later run of the same id could adopt
        with pytest.raises(RunFencedOut):
            ctx.store.units.put(_unit("r1", 2))
        assert store.find("units") == []


def test_a_ray_actor_of_a_workers_run_stops_writing_once_the_run_is_done(home: Path) -> None:
    from domainbench.engine.ray_executor import ShardActor, store_locator

    store = open_store()
    _queued(store)
    run = queue_of(store).claim("w1", lease_s=60)
    lease = Fence(run.run_id, "w1", run.lease_epoch)
    _, uri = store_locator(FencedStore(store, lease))
    cfg = RunConfig(models=["fake:a"], stability=False, threat=False).model_dump(mode="json")
    actor = ShardActor(uri, cfg, [], ["fake:a"], False, (run.run_id, "w1", run.lease_epoch))
    actor.dataset = object()
    ctx = actor._begin("r1", run.domain.model_dump(mode="json"), lease)
    ctx.store.units.put(_unit("r1", 0))
    store.update_run("r1", status="done")  # the lease is still the worker's: only the status ended
    with pytest.raises(LeaseLost):
        ctx.store.units.put(_unit("r1", 1))
    assert [u.shard for u in store.find("units")] == [0]


def test_the_ray_driver_reads_a_refused_unit_of_a_cancelled_run_as_the_cancel(home: Path) -> None:
    from domainbench.engine.cancel import CancelWatch, RunCancelled
    from domainbench.engine.ray_executor import RayExecutor
    from domainbench.store.fence import ProcessFence

    store = open_store()
    _terminal_run(store)
    executor = RayExecutor.__new__(RayExecutor)

    def refused(*args: object) -> None:
        raise ProcessFence("r1", worker="", pid=4242, host="driver-host").lost()

    executor.ready = refused  # type: ignore[method-assign]
    cancel = CancelWatch(store, "r1")
    cancel.check()  # a look just now: the next regular one would wait a second
    store.update_run("r1", status="cancelled")
    with pytest.raises(RunCancelled):
        executor.ready_or_cancelled({}, [], "r1", "run", cancel)
    store.update_run("r1", status="running")  # not cancelled: the refusal itself
    with pytest.raises(LeaseLost):
        executor.ready_or_cancelled({}, [], "r1", "fmr", cancel)

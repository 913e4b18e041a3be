"""The work queue on every backend: atomic claims, expiring leases, the write fence, re-queueing."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from domainbench.store.base import Store
from domainbench.store.queue import MAX_ATTEMPTS, DuplicateRunError, LeaseLost, now_iso, queue_of
from domainbench.store.records import RunRecord
from domainbench.store.sqlite_store import SQLiteStore
from domainbench.store.status import run_status
from domainbench.errors import UserInputError
from domainbench.app.worker import Lease, OwnedStore

def queued(run_id: str, seed: int = 0, at: str | None = None) -> RunRecord:
    at = at or now_iso()
    return RunRecord.model_validate({
        "run_id": run_id, "domain_id": "d1", "domain": {"domain": "x", "corruptions": []},
        "config": {"models": ["fake:a"], "seed": seed}, "status": "queued", "created_at": at, "queued_at": at,
    })


def test_a_run_is_claimed_once_and_renewed_only_by_its_worker(store: Store) -> None:
    q = queue_of(store)
    q.enqueue(queued("r1"))
    assert store.get_run("r1").status == "queued"
    got = q.claim("w1", lease_s=30)
    assert got is not None and got.run_id == "r1" and got.worker == "w1" and got.attempts == 1
    assert got.status == "running" and got.lease_until == pytest.approx(time.time() + 30, abs=2)
    assert q.claim("w2", lease_s=30) is None  # held: nobody else gets it
    assert q.renew("r1", "w2", 30) is None
    assert q.renew("r1", "w1", 60) == pytest.approx(time.time() + 60, abs=2)
    assert store.get_run("r1").lease_until == pytest.approx(time.time() + 60, abs=2)
    with pytest.raises(LeaseLost):
        q.update_owned("r1", "w2", status="failed")
    assert q.update_owned("r1", "w1", status="done").status == "done"
    assert store.get_run("r1").status == "done"


def test_oldest_queued_run_is_claimed_first(store: Store) -> None:
    q = queue_of(store)
    q.enqueue(queued("new", seed=1, at="2026-01-02T00:00:00+00:00"))
    q.enqueue(queued("old", seed=2, at="2026-01-01T00:00:00+00:00"))
    assert [q.claim("w", 30).run_id, q.claim("w", 30).run_id] == ["old", "new"]  # type: ignore[union-attr]
    assert q.claim("w", 30) is None


def test_an_expired_lease_is_claimed_again_and_the_old_worker_is_fenced(store: Store) -> None:
    q = queue_of(store)
    q.enqueue(queued("r1"))
    first = q.claim("dead", lease_s=0.2)
    assert first is not None
    assert q.claim("w2", lease_s=30) is None  # not yet expired
    assert run_status(store.get_run("r1")) == "running"
    time.sleep(0.3)
    assert run_status(store.get_run("r1")) == "interrupted"  # its worker stopped renewing
    second = q.claim("w2", lease_s=30)
    assert second is not None and second.worker == "w2" and second.attempts == 2
    # the old worker can neither renew nor change the run any more
    assert q.renew("r1", "dead", 30) is None
    with pytest.raises(LeaseLost):
        q.update_owned("r1", "dead", status="failed")
    assert store.get_run("r1").worker == "w2"


def test_a_run_that_keeps_losing_workers_fails(store: Store) -> None:
    q = queue_of(store)
    q.enqueue(queued("r1"))
    for i in range(MAX_ATTEMPTS):
        assert q.claim(f"w{i}", lease_s=0.05) is not None
        time.sleep(0.1)
    assert q.claim("last", lease_s=30) is None
    run = store.get_run("r1")
    assert run.status == "failed" and f"{MAX_ATTEMPTS} times" in (run.error or "")


def test_duplicates_and_reused_ids_are_refused(store: Store) -> None:
    q = queue_of(store)
    q.enqueue(queued("r1"))
    with pytest.raises(DuplicateRunError, match="already queued: r1") as e:
        q.enqueue(queued("r2"))  # same domain and config
    assert e.value.run_id == "r1"
    with pytest.raises(UserInputError, match="already used"):
        q.enqueue(queued("r1", seed=5))
    q.enqueue(queued("r3", seed=7))  # another config is another run
    assert {r.run_id for r in q.active()} == {"r1", "r3"}


def test_requeue_takes_interrupted_and_failed_runs_only(store: Store) -> None:
    q = queue_of(store)
    q.enqueue(queued("r1"))
    with pytest.raises(UserInputError, match="is queued"):
        q.requeue("r1")
    with pytest.raises(UserInputError, match="no run 'nope'"):
        q.requeue("nope")
    q.claim("w1", 30)
    q.update_owned("r1", "w1", status="failed", error="boom")
    again = q.requeue("r1")
    assert again.status == "queued" and again.worker is None and again.attempts == 0 and again.error is None
    assert q.claim("w2", 30).run_id == "r1"  # type: ignore[union-attr]
    q.update_owned("r1", "w2", status="done")
    with pytest.raises(UserInputError, match="is done"):
        q.requeue("r1")


def test_concurrent_claims_take_every_run_exactly_once(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    q = queue_of(SQLiteStore(path))
    for i in range(20):
        q.enqueue(queued(f"r{i:02d}", seed=i))
    taken: list[str] = []
    lock = threading.Lock()

    def claim_all(name: str) -> None:
        mine = queue_of(SQLiteStore(path))  # its own connection, as another process would have
        while (run := mine.claim(name, 30)) is not None:
            with lock:
                taken.append(run.run_id)

    threads = [threading.Thread(target=claim_all, args=(f"w{i}",)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(taken) == [f"r{i:02d}" for i in range(20)]


def test_the_write_fence_stops_a_worker_whose_lease_ran_out(store: Store) -> None:
    q = queue_of(store)
    q.enqueue(queued("r1"))
    run = q.claim("w1", lease_s=0.3)
    lease = Lease(q, run, "w1", 0.3)  # not entered: no renewal, as in a worker paused past its lease
    owned = OwnedStore(store, lease)
    unit = {"run_id": "r1", "model": "fake:a", "corruption": "clean", "severity": 0, "shard": 0, "n": 1,
            "confusion": None, "flips": 0, "seed": 0, "classes": ["a", "b"]}
    owned.upsert("units", unit)
    time.sleep(0.35)
    with pytest.raises(LeaseLost):
        owned.upsert("units", unit | {"shard": 1})
    with pytest.raises(LeaseLost):
        owned.update_run("r1", status="done")
    assert store.keys("units", run_id="r1") == {("r1", "fake:a", "clean", 0, 0)}
    assert store.get_run("r1").status == "running"


def test_a_version_2_run_reads_as_never_queued(store: Store) -> None:
    doc = queued("r-old").model_dump(mode="json")
    for f in ("queued_at", "worker", "lease_until", "attempts"):
        doc.pop(f)
    store._upsert_many("runs", [doc | {"schema_version": 2, "status": "done"}])
    run = store.get_run("r-old")
    assert run.schema_version == 3 and run.attempts == 0 and run.worker is None and run.queued_at is None
    assert queue_of(store).claim("w", 30) is None

"""The MongoDB lease fence is part of the write (``domainbench.store.fence``): fencing tokens on a
standalone server, one transaction with the fence's check where the server has transactions.

The takeover is injected between the fence's read and the write, the gap a read-then-write
leaves: the stale worker's write must change nothing the new holder wrote."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from domainbench.records.config import CorruptionChoice, DomainConfig, RunConfig
from domainbench.records.confusion import SparseConfusion
from domainbench.store import mongo_parts
from domainbench.store.fence import EPOCH_FIELD, Fence, LeaseLost, epoch_field
from domainbench.store.fenced_store import FencedStore
from domainbench.store.indexes import PARTS
from domainbench.store.queue import queue_of
from domainbench.store.records import RunRecord, UnitRecord

mongomock = pytest.importorskip("mongomock")
from domainbench.store.mongo_store import MongoStore, supports_transactions  # noqa: E402


def _store(client: Any = None) -> MongoStore:
    return MongoStore("mongodb://localhost/fence", client=client or mongomock.MongoClient())


def _enqueue(store: MongoStore, run_id: str = "r1") -> None:
    from domainbench.store.repositories import domain_id

    domain = DomainConfig(domain="d", corruptions=[CorruptionChoice(name="brightness", severities=[1])])
    queue_of(store).enqueue(RunRecord(run_id=run_id, domain_id=domain_id(domain), domain=domain,
                                      config=RunConfig(models=["fake:a"]), status="queued",
                                      created_at="2026-01-01T00:00:00"))


def _unit(shard: int, by: str, drawn: int = 0) -> UnitRecord:
    labels, preds = np.array([0, 1]), np.array([0, 0])
    params: dict[str, Any] = {"by": by} | ({"drawn": list(range(drawn))} if drawn else {})
    return UnitRecord(run_id="r1", model="fake:a", corruption="clean", severity=0, shard=shard, n=2,
                      confusion=SparseConfusion.from_pairs(labels, preds, 2), flips=0, preds=preds,
                      indices=np.arange(2), labels=labels, params=params, seed=0, classes=["a", "b"], computed_at=by)


def _claim(store: MongoStore, worker: str) -> Fence:
    run = queue_of(store).claim(worker, lease_s=60)
    assert run is not None and run.worker == worker
    return Fence("r1", worker, run.lease_epoch)


def _take_over(store: MongoStore) -> Fence:
    """The lease of the holder runs out and w2 claims the run."""
    store._db["runs"].update_one({"run_id": "r1"}, {"$set": {"lease_until": 0.0}})
    return _claim(store, "w2")


def _by(store: MongoStore) -> dict[int, str]:
    return {u.shard: u.params["by"] for u in store.units("r1")}


@pytest.fixture
def gap(monkeypatch: pytest.MonkeyPatch):  # noqa: ANN201
    """(store, stale view, after): after the stale worker's fence read passes, w2 takes the run over and
    runs ``after(fresh view)`` before the stale write goes on."""
    store = _store()
    _enqueue(store)
    stale = FencedStore(store, _claim(store, "w1"))
    stale.units.put(_unit(0, "w1"))  # written while w1 held the lease
    stale.units.put(_unit(1, "w1"))
    state: dict[str, Any] = {"after": None}
    real_hold = MongoStore._hold

    def hold_then_takeover(self: MongoStore, fence: Fence, session: Any) -> int:
        epoch = real_hold(self, fence, session)  # the check passes: w1 still holds the lease here
        after, state["after"] = state["after"], None
        if after is not None:
            after(FencedStore(self, _take_over(self)))
        return epoch

    monkeypatch.setattr(MongoStore, "_hold", hold_then_takeover)
    return store, stale, state


def test_claims_count_epochs_up_and_requeue_never_resets_them() -> None:
    store = _store()
    _enqueue(store)
    assert _claim(store, "w1").epoch == 1
    assert _take_over(store).epoch == 2
    store._db["runs"].update_one({"run_id": "r1"}, {"$set": {"lease_until": 0.0, "status": "failed"}})
    queue_of(store).requeue("r1")
    assert store.get_run("r1").attempts == 0 and store.get_run("r1").lease_epoch == 2
    assert _claim(store, "w3").epoch == 3


def test_sqlite_claims_count_epochs_too(home) -> None:  # noqa: ANN001
    from domainbench.store import open_store

    store = open_store()
    _enqueue(store)  # type: ignore[arg-type]
    q = queue_of(store)
    assert q.claim("w1", 60).lease_epoch == 1  # type: ignore[union-attr]
    # a fence of an older epoch no longer holds, even under the same worker name
    assert not Fence("r1", "w1", 0).holds(store.get_run("r1").model_dump())
    assert Fence("r1", "w1", 1).holds(store.get_run("r1").model_dump())


def test_a_stale_overwrite_in_the_gap_changes_nothing_the_new_holder_wrote(gap) -> None:  # noqa: ANN001
    store, stale, state = gap
    state["after"] = lambda fresh: fresh.units.put(_unit(0, "w2"))
    with pytest.raises(LeaseLost):
        stale.units.put(_unit(0, "w1-late"))
    assert _by(store) == {0: "w2", 1: "w1"}
    raw = store._db["units"].find_one({"shard": 0})
    assert raw[EPOCH_FIELD] == 2
    # the stale worker is refused from then on by the fence's read itself
    with pytest.raises(LeaseLost):
        stale.units.put(_unit(5, "w1-late"))
    assert _by(store) == {0: "w2", 1: "w1"}


def test_a_stale_delete_in_the_gap_leaves_what_the_new_holder_wrote(gap) -> None:  # noqa: ANN001
    store, stale, state = gap
    state["after"] = lambda fresh: (fresh.units.put(_unit(0, "w2")), fresh.units.put(_unit(2, "w2")))
    stale.units.delete(run_id="r1")  # its check passed before the takeover: it runs, under the epoch's condition
    # what w2 wrote stays; the unit only w1 ever wrote goes (the documented remainder: recomputed on resume)
    assert _by(store) == {0: "w2", 2: "w2"}


def test_a_stale_run_record_write_in_the_gap_is_refused(gap) -> None:  # noqa: ANN001
    store, stale, state = gap
    run = store.get_run("r1")
    state["after"] = lambda fresh: None
    with pytest.raises(LeaseLost):
        stale.put_run(run.model_copy(update={"status": "failed", "error": "stale"}))
    now = store.get_run("r1")
    assert (now.worker, now.status, now.error, now.lease_epoch) == ("w2", "running", None, 2)


def test_a_stale_split_document_leaves_the_new_holders_parts(gap, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    monkeypatch.setattr(mongo_parts, "SPLIT_ABOVE", 2000)
    monkeypatch.setattr(mongo_parts, "MIN_FIELD_BYTES", 100)
    monkeypatch.setattr(mongo_parts, "PART_BYTES", 1000)
    store, stale, state = gap
    state["after"] = lambda fresh: fresh.units.put(_unit(0, "w2", drawn=600))
    with pytest.raises(LeaseLost):
        stale.units.put(_unit(0, "w1-late", drawn=700))
    (unit,) = store.units("r1", shard=0)
    assert unit.params == {"by": "w2", "drawn": list(range(600))}
    parts = list(store._db[PARTS].find({}))
    assert len(parts) > 1 and {p[EPOCH_FIELD] for p in parts} == {2}  # the stale worker's parts were taken back


def test_documents_written_before_epochs_stay_readable_and_are_overwritten() -> None:
    store = _store()
    _enqueue(store)
    old = _unit(0, "old").model_dump(mode="json")
    store._db["units"].insert_one(dict(old))  # as an older domainbench stored it: no epoch
    store._db["runs"].update_one({"run_id": "r1"}, {"$unset": {"lease_epoch": ""}})
    assert _by(store) == {0: "old"}
    fence = _claim(store, "w1")
    FencedStore(store, fence).units.put(_unit(0, "new"))
    assert _by(store) == {0: "new"} and store._db["units"].find_one({"shard": 0})[EPOCH_FIELD] == 1
    # the stored epoch never reaches a record (the record models forbid unknown fields, so reading proves it)
    assert EPOCH_FIELD not in store.units("r1")[0].model_dump() and "_fenced_writes" not in store.get_run("r1").model_dump()


def test_shared_records_carry_no_epoch() -> None:
    # label sets, domains and text embeddings are addressed by their content and shared by runs:
    # comparing one run's epoch with another's would refuse a good write
    assert epoch_field("labelsets") is None and epoch_field("domains") is None
    assert epoch_field("text_embeddings") is None
    assert epoch_field("units") == EPOCH_FIELD and epoch_field("summaries") == EPOCH_FIELD
    assert epoch_field("runs") == "lease_epoch"


@pytest.mark.parametrize(("hello", "expected"), [
    ({"isWritablePrimary": True}, False),  # standalone
    ({"isWritablePrimary": True, "setName": "rs0"}, True),  # replica set member
    ({"isWritablePrimary": True, "msg": "isdbgrid"}, True),  # mongos of a sharded cluster
])
def test_transactions_are_detected_from_hello(hello: dict[str, Any], expected: bool) -> None:
    class Admin:
        def command(self, name: str) -> dict[str, Any]:
            return hello

    class Client:
        admin = Admin()

    assert supports_transactions(Client()) is expected


def test_servers_without_hello_are_asked_is_master() -> None:
    import pymongo

    class Admin:
        def command(self, name: str) -> dict[str, Any]:
            if name == "hello":
                raise pymongo.errors.OperationFailure("no such command: 'hello'", code=59)
            return {"ismaster": True, "setName": "rs0"}

    class Client:
        admin = Admin()

    assert supports_transactions(Client()) is True
    assert supports_transactions(mongomock.MongoClient()) is False


# ----------------------------------------------------------------- the transaction path, recorded


class _Recorder:
    """A MongoDB client over mongomock that reports a replica set and records each operation's session."""

    def __init__(self) -> None:
        self.inner, self.log = mongomock.MongoClient(), []

        class Admin:
            def command(_, name: str) -> dict[str, Any]:  # noqa: N805
                return {"isWritablePrimary": True, "setName": "rs0"}

        self.admin = Admin()

    def __getitem__(self, name: str) -> Any:
        return _Db(self.inner[name], self.log)

    def start_session(self) -> Any:
        return _Session(self.log)

    def close(self) -> None:
        self.inner.close()


class _Db:
    def __init__(self, db: Any, log: list) -> None:
        self.db, self.log = db, log

    def __getitem__(self, name: str) -> Any:
        return _Coll(self.db[name], name, self.log)


class _Coll:
    def __init__(self, coll: Any, name: str, log: list) -> None:
        self.coll, self.name, self.log = coll, name, log

    def __getattr__(self, method: str) -> Any:
        def call(*args: Any, session: Any = None, **kwargs: Any) -> Any:
            self.log.append((self.name, method, session))
            return getattr(self.coll, method)(*args, **kwargs)

        return call


class _Session:
    def __init__(self, log: list) -> None:
        self.log = log

    def __enter__(self) -> _Session:
        return self

    def __exit__(self, *exc: Any) -> None:
        pass

    def with_transaction(self, callback: Any) -> Any:
        self.log.append(("txn", "begin", self))
        try:
            out = callback(self)
        except BaseException:
            self.log.append(("txn", "abort", self))
            raise
        self.log.append(("txn", "commit", self))
        return out


def _transaction_of(log: list) -> list[tuple[str, str, Any]]:
    begin = max(i for i, e in enumerate(log) if e[:2] == ("txn", "begin"))
    return log[begin:]


def test_with_transactions_the_fence_and_the_write_are_one_transaction() -> None:
    client = _Recorder()
    store = _store(client)
    assert store.transactions
    _enqueue(store)
    fence = _claim(store, "w1")
    FencedStore(store, fence).units.put(_unit(0, "w1"))
    txn = _transaction_of(client.log)
    session = txn[0][2]
    # the run document is touched (a write: a concurrent claim conflicts) before the unit is written,
    # and every operation between begin and commit ran in that transaction's session
    assert [e[:2] for e in txn] == [("txn", "begin"), ("runs", "find_one_and_update"), ("units", "replace_one"),
                                   ("txn", "commit")]
    assert all(e[2] is session for e in txn)
    assert store._db["runs"].find_one({"run_id": "r1"})["_fenced_writes"] == 1
    assert _by(store) == {0: "w1"} and store.get_run("r1").worker == "w1"  # the touch never reaches a record


def test_with_transactions_a_lost_lease_aborts_before_anything_is_written() -> None:
    client = _Recorder()
    store = _store(client)
    _enqueue(store)
    stale = FencedStore(store, _claim(store, "w1"))
    _take_over(store)
    with pytest.raises(LeaseLost):
        stale.units.delete(run_id="r1")
    with pytest.raises(LeaseLost):
        stale.units.put(_unit(0, "w1"))
    txn = _transaction_of(client.log)
    assert [e[:2] for e in txn] == [("txn", "begin"), ("runs", "find_one_and_update"), ("txn", "abort")]
    assert store.units("r1") == []


@pytest.mark.parametrize("backend", ["sqlite", "mongo"])
def test_the_holder_deletes_its_whole_run(backend: str, home) -> None:  # noqa: ANN001
    from domainbench.store import open_store

    store = open_store() if backend == "sqlite" else _store()
    _enqueue(store)  # type: ignore[arg-type]
    holder = FencedStore(store, _claim(store, "w1"))  # type: ignore[arg-type]
    holder.units.put(_unit(0, "w1"))
    holder.delete_run("r1")  # the run's record goes last: the fence reads it for every delete before
    assert store.units("r1") == [] and store.get_run("r1") is None

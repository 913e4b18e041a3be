"""The work queue in the store: runs wait as "queued"; a worker claims one under a lease.

Why a lease and not a lock: a worker can die without a word (SIGKILL, a lost machine). Its
claim then runs out, and the next worker that looks claims the run again and resumes it
(finished units are stored, so nothing is recomputed). A live worker renews its lease long
before it ends (``backend/app/worker.py``), and writes nothing once it cannot be sure it still
holds it.

Every state change is atomic per backend: SQLite reads and rewrites the run inside one
``BEGIN IMMEDIATE`` transaction (one writer at a time, across processes); MongoDB uses
``find_one_and_update`` / conditional updates on the run's document.

Lease times are Unix seconds of the claiming machine's clock: machines that share a store
must keep their clocks within a small part of the lease of each other (NTP does).
"""

from __future__ import annotations

import json
import os
import platform
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from domainbench.store.status import run_status
from domainbench.errors import UserInputError
from domainbench.store.collections import Collection
from domainbench.store.records import RunRecord, upgrade
from domainbench.store.fence import HIDDEN, LeaseLost  # noqa: F401 - defined beside the fence, named here too

if TYPE_CHECKING:
    from domainbench.store.base import Store

DEFAULT_LEASE_S = 60.0
#: a run whose worker vanished this often is failed instead of claimed again (it may be what kills them)
MAX_ATTEMPTS = 3
#: statuses (as users see them, ``run_status``) from which a run can be put back into the queue
REQUEUEABLE = ("interrupted", "failed", "cancelled")
#: statuses from which a run can be cancelled: whoever evaluates it stops at its next unit
CANCELLABLE = ("queued", "running")


class DuplicateRunError(UserInputError):
    """The same domain and run configuration is already queued or running."""

    def __init__(self, message: str, run_id: str) -> None:
        super().__init__(message)
        self.run_id = run_id


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


# --------------------------------------------------------------------------- the rules, shared


def claimable(run: RunRecord, now: float) -> bool:
    """Queued, or running under a worker's lease that has run out."""
    if run.status == "queued":
        return True
    return run.status == "running" and run.worker is not None and run.lease_until is not None and run.lease_until < now


def claimed(run: RunRecord, worker: str, now: float, lease_s: float) -> RunRecord:
    """The run as ``worker`` holds it; a run that lost ``MAX_ATTEMPTS`` workers is failed instead."""
    if run.status == "running" and run.attempts >= MAX_ATTEMPTS:
        return run.model_copy(update={
            "status": "failed", "lease_until": None,
            "error": f"its worker stopped without a word {run.attempts} times (last: {run.worker}); "
                     "check the workers' logs and memory, then resume it",
            "lease_epoch": run.lease_epoch + 1,  # the vanished holder's fence no longer matches
        })
    return run.model_copy(update={"status": "running", "worker": worker, "lease_until": now + lease_s,
                                  "attempts": run.attempts + 1, "lease_epoch": run.lease_epoch + 1, "error": None,
                                  **_here()})


def _here() -> dict[str, Any]:
    # the claiming process: the status of a run on this host follows it (``run_status``)
    return {"pid": os.getpid(), "host": platform.node()}


def _same_work(a: RunRecord, b: RunRecord) -> bool:
    # an FMR search and a corruption run of one plan and configuration are different work, as are two kinds
    return (a.domain_id == b.domain_id and a.config == b.config and a.fmr == b.fmr and a.kind == b.kind
            and a.kind_settings == b.kind_settings)


def _dump(run: RunRecord) -> dict[str, Any]:
    # validated again on the way out: a bad field never lands
    return RunRecord.model_validate(run.model_dump()).model_dump(mode="json")


# --------------------------------------------------------------------------- the interface


class RunQueue(ABC):
    """Queue operations on one store's runs; ``queue_of(store)`` gives the backend's."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def _record(self, raw: dict[str, Any]) -> RunRecord:
        doc = upgrade(Collection.RUNS, raw, self.store.description)
        assert doc is not None  # runs always migrate
        return RunRecord.model_validate(doc)

    @abstractmethod
    def enqueue(self, run: RunRecord) -> RunRecord:
        """Store a queued run; ``DuplicateRunError`` when the same work is already queued or running."""

    @abstractmethod
    def claim(self, worker: str, lease_s: float = DEFAULT_LEASE_S) -> RunRecord | None:
        """Atomically take the oldest claimable run for ``worker``; None when there is none."""

    @abstractmethod
    def renew(self, run_id: str, worker: str, lease_s: float = DEFAULT_LEASE_S) -> float | None:
        """Extend ``worker``'s lease; the new expiry, or None when the run is no longer its own."""

    @abstractmethod
    def _modify(self, run_id: str, change: Callable[[RunRecord], RunRecord | None]) -> RunRecord | None:
        """Atomically replace the run with ``change(run)`` (no write when it returns None)."""

    def update_owned(self, run_id: str, worker: str, **fields: Any) -> RunRecord:
        """Update the run only while ``worker`` holds an unexpired lease on it; else ``LeaseLost``."""

        def change(run: RunRecord) -> RunRecord | None:
            if run.worker != worker or (run.lease_until is not None and run.lease_until < time.time()):
                return None
            return run.model_copy(update=fields)

        out = self._modify(run_id, change)
        if out is None:
            raise LeaseLost(f"worker {worker} no longer holds run {run_id}")
        return out

    def requeue(self, run_id: str) -> RunRecord:
        """Put an interrupted or failed run back into the queue; a worker resumes it."""
        seen: list[RunRecord] = []

        def change(run: RunRecord) -> RunRecord | None:
            seen.append(run)
            if run_status(run) not in REQUEUEABLE:
                return None
            return run.model_copy(update={"status": "queued", "queued_at": now_iso(), "worker": None,
                                          "lease_until": None, "attempts": 0, "error": None, "pid": None})

        out = self._modify(run_id, change)
        if out is None:
            if not seen:
                raise UserInputError(f"no run {run_id!r} in {self.store.description}; pick one from the runs table")
            raise UserInputError(f"run {run_id} is {run_status(seen[0])}: only an interrupted, failed or cancelled run "
                                 "can be resumed")
        return out

    def cancel(self, run_id: str) -> RunRecord:
        """Mark a queued or running run "cancelled": no worker claims it, and the process evaluating it
        stops at its next unit (``engine/cancel.py``); finished units are kept, so it can be resumed."""
        seen: list[RunRecord] = []

        def change(run: RunRecord) -> RunRecord | None:
            seen.append(run)
            if run_status(run) not in CANCELLABLE:
                return None
            return run.model_copy(update={"status": "cancelled", "error": None})

        out = self._modify(run_id, change)
        if out is None:
            if not seen:
                raise UserInputError(f"no run {run_id!r} in {self.store.description}; pick one from the runs table")
            raise UserInputError(f"run {run_id} is {run_status(seen[0])}: only a queued or running run can be cancelled")
        return out

    def active(self) -> list[RunRecord]:
        """Runs queued or being worked on (as users see them)."""
        return [r for r in self._candidates() if run_status(r) in ("queued", "running")]

    def pending(self) -> list[RunRecord]:
        """Runs a worker may still take: queued, or held under a lease (a dead holder's run is
        taken again once its lease runs out, so it counts as pending until then)."""
        return [r for r in self._candidates() if r.status == "queued" or r.lease_until is not None]

    @abstractmethod
    def _candidates(self) -> list[RunRecord]:
        """Runs stored as queued or running (what a claim or a duplicate check looks at)."""


# --------------------------------------------------------------------------- SQLite


class SQLiteQueue(RunQueue):
    """One ``BEGIN IMMEDIATE`` transaction per operation: it holds the write lock from the first
    read, so no other process can claim or change the run between our read and our write."""

    _SELECT_OPEN = f"SELECT doc FROM {Collection.RUNS} WHERE json_extract(doc, '$.status') IN ('queued', 'running')"

    def _tx(self, body: Callable[[Any], Any]) -> Any:
        conn = self.store._conn()  # noqa: SLF001 - the queue is the store's own module
        conn.execute("BEGIN IMMEDIATE")
        try:
            out = body(conn)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return out

    @staticmethod
    def _write(conn: Any, run: RunRecord) -> None:
        doc = _dump(run)
        conn.execute(f"INSERT INTO {Collection.RUNS} (run_id, doc) VALUES (?, ?) ON CONFLICT (run_id) DO UPDATE SET doc = excluded.doc",
                     (run.run_id, json.dumps(doc, allow_nan=False)))

    def _open(self, conn: Any) -> list[RunRecord]:
        return [self._record(json.loads(r[0])) for r in conn.execute(self._SELECT_OPEN).fetchall()]

    def _candidates(self) -> list[RunRecord]:
        return self._open(self.store._conn())  # noqa: SLF001

    def enqueue(self, run: RunRecord) -> RunRecord:
        def body(conn: Any) -> RunRecord:
            if conn.execute(f"SELECT 1 FROM {Collection.RUNS} WHERE run_id = ?", (run.run_id,)).fetchone():
                raise UserInputError(f"run id {run.run_id!r} is already used; choose another")
            for other in self._open(conn):
                if _same_work(other, run) and run_status(other) in ("queued", "running"):
                    raise DuplicateRunError(f"the same run is already {run_status(other)}: {other.run_id}", other.run_id)
            self._write(conn, run)
            return run

        return self._tx(body)

    def claim(self, worker: str, lease_s: float = DEFAULT_LEASE_S) -> RunRecord | None:
        def body(conn: Any) -> RunRecord | None:
            now = time.time()
            for run in sorted(self._open(conn), key=lambda r: (r.queued_at or r.created_at, r.run_id)):
                if not claimable(run, now):
                    continue
                taken = claimed(run, worker, now, lease_s)
                self._write(conn, taken)
                if taken.status == "running":
                    return taken
            return None

        return self._tx(body)

    def renew(self, run_id: str, worker: str, lease_s: float = DEFAULT_LEASE_S) -> float | None:
        until = time.time() + lease_s

        def change(run: RunRecord) -> RunRecord | None:
            if run.worker != worker or run.status != "running":
                return None
            return run.model_copy(update={"lease_until": until})

        return until if self._modify(run_id, change) is not None else None

    def _modify(self, run_id: str, change: Callable[[RunRecord], RunRecord | None]) -> RunRecord | None:
        def body(conn: Any) -> RunRecord | None:
            row = conn.execute(f"SELECT doc FROM {Collection.RUNS} WHERE run_id = ?", (run_id,)).fetchone()
            if row is None:
                return None
            new = change(self._record(json.loads(row[0])))
            if new is not None:
                self._write(conn, new)
            return new

        return self._tx(body)


# --------------------------------------------------------------------------- MongoDB


class MongoQueue(RunQueue):
    """Claims with ``find_one_and_update`` (atomic on one document); other changes are
    compare-and-set replaces filtered on the fields the decision was made on."""

    @property
    def _runs(self) -> Any:
        return self.store._db[Collection.RUNS]  # noqa: SLF001 - the queue is the store's own module

    def _candidates(self) -> list[RunRecord]:
        return [self._record(d) for d in self._runs.find({"status": {"$in": ["queued", "running"]}}, HIDDEN)]

    def enqueue(self, run: RunRecord) -> RunRecord:
        # check, then insert: the unique index on run_id stops a reused id; two identical
        # launches in the same few milliseconds could both pass the duplicate check
        for other in self._candidates():
            if _same_work(other, run) and run_status(other) in ("queued", "running"):
                raise DuplicateRunError(f"the same run is already {run_status(other)}: {other.run_id}", other.run_id)
        import pymongo

        try:
            self._runs.insert_one(_dump(run))
        except pymongo.errors.DuplicateKeyError:
            raise UserInputError(f"run id {run.run_id!r} is already used; choose another") from None
        return run

    def claim(self, worker: str, lease_s: float = DEFAULT_LEASE_S) -> RunRecord | None:
        from pymongo import ReturnDocument

        now = time.time()
        expired = {"status": "running", "worker": {"$ne": None}, "lease_until": {"$lt": now}}
        # runs that lost too many workers are failed, not claimed again (see claimed())
        for doc in self._runs.find({**expired, "attempts": {"$gte": MAX_ATTEMPTS}}, HIDDEN):
            run = self._record(doc)
            self._runs.replace_one({"run_id": run.run_id, "worker": run.worker, "lease_until": run.lease_until},
                                   _dump(claimed(run, worker, now, lease_s)))
        doc = self._runs.find_one_and_update(
            {"$or": [{"status": "queued"}, expired]},
            {"$set": {"status": "running", "worker": worker, "lease_until": now + lease_s, "error": None, **_here()},
             "$inc": {"attempts": 1, "lease_epoch": 1}},
            sort=[("queued_at", 1), ("created_at", 1)],
            return_document=ReturnDocument.AFTER,  # no projection: mongomock then returns None
        )
        if doc is None:
            return None
        for field in HIDDEN:
            doc.pop(field, None)
        return self._record(doc)

    def renew(self, run_id: str, worker: str, lease_s: float = DEFAULT_LEASE_S) -> float | None:
        until = time.time() + lease_s
        res = self._runs.update_one({"run_id": run_id, "worker": worker, "status": "running"},
                                    {"$set": {"lease_until": until}})
        return until if res.matched_count == 1 else None

    def _modify(self, run_id: str, change: Callable[[RunRecord], RunRecord | None]) -> RunRecord | None:
        doc = self._runs.find_one({"run_id": run_id}, HIDDEN)
        if doc is None:
            return None
        run = self._record(doc)
        new = change(run)
        if new is None:
            return None
        # compare-and-set: only if nobody changed the fields the decision rested on meanwhile
        guard = {"run_id": run_id, "status": run.status, "worker": run.worker, "pid": run.pid}
        if self._runs.replace_one(guard, _dump(new)).matched_count != 1:
            return None
        return new


def queue_of(store: Store) -> RunQueue:
    from domainbench.store.mongo_store import MongoStore
    from domainbench.store.sqlite_store import SQLiteStore

    if isinstance(store, SQLiteStore):
        return SQLiteQueue(store)
    if isinstance(store, MongoStore):
        return MongoQueue(store)
    raise TypeError(f"{type(store).__name__} has no work queue")

"""The lease fence: a worker's write lands only while it still holds the run's lease.

Checking the lease and then writing leaves a gap: another worker can take the run over in
between, and the stale worker's unit, report or delete lands anyway. So the check is part of the
write, per backend:

- SQLite: the check and the write happen in one ``BEGIN IMMEDIATE`` transaction, which holds the
  database's write lock, so no claim can slip in between. Atomic.
- MongoDB with transactions (a replica set or a sharded cluster): the run document is read with
  the fence's condition and touched (a write, so a concurrent claim conflicts with it), and the
  document is written, in one transaction (``session.with_transaction``). Atomic: a claim either
  lands before (the check fails, nothing is written) or waits until the write committed.
- MongoDB standalone (no transactions): fencing tokens. Every claim increments the run's
  ``lease_epoch`` (never reset); the worker's fence carries the epoch it claimed. Right before
  each write the run document is read with the fence's condition (the gap is this read and the
  write, milliseconds), and every record of the run is written stamped with the writer's epoch
  (``_fence``) under the condition "no ``_fence``, or one not above mine" (an upsert: a refused
  condition meets the unique key and fails, the write is refused: ``LeaseLost``); deletes carry
  the same condition. So a stale writer whose write slips into the gap can never overwrite or
  delete what a newer lease holder wrote. What remains: within that gap it can still rewrite or
  delete records written under its own or an older epoch that the new holder has not rewritten
  (the new holder keeps finished units rather than recomputing them; a rewritten unit holds the
  same numbers, a deleted one is recomputed on the next resume). Records shared by runs and
  addressed by their content (domains, label sets, text embeddings) carry no epoch: a write of
  one holds the same content whoever writes it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from domainbench.errors import UserInputError
from domainbench.store.collections import KEY_FIELDS, Collection

#: the field of a MongoDB document holding the lease epoch of the worker that wrote it
EPOCH_FIELD = "_fence"
#: a counter on a MongoDB run document that each fenced write inside a transaction increments,
#: so a concurrent claim conflicts with the transaction instead of slipping past its read
TOUCH_FIELD = "_fenced_writes"
#: fields the MongoDB store keeps for itself: never part of a record read back
HIDDEN = {"_id": False, EPOCH_FIELD: False, TOUCH_FIELD: False}


class LeaseLost(RuntimeError):
    """This worker no longer holds the run: its lease ran out or another worker claimed it."""


@dataclass(frozen=True)
class Fence:
    """Writes on behalf of ``worker``, which must hold the lease on ``run_id``.

    ``epoch`` is the run's ``lease_epoch`` the worker's claim set; None: the one stored when the
    write is checked (a fence made without a claim at hand).
    """

    run_id: str
    worker: str
    epoch: int | None = None

    def holds(self, run: dict[str, Any] | None, now: float | None = None) -> bool:
        """Whether the stored run document ``run`` shows the lease held by this fence's worker."""
        # the status is not part of it: a cancelled run's worker finishes its unit and stops by itself
        if run is None or run.get("worker") != self.worker:
            return False
        if self.epoch is not None and (run.get("lease_epoch") or 0) != self.epoch:
            return False
        until = run.get("lease_until")
        return until is None or until >= (time.time() if now is None else now)

    def mongo_filter(self, now: float | None = None) -> dict[str, Any]:
        """The same condition as ``holds``, as a MongoDB query on the runs collection."""
        now = time.time() if now is None else now
        filt: dict[str, Any] = {"run_id": self.run_id, "worker": self.worker,
                                "$or": [{"lease_until": None}, {"lease_until": {"$gte": now}}]}
        if self.epoch is not None:
            # a run stored before epochs existed has none: it counts as 0
            filt["lease_epoch"] = self.epoch if self.epoch else {"$in": [0, None]}
        return filt

    def lost(self) -> LeaseLost:
        return LeaseLost(f"worker {self.worker} no longer holds run {self.run_id} (lease ran out or taken over): "
                         "its write was not applied")


@dataclass(frozen=True)
class ProcessFence(Fence):
    """Writes on behalf of the process that runs ``run_id`` from a terminal (no worker, no lease):
    they land only while the run record still names this process (``pid`` on ``host``).

    ``domainbench rm --force`` clears those fields before it deletes anything, so a run deleted
    while it runs stops writing at its next write instead of leaving records that no listing shows
    (and that a new run of the same id would adopt); ``--resume`` by another process fences this one too.
    """

    pid: int = 0
    host: str = ""

    def holds(self, run: dict[str, Any] | None, now: float | None = None) -> bool:
        return run is not None and run.get("pid") == self.pid and run.get("host") == self.host

    def mongo_filter(self, now: float | None = None) -> dict[str, Any]:
        return {"run_id": self.run_id, "pid": self.pid, "host": self.host}

    def lost(self) -> LeaseLost:
        return RunFencedOut(f"run {self.run_id} was deleted (or resumed by another process) while this process ran it: "
                            "nothing more was written")


@dataclass(frozen=True)
class LiveRunFence(Fence):
    """A Ray actor's writes: its driver's fence (a worker's lease or a terminal's ``ProcessFence``), and the run
    still "running". An actor's call can outlive its driver's view of the run (a call in flight when the run was
    finished, cancelled or deleted): its late units are refused, never added to a terminal run."""

    inner: Fence | None = None

    @classmethod
    def around(cls, fence: Fence) -> LiveRunFence:
        return cls(fence.run_id, fence.worker, fence.epoch, inner=fence)

    def holds(self, run: dict[str, Any] | None, now: float | None = None) -> bool:
        assert self.inner is not None
        return run is not None and run.get("status") == "running" and self.inner.holds(run, now)

    def mongo_filter(self, now: float | None = None) -> dict[str, Any]:
        assert self.inner is not None
        return {**self.inner.mongo_filter(now), "status": "running"}

    def lost(self) -> LeaseLost:
        assert self.inner is not None
        return self.inner.lost()


class RunFencedOut(LeaseLost, UserInputError):
    """The run this process evaluates was deleted or taken over by another ``--resume`` (one line, exit 2)."""


def fence_out(store: Any, run_id: str) -> None:
    """Stop whoever writes ``run_id`` now, before it is deleted: its process fence and its worker's
    lease no longer match the record (a write in flight lands before this or is refused)."""
    run = store.get_run(run_id)
    if run is not None:
        # "failed", not "running": should the delete be cut short, the run is not left "running" with nobody running it
        store.update_run(run_id, pid=None, host=None, worker=None, lease_until=None, lease_epoch=run.lease_epoch + 1,
                         **({"status": "failed", "error": "deleted while it ran"} if run.status == "running" else {}))


def epoch_field(collection: str) -> str | None:
    """Where a document of ``collection`` holds its writer's epoch; None for records shared by runs."""
    if collection == Collection.RUNS:
        return "lease_epoch"  # the run's own: set by each claim, kept by the holder's writes
    fields = KEY_FIELDS.get(collection)  # type: ignore[call-overload]
    return EPOCH_FIELD if fields and fields[0] == "run_id" else None


def not_newer(field: str, epoch: int) -> dict[str, Any]:
    """The MongoDB condition "written by no newer lease holder than ``epoch``" (none written: old documents)."""
    return {"$or": [{field: None}, {field: {"$lte": epoch}}]}

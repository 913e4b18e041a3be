"""The lease fence: a worker's write lands only while it still holds the run's lease.

Checking the lease and then writing leaves a gap: another worker can take the run over in
between, and the stale worker's unit, report or delete lands anyway. So the check is part of the
write: in SQLite both happen in one ``BEGIN IMMEDIATE`` transaction (which holds the database's
write lock, so no claim can slip in between); in MongoDB the run document is read with the
fence's condition right before each write (see ``MongoStore``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any


class LeaseLost(RuntimeError):
    """This worker no longer holds the run: its lease ran out or another worker claimed it."""


@dataclass(frozen=True)
class Fence:
    """Writes on behalf of ``worker``, which must hold the lease on ``run_id``."""

    run_id: str
    worker: str

    def holds(self, run: dict[str, Any] | None, now: float | None = None) -> bool:
        """Whether the stored run document ``run`` shows the lease held by this fence's worker."""
        # the status is not part of it: a cancelled run's worker finishes its unit and stops by itself
        if run is None or run.get("worker") != self.worker:
            return False
        until = run.get("lease_until")
        return until is None or until >= (time.time() if now is None else now)

    def mongo_filter(self, now: float | None = None) -> dict[str, Any]:
        """The same condition as ``holds``, as a MongoDB query on the runs collection."""
        now = time.time() if now is None else now
        return {"run_id": self.run_id, "worker": self.worker,
                "$or": [{"lease_until": None}, {"lease_until": {"$gte": now}}]}

    def lost(self) -> LeaseLost:
        return LeaseLost(f"worker {self.worker} no longer holds run {self.run_id} (lease ran out or taken over): "
                         "its write was not applied")


"""Stopping a run the user cancelled (the UI's Cancel button): the engine looks between units.

A cancel only marks the stored run "cancelled" (``RunQueue.cancel``); whoever evaluates the run
notices at its next finished unit and stops there. Units already written stay, so the run can be
resumed later exactly like an interrupted one.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from domainbench.errors import UserInputError

if TYPE_CHECKING:
    from domainbench.store import Store

#: seconds between two looks at the stored status: one small read, not one per unit of a fast run
CHECK_EVERY_S = 1.0


class RunCancelled(UserInputError):
    """The run was cancelled while it was being evaluated."""


class CancelWatch:
    """Reads the run's stored status between units (at most every ``CHECK_EVERY_S``)."""

    def __init__(self, store: Store, run_id: str) -> None:
        self.store, self.run_id = store, run_id
        self._next = 0.0

    def check(self, now: bool = False) -> None:
        """Raise ``RunCancelled`` if the run was cancelled; ``now``: look even if the last look was recent."""
        t = time.monotonic()
        if t < self._next and not now:
            return
        self._next = t + CHECK_EVERY_S
        run = self.store.get_run(self.run_id)
        if run is not None and run.status == "cancelled":
            raise RunCancelled(f"run {self.run_id} was cancelled; its finished units are kept: resume it with "
                               f"`domainbench run --resume {self.run_id}` or the Resume button in the UI")

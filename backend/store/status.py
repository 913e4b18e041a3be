"""A run's status as a user should see it (no torch import: the UI and `ls` use it; the queue decides by it)."""

from __future__ import annotations

import os
import platform
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from domainbench.store.records import RunRecord


def run_status(run: RunRecord) -> str:
    """The stored status, except that a "running" run whose process is gone is "interrupted".

    A run killed hard (SIGKILL, power loss) cannot mark itself; its process id and host are
    stored, so any process on the same host can tell that nobody is working on it any more; a
    run a worker holds (``backend/store/queue.py``) is interrupted once its lease has run out.
    """
    status = run.status
    if status == "running" and run.lease_until is not None and run.lease_until < time.time():
        return "interrupted"  # its worker stopped renewing the lease: the next worker to look resumes it
    if status != "running" or run.host != platform.node() or not run.pid:
        return status
    try:
        os.kill(run.pid, 0)
    except ProcessLookupError:
        return "interrupted"
    except PermissionError:  # alive, but another user's
        pass
    return status

"""A run's status as a user should see it (no torch import: the UI and `ls` use it)."""

from __future__ import annotations

import os
import platform
from typing import Any


def run_status(run: dict[str, Any]) -> str:
    """The stored status, except that a "running" run whose process is gone is "interrupted".

    A run killed hard (SIGKILL, power loss) cannot mark itself; its process id and host are
    stored, so any process on the same host can tell that nobody is working on it any more.
    """
    status = str(run.get("status", "?"))
    if status != "running" or run.get("host") != platform.node() or not run.get("pid"):
        return status
    try:
        os.kill(int(run["pid"]), 0)
    except ProcessLookupError:
        return "interrupted"
    except PermissionError:  # alive, but another user's
        pass
    return status

"""Idle workers say they are alive: one small file per worker under ``$DOMAINBENCH_HOME/workers/``,
rewritten on every poll of the queue, so the UI can tell "a worker is waiting" from "nobody will take
this run" before anything is queued.

A worker holding a run is seen through its lease (the run record); this beacon covers the idle
time in between. It is local to the machine's home directory: a worker elsewhere (another
machine on the same MongoDB) is seen only through the runs it holds.
"""

from __future__ import annotations

import json
import os
import platform
import time
from dataclasses import dataclass
from pathlib import Path

#: a beat older than this many polls (and at least ``MIN_STALE_S``) means the worker is gone
STALE_POLLS = 3
MIN_STALE_S = 10.0


@dataclass(frozen=True)
class Beat:
    name: str
    pid: int
    host: str
    store: str
    at: float
    poll_s: float

    def fresh(self, now: float) -> bool:
        return now - self.at <= max(MIN_STALE_S, STALE_POLLS * self.poll_s)


def _dir(home: Path) -> Path:
    return Path(home) / "workers"


def _file(home: Path, name: str) -> Path:
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)[:100] or "worker"
    return _dir(home) / f"{safe}.json"


def beat(home: Path, name: str, store: str, poll_s: float) -> None:
    """Say that worker ``name`` watches ``store`` (its description) now; never raises (a full or read-only
    home must not stop a worker)."""
    path = _file(home, name)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"name": name, "pid": os.getpid(), "host": platform.node(), "store": store,
                                   "at": time.time(), "poll_s": float(poll_s)}))
        tmp.replace(path)  # atomic: a reader never sees half a file
    except OSError:
        pass


def clear(home: Path, name: str) -> None:
    try:
        _file(home, name).unlink(missing_ok=True)
    except OSError:
        pass


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


def alive(home: Path, store: str, now: float | None = None) -> list[Beat]:
    """The workers that watch ``store`` and beat recently (on this host: whose process still exists), by name."""
    now = time.time() if now is None else now
    out = []
    folder = _dir(home)
    if not folder.is_dir():
        return []
    for path in sorted(folder.glob("*.json")):
        try:
            b = Beat(**json.loads(path.read_text()))
        except (OSError, ValueError, TypeError):
            continue  # a file being replaced, or not one of ours
        if b.store != store or not b.fresh(now):
            continue
        if b.host == platform.node() and not _pid_alive(b.pid):
            continue  # killed without a goodbye: its last beat is not a live worker
        out.append(b)
    return out

"""Progress and liveness that tell the truth: images evaluated per cell (each cell's own n), units
stored, and whether anyone is working on the run.

A cell counts as complete only when it has evaluated every image of the run's dataset; a cell with
some of its shards stored is partial, whatever number of units it has.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from datetime import datetime

from domainbench.records.report import RunReport
from domainbench import query
from domainbench.query import RunRecord, Store

#: the environment variable through which `domainbench ui` tells the pages its built-in worker's process
UI_WORKER_ENV = "DOMAINBENCH_UI_WORKER_PID"
#: seconds a queued run may wait before the page says no worker seems to take it
WAIT_WARNING_S = 15.0
NO_WORKER = ("no worker is running: start one with `domainbench worker`, or launch from here with the built-in "
             "worker (`domainbench ui` starts one beside the UI)")


@dataclass(frozen=True)
class Progress:
    units: int
    images_done: int
    images_planned: int
    cells_complete: int
    cells_total: int
    n_min: int
    n_max: int

    @property
    def share(self) -> float:
        return min(1.0, self.images_done / self.images_planned) if self.images_planned else 0.0

    def line(self) -> str:
        n = f"{self.n_min:,}" if self.n_min == self.n_max else f"{self.n_min:,}–{self.n_max:,}"
        return (f"{self.units:,} units stored; {self.images_done:,} of {self.images_planned:,} image evaluations "
                f"({100 * self.share:.0f} %); {self.cells_complete} of {self.cells_total} cells complete; "
                f"images per cell: {n}")


def progress_of(run: RunRecord, report: RunReport | None, units: int, cells_total: int) -> Progress:
    """From the stored report's cells (their actual n): what the run meant to evaluate. A cell plans the dataset's
    images, except a real-shift cell (the user's own folder: its own images) and, once an adaptive run is finished, a
    cell it stopped early (its images are what it meant to evaluate); a cell not stored yet plans the dataset's."""
    from domainbench.records.config import SHIFT_PREFIX

    size = run.dataset.size if run.dataset else 0
    stopped = bool(run.config.adaptive) and run.status == "done"
    cells = [c for m in (report.models if report else []) for c in ([m.clean] if m.clean else []) + list(m.cells)]
    ns = [c.n + c.n_unreadable for c in cells]
    planned = [n if stopped or c.corruption.startswith(SHIFT_PREFIX) or not size else size for c, n in zip(cells, ns)]
    complete = sum(1 for n, p in zip(ns, planned) if p and n >= p)
    return Progress(units=units, images_done=sum(min(n, p) if p else n for n, p in zip(ns, planned)),
                    images_planned=sum(planned) + max(0, cells_total - len(cells)) * size, cells_complete=complete,
                    cells_total=cells_total, n_min=min(ns, default=0), n_max=max(ns, default=0))


@dataclass(frozen=True)
class UnitProgress:
    """Units stored of units planned (a unit: one model × cell × shard of images), from the store's keys only."""

    done: int
    planned: int
    #: False when the shard size was chosen automatically and no stored key shows the last shard yet:
    #: ``planned`` is then a lower bound (the shards seen so far)
    exact: bool

    @property
    def share(self) -> float:
        return min(1.0, self.done / self.planned) if self.planned else 0.0

    def text(self) -> str:
        return f"{self.done:,} of {'' if self.exact else '≥ '}{self.planned:,} units"


def unit_progress(store: Store, run: RunRecord) -> UnitProgress:
    """Progress counted in units, never in cells: a cell with one of its shards stored is not done.

    The shards per cell follow from the image count and the run's shard size; with an automatic
    shard size (chosen from the images' pixels when the run starts) the highest stored shard tells
    how many there are at least, and the count says so.
    """
    from domainbench.query import done_cells, expected_cells, unit_keys

    if run.kind == "clip":  # one unit per (model, cell), every clip's frames in it: no shards
        return UnitProgress(done=done_cells(store, run), planned=expected_cells(run), exact=True)
    keys = unit_keys(store, run)
    cells = expected_cells(run)  # an FMR run: one search per model
    size = run.dataset.size if run.dataset else None
    shard_size = run.fmr.shard_size if run.fmr is not None else run.config.shard_size
    seen = max((k[-1] for k in keys), default=-1) + 1
    # a real shift's cell has its own images (their own shards): the count is then a bound, not exact
    if size and shard_size and not getattr(run.config, "adaptive", False) and not run.domain.shift:
        shards, exact = max(1, math.ceil(size / shard_size)), True
    else:
        shards, exact = max(seen, 1), False
    return UnitProgress(done=len(keys), planned=cells * shards, exact=exact)


def _seconds_since(iso: str | None) -> float | None:
    if not iso:
        return None
    try:
        return time.time() - datetime.fromisoformat(iso).timestamp()
    except ValueError:
        return None


def builtin_worker_alive() -> bool | None:
    """Whether the worker `domainbench ui` started is alive; None when this UI was started otherwise."""
    from domainbench.runtime.settings import Settings

    pid = Settings.from_env().ui_worker_pid
    if not pid or not pid.isdigit():
        return None
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def worker_alive(store: Store, now: float | None = None) -> bool:
    """Whether any worker would pick a queued run up now (as :func:`workers_status` counts them)."""
    from domainbench.runtime import heartbeat
    from domainbench.runtime.settings import Settings

    now = time.time() if now is None else now
    if builtin_worker_alive():
        return True
    if any(r.worker and r.lease_until is not None and r.lease_until > now and r.status == "running"
           for r in query.list_runs(store)):
        return True
    return bool(heartbeat.alive(Settings.from_env().home, store.description, now))


def workers_status(store: Store, now: float | None = None) -> tuple[str, str]:
    """(level, message): which workers are alive for this store, even when nothing is queued.

    Alive: a worker holding a run under a lease that has not run out, a worker whose heartbeat is
    recent (``domainbench.runtime.heartbeat``: idle workers on this machine), or the UI's built-in worker.
    """
    from domainbench.runtime import heartbeat
    from domainbench.runtime.settings import Settings

    now = time.time() if now is None else now
    runs = query.list_runs(store)
    holding = {r.worker: r.run_id for r in runs
               if r.worker and r.lease_until is not None and r.lease_until > now and r.status == "running"}
    waiting = sum(1 for r in runs if r.status == "queued")
    beats = {b.name for b in heartbeat.alive(Settings.from_env().home, store.description, now)}
    builtin = builtin_worker_alive()
    names = sorted(beats | set(holding))
    if not names and not builtin:
        # a warning only while a run waits for one; otherwise it is a fact to know before launching
        text = ("the UI's built-in worker has stopped; " if builtin is False else "") + NO_WORKER
        return ("warning", f"{text} ({waiting} run(s) are waiting)") if waiting else ("info", text)
    code = lambda t: "`" + str(t).replace("`", "'") + "`"  # noqa: E731 - a name shown literally in Markdown
    parts = [f"{code(n)} (working on {code(holding[n])})" if n in holding else f"{code(n)} (idle)" for n in names]
    if builtin and not names:
        parts.append("the UI's built-in worker (starting)")
    return "info", f"{len(parts)} worker(s) alive: " + ", ".join(parts)


def liveness(run: RunRecord, status: str, now: float | None = None) -> tuple[str, str] | None:
    """(level, message) about who works on the run: "info" or "warning"; None for a finished run."""
    now = time.time() if now is None else now
    builtin = builtin_worker_alive()
    if status == "running":
        if run.worker and run.lease_until is not None:
            return "info", f"worker {run.worker} is working on it (its lease runs {max(0.0, run.lease_until - now):.0f} s more)"
        return "info", f"process {run.pid} on {run.host} is working on it (started from a terminal)"
    if status == "queued":
        if builtin is False:
            return "warning", "the UI's built-in worker has stopped; " + NO_WORKER
        waited = _seconds_since(run.queued_at)
        if waited is not None and waited > WAIT_WARNING_S and not builtin:
            return "warning", f"no worker has taken this run in {waited:.0f} s; if {NO_WORKER}"
        return "info", "waiting for a worker" + (" (the UI's built-in worker is running)" if builtin else "")
    if status == "interrupted":
        if run.lease_until is not None:
            return "warning", ("its worker stopped renewing its lease: the next worker that looks takes it over and "
                               "resumes it; if " + NO_WORKER)
        return "warning", "its process is gone; resume it (button above or `domainbench run --resume`)"
    return None

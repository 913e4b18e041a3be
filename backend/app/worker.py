"""``domainbench worker``: claim queued runs from the store, evaluate them, renew the lease.

While it evaluates a run, a worker
- renews its lease from a background thread every quarter of the lease, so a slow unit or a
  long model load never lets it run out while the worker is alive;
- writes through :class:`OwnedStore`, which refuses every write once the worker cannot be
  sure it still holds the run (its last renewal is older than the lease, or another worker
  holds it): a worker that was paused past its lease stops instead of racing the worker
  that took the run over, so no unit is computed by two workers.
"""

from __future__ import annotations

import os
import platform
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from domainbench.runtime import heartbeat
from domainbench.engine.cancel import RunCancelled
from domainbench.engine.executor_options import ExecutorOptions
from domainbench.errors import UserInputError
from domainbench.runtime.settings import Settings
from domainbench.store import Store
from domainbench.store.fence import Fence
from domainbench.store.fenced_store import FencedStore
from domainbench.store.queue import DEFAULT_LEASE_S, LeaseLost, RunQueue, now_iso, queue_of
from domainbench.store.records import RunRecord

#: a write needs at least this much of the lease left: room for the write itself and clock skew
WRITE_MARGIN = 0.1


def worker_name() -> str:
    return f"{platform.node()}:{os.getpid()}:{uuid.uuid4().hex[:4]}"


class Lease:
    """This worker's hold on one run: renewed by a thread, checked before every write."""

    def __init__(self, queue: RunQueue, run: RunRecord, worker: str, lease_s: float) -> None:
        assert run.lease_until is not None
        self.queue, self.run_id, self.worker, self.lease_s = queue, run.run_id, worker, lease_s
        self.until = run.lease_until
        self.epoch = run.lease_epoch  # this claim's fencing token (``domainbench.store.fence``)
        self.lost = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._renew_loop, name=f"lease-{run.run_id}", daemon=True)

    def __enter__(self) -> Lease:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()

    def _renew_loop(self) -> None:
        while not self._stop.wait(self.lease_s / 4):
            try:
                until = self.queue.renew(self.run_id, self.worker, self.lease_s)
            except Exception:  # a store hiccup: try again next time; the write fence keeps us safe meanwhile
                continue
            if until is None:
                self.lost = True
                return
            self.until = until

    def check(self) -> None:
        if self.lost or time.time() > self.until - WRITE_MARGIN * self.lease_s:
            raise LeaseLost(f"worker {self.worker} no longer holds run {self.run_id} (lease ran out or taken over); "
                            "it stops and leaves the run to the worker that holds it")

    def update(self, **fields: Any) -> RunRecord:
        self.check()
        return self.queue.update_owned(self.run_id, self.worker, **fields)


class OwnedStore(FencedStore):
    """The store as the engine sees it while this worker holds a run: writes only under the lease.

    Its repositories (``units``, ``threat``, ...) write through the methods below, so they are fenced too.
    """

    def __init__(self, store: Store, lease: Lease) -> None:
        # the store checks the fence inside the write itself: a takeover between check and write cannot slip in
        super().__init__(store, Fence(lease.run_id, lease.worker, lease.epoch))
        self._lease = lease

    def _before_write(self) -> None:
        self._lease.check()  # stop early once the lease's clock ran out, before the store is asked

    def update_run(self, run_id: str, **fields: Any) -> RunRecord:
        if run_id != self._lease.run_id:
            raise LeaseLost(f"a worker holding run {self._lease.run_id} may not change run {run_id}")
        return self._lease.update(**fields)


class WorkerEvents:
    """Engine events as log lines (a worker has no terminal to draw a bar on)."""

    def __init__(self, say: Callable[[str], None], run_id: str) -> None:
        self.say, self.run_id = say, run_id
        self.total = self.done = 0
        self._last = 0.0

    def start(self, total_units: int, done_units: int) -> None:
        self.total, self.done = total_units, done_units
        self.say(f"run {self.run_id}: {total_units} units, {done_units} already stored")

    def advance(self, units: int, images: int) -> None:
        self.done += units
        if time.monotonic() - self._last > 10 or self.done == self.total:
            self._last = time.monotonic()
            self.say(f"run {self.run_id}: {self.done}/{self.total} units")

    def message(self, text: str) -> None:
        self.say(f"run {self.run_id}: {text}")


class Worker:
    def __init__(self, store: Store, name: str | None = None, lease_s: float = DEFAULT_LEASE_S, poll_s: float = 2.0,
                 say: Callable[[str], None] = print, executor: ExecutorOptions | None = None) -> None:
        if lease_s <= 0 or poll_s <= 0:
            raise UserInputError(f"--lease ({lease_s}) and --poll ({poll_s}) must be positive numbers of seconds")
        self.store, self.queue = store, queue_of(store)
        self.name = name or worker_name()
        self.lease_s, self.poll_s, self.say = lease_s, poll_s, say
        self.executed: list[str] = []
        self.executor = executor or ExecutorOptions()

    def serve(self, until_idle: bool = False, max_runs: int | None = None) -> int:
        """Claim and run until stopped (Ctrl-C, SIGTERM); with ``until_idle``, until no run is
        queued or held by another live worker. Returns the number of runs taken."""
        self.say(f"worker {self.name} watching {self.store.description} (lease {self.lease_s:g} s)")
        home = Settings.from_env().home
        try:
            while max_runs is None or len(self.executed) < max_runs:
                # idle or between runs: the UI sees this worker alive (domainbench.runtime.heartbeat)
                heartbeat.beat(home, self.name, self.store.description, self.poll_s)
                if self.run_one():
                    continue
                if until_idle and not self.queue.pending():
                    break
                time.sleep(self.poll_s)
        finally:
            heartbeat.clear(home, self.name)
        return len(self.executed)

    def run_one(self) -> bool:
        run = self.queue.claim(self.name, self.lease_s)
        if run is None:
            return False
        self.executed.append(run.run_id)
        self.execute(run)
        return True

    def execute(self, run: RunRecord) -> None:
        from domainbench import api

        self.say(f"run {run.run_id}: claimed (attempt {run.attempts})")
        with Lease(self.queue, run, self.name, self.lease_s) as lease:
            t0 = time.perf_counter()
            try:
                # every queued run, whatever its kind, is the Python API's resume (the engine finds the kind by
                # the run record), on this worker's executor and through its lease fence
                done = api.resume(run.run_id, executor=self.executor, store=OwnedStore(self.store, lease),  # type: ignore[arg-type]
                                  events=WorkerEvents(self.say, run.run_id))
            except RunCancelled:
                self._release(lease)  # the status stays "cancelled"; its finished units are kept
                self.say(f"run {run.run_id}: cancelled; stopped after its finished units")
                return
            except LeaseLost as e:
                self.say(f"run {run.run_id}: {e}")
                return
            except KeyboardInterrupt:
                # stopping the worker (Ctrl-C, SIGTERM) hands the run back: the next worker resumes it
                self._release(lease, status="queued", queued_at=now_iso(), worker=None, pid=None)
                self.say(f"run {run.run_id}: worker stopped; the run is back in the queue")
                raise
            except Exception as e:
                # the engine marks failures inside its loop; a bad dataset or model fails before it
                self._release(lease, status="failed", error=f"{type(e).__name__}: {e}"[:500])
                self.say(f"run {run.run_id}: failed: {e}")
                return
            s = done.stats
            assert s is not None
            self._release(lease)
            self.say(f"run {run.run_id}: done: {s.computed_units} units computed, {s.skipped_units} already stored, "
                     f"{time.perf_counter() - t0:.1f} s")

    def _release(self, lease: Lease, **fields: Any) -> None:
        try:
            lease.update(lease_until=None, **fields)
        except LeaseLost as e:
            self.say(f"run {lease.run_id}: {e}")

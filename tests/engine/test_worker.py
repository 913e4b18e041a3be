"""`domainbench worker` processes on one store: every queued run done once, no unit computed
twice, and a worker killed with SIGKILL has its run resumed by another after the lease."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from domainbench.records.config import CorruptionChoice, DomainConfig, RunConfig
from domainbench.service.launch import enqueue_run
from domainbench.store import open_store

ROOT = Path(__file__).resolve().parents[2]
# the worker CLI with the fake model backend registered (the fake lives in the tests)
LAUNCHER = (
    f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); import fake_models; "
    "from domainbench.app.cli import main; sys.argv = ['domainbench'] + sys.argv[1:]; main()"
)
DOMAIN = DomainConfig(domain="worker test", corruptions=[CorruptionChoice(name="brightness", severities=[1, 3])])


def cfg(seed: int, limit: int = 20, model: str = "fake:slow") -> RunConfig:
    return RunConfig(models=[model], limit=limit, shard_size=10, workers=0, stability=False, threat=False, seed=seed)


def start_worker(home: Path, name: str, log: Path, *args: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "DOMAINBENCH_HOME": str(home), "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    with open(log, "wb") as out:
        return subprocess.Popen([sys.executable, "-c", LAUNCHER, "worker", "--name", name, "--poll", "0.2", *args],
                                cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)


def wait_for(condition, timeout: float, what: str) -> None:  # noqa: ANN001
    deadline = time.time() + timeout
    while not condition():
        if time.time() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.1)


def done_lines(log: Path) -> dict[str, tuple[int, int]]:
    """run id -> (units computed, units already stored) from a worker's log."""
    pat = re.compile(r"run (\S+): done: (\d+) units computed, (\d+) already stored")
    return {m[1]: (int(m[2]), int(m[3])) for m in pat.finditer(log.read_text())}


def test_two_workers_run_six_queued_runs_exactly_once(home: Path, tmp_path: Path) -> None:
    store = open_store()
    logs = [tmp_path / "w1.log", tmp_path / "w2.log"]
    workers = [start_worker(home, f"w{i + 1}", logs[i], "--lease", "20") for i in range(2)]
    try:
        # both workers watch the queue before anything is queued, so both compete for every run
        wait_for(lambda: all("watching" in log.read_text() for log in logs), 120, "both workers to start")
        runs = [enqueue_run(store, DOMAIN, cfg(seed)).run_id for seed in range(6)]
        wait_for(lambda: all(store.get_run(r).status in ("done", "failed") for r in runs), 240, "the 6 runs")
        # the store says "done" before the worker logs it: stop the workers only once both logs say so
        wait_for(lambda: set(runs) <= {*done_lines(logs[0]), *done_lines(logs[1])}, 60, "the workers' done lines")
    finally:
        for w in workers:
            w.send_signal(signal.SIGTERM)
        for w in workers:
            w.wait(timeout=60)
    texts = [log.read_text() for log in logs]
    claims = Counter(m for t in texts for m in re.findall(r"run (\S+): claimed", t))
    assert claims == Counter({r: 1 for r in runs}), texts  # every run taken once, by one worker
    assert all(claims_of := [len(re.findall(r": claimed", t)) for t in texts]), claims_of  # both took work
    per_run = 3 * 2  # (clean + 2 severities) × 2 shards of 10 images, one model
    done = {**done_lines(logs[0]), **done_lines(logs[1])}
    assert done == {r: (per_run, 0) for r in runs}  # nothing recomputed, nothing skipped
    for r in runs:
        run = store.get_run(r)
        assert run.status == "done" and run.attempts == 1 and run.lease_until is None
        assert run.dataset is not None and run.dataset.size == 20
        assert len(store.keys("units", run_id=r)) == per_run
        assert store.get_report(r) is not None


def test_a_killed_workers_run_is_resumed_by_another_after_the_lease(home: Path, tmp_path: Path) -> None:
    store = open_store()
    total = 3 * 6  # (clean + 2 severities) × 6 shards
    run_id = enqueue_run(store, DOMAIN, cfg(0, limit=60)).run_id
    a = start_worker(home, "A", tmp_path / "a.log", "--lease", "4")
    try:
        wait_for(lambda: len(store.keys("units", run_id=run_id)) >= 4, 180, "worker A to store 4 units")
    finally:
        a.send_signal(signal.SIGKILL)
        a.wait(timeout=30)
    before = {(u.model, u.corruption, u.severity, u.shard): u.computed_at for u in store.units(run_id)}
    held = store.get_run(run_id)
    assert held.status == "running" and held.worker == "A" and held.attempts == 1
    assert 0 < len(before) < total, f"A was to be killed mid-run, it had stored {len(before)} of {total} units"

    b = start_worker(home, "B", tmp_path / "b.log", "--lease", "4", "--until-idle")
    assert b.wait(timeout=240) == 0, (tmp_path / "b.log").read_text()
    log = (tmp_path / "b.log").read_text()
    run = store.get_run(run_id)
    assert run.status == "done" and run.worker == "B" and run.attempts == 2, log
    assert done_lines(tmp_path / "b.log") == {run_id: (total - len(before), len(before))}, log
    after = {(u.model, u.corruption, u.severity, u.shard): u.computed_at for u in store.units(run_id)}
    assert len(after) == total
    assert {k: after[k] for k in before} == before  # A's units were kept, not recomputed

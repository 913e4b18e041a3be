"""kill -9 of a parent leaves no process behind: corruption pool workers and the UI's run worker end too."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in state  # a zombie has ended; only its exit status waits to be read


def _parent(tmp_path: Path, body: str) -> tuple[subprocess.Popen[str], list[int]]:
    """A parent process running ``body``, which prints its children's pids on one line; returns them."""
    script = tmp_path / "parent.py"
    script.write_text(textwrap.dedent(body))
    env = {**os.environ, "DOMAINBENCH_HOME": str(tmp_path / "home"), "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, str(script)], env=env, stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    line = proc.stdout.readline()  # type: ignore[union-attr]
    assert line.strip(), "the parent printed no child pids"
    return proc, [int(p) for p in line.split()]


def _gone_after_kill(proc: subprocess.Popen[str], pids: list[int], within_s: float) -> None:
    assert all(_alive(p) for p in pids)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    deadline = time.time() + within_s
    while time.time() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.1)
    left = [p for p in pids if _alive(p)]
    for p in left:  # never leave them behind for the rest of the suite
        os.kill(p, signal.SIGKILL)
    assert left == [], f"orphans left after kill -9 of their parent: {left}"


def test_corruption_pool_workers_end_with_the_engine(tmp_path: Path) -> None:
    proc, pids = _parent(tmp_path, """
        import multiprocessing as mp, os, time
        from concurrent.futures import ProcessPoolExecutor
        from domainbench.engine.jobs import init_worker

        def pid_after(s):
            time.sleep(s)
            return os.getpid()

        if __name__ == "__main__":
            pool = ProcessPoolExecutor(2, mp_context=mp.get_context("spawn"), initializer=init_worker)
            pids = {f.result() for f in [pool.submit(pid_after, 1.0) for _ in range(2)]}
            print(*sorted(pids), flush=True)
            time.sleep(600)
    """)
    assert len(pids) == 2
    _gone_after_kill(proc, pids, within_s=10)


def test_the_uis_run_worker_ends_with_the_ui(tmp_path: Path) -> None:
    proc, pids = _parent(tmp_path, """
        import subprocess, time
        from domainbench.runtime.parent_watch import command
        worker = subprocess.Popen(command("domainbench.app.cli", "--quiet", "worker", "--poll", "0.2"))
        print(worker.pid, flush=True)
        time.sleep(600)
    """)
    time.sleep(1.0)  # the worker is importing; its watch started before that
    _gone_after_kill(proc, pids, within_s=40)  # SIGTERM: it imports, then hands any run back and exits


def test_a_watched_module_gets_its_arguments(tmp_path: Path) -> None:
    (tmp_path / "echo_args.py").write_text("import sys; print(sys.argv)\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    from domainbench.runtime.parent_watch import command

    out = subprocess.run(command("echo_args", "a", "--b"), env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip().endswith("echo_args.py', 'a', '--b']"), out.stderr

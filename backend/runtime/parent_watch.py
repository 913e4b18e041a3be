"""No orphans: a helper process ends when the process that started it dies, even by ``kill -9``.

A parent killed with SIGKILL cannot stop its children; they are re-parented (to init or a
subreaper) and would go on corrupting images or holding a run's lease for nobody. Each helper
watches its parent instead: a daemon thread notices that ``os.getppid()`` changed and ends the
process. (``prctl(PR_SET_PDEATHSIG)`` is not used: it fires when the *thread* that forked the
child exits, and the corruption pool starts its workers from whichever thread submits first.)

``python -m domainbench.runtime.parent_watch MODULE ARGS...`` runs ``python -m MODULE ARGS...`` under
such a watch: ``domainbench ui`` starts Streamlit and its run worker this way.
"""

from __future__ import annotations

import os
import runpy
import signal
import sys
import threading
import time

POLL_S = 0.5
#: after SIGTERM (a worker hands its run back to the queue), how long before the process is ended hard
GRACE_S = 30.0


def watch_parent(sig: int = signal.SIGTERM, poll_s: float = POLL_S, grace_s: float = GRACE_S,
                 parent: int | None = None) -> threading.Thread:
    """Send this process ``sig`` when its parent dies (SIGKILL: end at once), then exit after ``grace_s``.

    ``parent``: the pid the parent had when it started this process (default: the current parent);
    a parent that died before the watch began is then noticed too.
    """
    parent = os.getppid() if parent is None else parent

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_s)
        if sig == signal.SIGKILL:
            os._exit(1)
        os.kill(os.getpid(), sig)
        time.sleep(grace_s)
        os._exit(1)

    thread = threading.Thread(target=watch, name="domainbench-parent-watch", daemon=True)
    thread.start()
    return thread


def command(module: str, *args: str) -> list[str]:
    """The argv that runs ``python -m module args`` so that it ends with the calling process."""
    return [sys.executable, "-m", "domainbench.runtime.parent_watch", str(os.getpid()), module, *args]


def main() -> None:
    if len(sys.argv) < 3 or not sys.argv[1].isdigit():
        sys.exit("usage: python -m domainbench.runtime.parent_watch PARENT_PID MODULE [ARGS...]")
    parent, module = int(sys.argv[1]), sys.argv[2]
    sys.argv = [module, *sys.argv[3:]]
    watch_parent(parent=parent)
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()

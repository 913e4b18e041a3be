"""``domainbench ARGS`` in this process, with its memory followed stage by stage (used by engine.py).

    python benchmarks/run_memory.py OUT.json run DOMAIN --dataset ... --models ...

The CLI's own code path runs unchanged; a sampler thread reads this process's resident set
(and that of its worker processes) every 20 ms, and the stages are marked by wrapping the
executor's ``load_models`` and ``execute``. What is written to OUT.json:

- per stage (imports and start, loading models, scoring shards, report), RSS at its start and
  its peak, in MB;
- the loaded models' parameter bytes (what the weights alone hold);
- the peak of Python and numpy allocations while shards are scored (``tracemalloc``: numpy
  registers its arrays with it; torch's CPU tensors are not traced), which is what decoded,
  corrupted and scored batches and the units in flight hold;
- the peak RSS of this process alone and with its worker processes added (``wait4``'s maxrss,
  what engine.py reports otherwise, is this process alone).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import tracemalloc
from pathlib import Path

PAGE = os.sysconf("SC_PAGE_SIZE")


def _rss(pid: int | str = "self") -> int:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * PAGE
    except OSError:
        return 0


def _children(pid: int) -> list[int]:
    out = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return out + [g for c in out for g in _children(c)] if out else []


class Sampler(threading.Thread):
    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.stage = "imports and start"
        self.stages: dict[str, dict[str, float]] = {}
        self.peak_self = self.peak_tree = 0
        self.done = threading.Event()
        self.mark(self.stage)

    def mark(self, stage: str) -> None:
        self.stage = stage
        self.stages.setdefault(stage, {"start_mb": _rss() / 1e6, "peak_mb": 0.0})

    def run(self) -> None:
        me = os.getpid()
        while not self.done.wait(0.02):
            own = _rss()
            tree = own + sum(_rss(c) for c in _children(me))
            self.peak_self, self.peak_tree = max(self.peak_self, own), max(self.peak_tree, tree)
            s = self.stages[self.stage]
            s["peak_mb"] = max(s["peak_mb"], own / 1e6)


def main() -> None:
    out, args = Path(sys.argv[1]), sys.argv[2:]
    sampler = Sampler()
    sampler.start()
    from domainbench.engine import corruption_kind
    from domainbench.engine.corruption_kind import CellsLocal
    from domainbench.engine.local_executor import LocalExecutor

    found: dict[str, float] = {}
    load, execute, report = LocalExecutor.load_models, CellsLocal.execute, corruption_kind.build_report

    def load_models(self, *a, **k):  # noqa: ANN001, ANN002, ANN003, ANN202
        sampler.mark("loading models")
        models = load(self, *a, **k)
        import torch

        weights = sum(p.numel() * p.element_size() for ms in models for m in vars(ms.model).values()
                      if isinstance(m, torch.nn.Module) for p in m.parameters())
        found["model_weights_mb"] = weights / 1e6
        sampler.mark("models loaded")
        return models

    def run_shards(self, session, work):  # noqa: ANN001, ANN202
        sampler.mark("scoring shards")
        tracemalloc.start()
        try:
            return execute(self, session, work)
        finally:
            found["traced_peak_while_scoring_mb"] = tracemalloc.get_traced_memory()[1] / 1e6
            tracemalloc.stop()

    def build_report(*a, **k):  # noqa: ANN002, ANN003, ANN202
        sampler.mark("report")
        return report(*a, **k)

    LocalExecutor.load_models, CellsLocal.execute, corruption_kind.build_report = load_models, run_shards, build_report
    from domainbench.app.cli import main as cli

    sys.argv = ["domainbench", *args]
    try:
        cli()
    except SystemExit as e:
        if e.code:
            raise
    finally:
        time.sleep(0.05)
        sampler.done.set()
        sampler.join()
        out.write_text(json.dumps({"stages": sampler.stages, "peak_rss_mb": sampler.peak_self / 1e6,
                                   "peak_rss_with_workers_mb": sampler.peak_tree / 1e6, **found}, indent=1))


if __name__ == "__main__":
    main()

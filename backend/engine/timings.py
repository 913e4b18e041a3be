"""Where a run's time goes: seconds per stage, per model, recorded in the run.

Stages, in the order an image meets them:

- ``decode``: waiting for a shard's images to be read and decoded (run-wide; the loader runs
  one shard ahead, so this is only the time the models were kept waiting);
- ``corruption``: waiting for a corrupted shard (run-wide; workers run ahead likewise);
- per model ``preprocess`` (resize, crop, normalise), ``forward`` (the image tower),
  ``scoring`` (similarities to the classifier, argmax, softmax confidence) and ``store``
  (building and upserting units), with ``images``: the images the model scored (forward passes).

Before the first shard, the run's fixed costs (owner ``startup``): ``imports`` (the entry point's
own imports up to the engine, and each model backend's on first use), ``dataset`` (opening it,
checking every file decodes, its fingerprint), ``model load`` (building each model and reading its
weights) and ``text embeddings`` (each model's zero-shot classifier, or reading it from the cache).

On a GPU, kernels run asynchronously: a stage's seconds are host time until the results were
needed, so device work shows up where it is waited for (``scoring`` copies predictions back).
Seconds of a resumed run add up over its sessions.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

RUN = "run"
MODEL_STAGES = ("preprocess", "forward", "scoring", "store")
RUN_STAGES = ("decode", "corruption")
#: run-wide work that is not waiting: the SSIM/PSNR of every corrupted cell
RUN_WORK = ("damage",)
#: the owner of the fixed costs paid before the first shard, and those stages in the order they are paid
STARTUP = "startup"
STARTUP_STAGES = ("imports", "dataset", "model load", "text embeddings")


class StageTimes:
    """Accumulated seconds per (owner, stage); owner is a model name or ``RUN``."""

    def __init__(self, start: dict[str, dict[str, float]] | None = None) -> None:
        self.seconds: dict[str, dict[str, float]] = {k: dict(v) for k, v in (start or {}).items()}

    def add(self, owner: str, stage: str, seconds: float) -> None:
        row = self.seconds.setdefault(owner, {})
        row[stage] = row.get(stage, 0.0) + seconds

    @contextmanager
    def stage(self, owner: str, stage: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.add(owner, stage, time.perf_counter() - t0)

    def rounded(self) -> dict[str, dict[str, float]]:
        return {o: {s: round(v, 4) for s, v in row.items()} for o, row in self.seconds.items()}


def timing_lines(timings: dict[str, dict[str, float]]) -> list[str]:
    """A run's stage seconds as lines for ``show``: run-wide waits, then one line per model."""
    if not timings:
        return []
    lines = ["time per stage (s):"]
    run = timings.get(RUN, {})
    if run:
        lines.append("  waiting for " + ", ".join(f"{s} {run[s]:.1f}" for s in RUN_STAGES if s in run))
        lines += [f"  measuring {s} (SSIM, PSNR) {run[s]:.1f}" for s in RUN_WORK if s in run]
    startup = timings.get(STARTUP, {})
    if startup:
        # one short line: `show` prints it in the terminal's width (dataset = opening it and its fingerprint)
        lines.append("  start-up: " + ", ".join(f"{s} {startup[s]:.1f}" for s in STARTUP_STAGES if s in startup))
    for owner, row in timings.items():
        if owner in (RUN, STARTUP):
            continue
        parts = [f"{s} {row[s]:.1f}" for s in MODEL_STAGES if s in row]
        n = int(row.get("images", 0))
        busy = sum(row.get(s, 0.0) for s in ("preprocess", "forward", "scoring"))
        rate = f", {n / busy:,.1f} img/s scored" if busy > 0 and n else ""
        lines.append(f"  {owner}: " + ", ".join(parts) + f" ({n:,} images{rate})")
    return lines

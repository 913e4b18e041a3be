"""The verdict's error rates by simulation with known truth (issue 34, items 3-5), through the product's functions.

Each scenario draws labelled per-image outcomes of two models on a class-interleaved sample (as ``run --limit``
takes it: at 100 classes and n = 100, one image per class), over a clean cell and four corrupted cells whose
per-class accuracies run from 0.3 to 0.98, and asks ``metrics.comparison.compare_models`` (what ``show``,
``compare``, the UI and the exports call) for its verdict:

- false "beats": two identical models (the same per-class accuracies, independent errors); the share of
  replications whose verdict names a winner (target <= 5 %), fixed-size and adaptive (``engine.adaptive``'s
  ``AdaptiveStopping`` decides when each cell stops, in rounds, and the comparison is made along
  ``arrival_ranks``, as for a stored adaptive run);
- power at the suggested sample size: A is 3 points better than B in every class of every cell; a pilot run
  gives the verdict's "about N images per class would settle a 3-point difference"; the share of replications
  at N images per class whose verdict is "A beats B" (target 70-90 %, i.e. 80 % +- 10 points).

``benchmarks/coverage.py`` imports ``SCENARIOS``; standalone:

    python benchmarks/coverage_verdicts.py --quick      # ~1-2 min on a 2-core CPU
    python benchmarks/coverage_verdicts.py              # 1,000 replications (300 for adaptive)
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import Callable
from types import SimpleNamespace

import numpy as np

os.environ.setdefault("NO_ALBUMENTATIONS_UPDATE", "1")

from domainbench.engine.adaptive import AdaptiveStopping, adaptive_shards, arrival_ranks
from domainbench.metrics.comparison import compare_models
from domainbench.metrics.outcomes import MISSING, ImageOutcomes

MODELS = ("a", "b")
#: the corrupted cells: each scales a class's clean accuracy by its factor
CELLS = (("blur", 1, 0.95), ("blur", 3, 0.8), ("noise", 2, 0.9), ("noise", 4, 0.7))
#: adaptive runs: images per round and the target width (the default 0.1 would rarely stop before 300 images)
ROUND = 20
TARGET_WIDTH = 0.3
DIFFERENCE = 0.03


def _accuracies(rng: np.random.Generator, classes: int, gap: float) -> dict[tuple[str, int], np.ndarray]:
    """Per cell, B's per-class accuracy; A's is B's + gap (the clean cell's run 0.3 to 0.98 across classes)."""
    clean = rng.uniform(0.3, 0.98 - gap, classes)
    return {("clean", 0): clean, **{(c, s): clean * f for c, s, f in CELLS}}


def _outcomes(rng: np.random.Generator, classes: int, n: int, gap: float = 0.0) -> ImageOutcomes:
    labels = np.arange(n) % classes
    preds = {}
    for cell, acc in _accuracies(rng, classes, gap).items():
        for model, p in zip(MODELS, (acc + gap, acc), strict=True):
            right = rng.random(n) < p[labels]
            preds[(model, *cell)] = np.where(right, labels, (labels + 1) % classes)
    return ImageOutcomes(indices=np.arange(n), labels=labels, preds=preds)


def _adaptive(rng: np.random.Generator, classes: int, n: int, gap: float = 0.0) -> tuple[ImageOutcomes, np.ndarray]:
    """One adaptive run: ``AdaptiveStopping`` fed round by round; images a stopped cell never scored are MISSING."""
    full = _outcomes(rng, classes, n, gap)
    seed = int(rng.integers(2 ** 31))
    cells = [(c, s) for c, s, _ in CELLS]
    state = AdaptiveStopping(models=list(MODELS), cells=cells, target_width=TARGET_WIDTH)
    used = {cell: np.zeros(n, dtype=bool) for cell in [("clean", 0), *cells]}
    units = []
    for shard, idx in enumerate(adaptive_shards(n, ROUND, seed)):
        if state.finished():
            break
        batch = []
        for cell in used:
            if not state.active(*cell):
                continue
            used[cell][idx] = True
            for m in MODELS:
                batch.append(SimpleNamespace(shard=shard, model=m, corruption=cell[0], severity=cell[1],
                                             indices=idx.tolist(), preds=full.preds[(m, *cell)][idx].tolist(),
                                             labels=full.labels[idx].tolist() if cell[0] == "clean" else None))
        state.observe(batch)
        units += batch
    preds = {(m, *cell): np.where(used[cell], full.preds[(m, *cell)], MISSING) for m in MODELS for cell in used}
    out = ImageOutcomes(indices=full.indices, labels=full.labels, preds=preds)
    return out, arrival_ranks(units, out.indices, seed)


def _row(what: str, scenario: str, hits: int, reps: int, target: str) -> dict:
    rate = hits / reps
    # the standard error of a rate at (hits + 1) / (reps + 2), so that 0 of 300 still states its uncertainty
    shrunk = (hits + 1) / (reps + 2)
    return {"what": what, "scenario": scenario, "rate": rate, "mc_se": math.sqrt(shrunk * (1 - shrunk) / reps),
            "target": target}


def false_beats(classes: int, n: int, adaptive: bool) -> Callable[[int, np.random.Generator], list[dict]]:
    def scenario(reps: int, rng: np.random.Generator) -> list[dict]:
        wins = 0
        for _ in range(reps):
            if adaptive:
                out, arrival = _adaptive(rng, classes, n)
                c = compare_models(out, list(MODELS), arrival=arrival)
            else:
                c = compare_models(_outcomes(rng, classes, n), list(MODELS))
            wins += c.verdicts[0].winner is not None
        kind = "adaptive" if adaptive else "fixed-n"
        return [_row('false "beats", identical models', f"{kind}, {classes} classes, n = {n}", wins, reps, "<= 0.05")]
    scenario.__name__ = f"false_beats_{'adaptive' if adaptive else 'fixed'}_{classes}_{n}"
    return scenario


def suggested_per_class(classes: int, rng: np.random.Generator, pilot_per_class: int = 60) -> int:
    """The verdict's "about N images per class would settle a 3-point difference", from a pilot run."""
    return compare_models(_outcomes(rng, classes, classes * pilot_per_class, DIFFERENCE), list(MODELS)).verdicts[0].images_per_class_needed


def power(classes: int) -> Callable[[int, np.random.Generator], list[dict]]:
    def scenario(reps: int, rng: np.random.Generator) -> list[dict]:
        per_class = suggested_per_class(classes, rng)
        hits = sum(compare_models(_outcomes(rng, classes, classes * per_class, DIFFERENCE), list(MODELS)).verdicts[0].winner == "a"
                   for _ in range(reps))
        return [_row("power at the suggested sample size (A 3 points better)",
                     f"fixed-n, {classes} classes, {per_class} images per class (suggested)", hits, reps, "0.70-0.90")]
    scenario.__name__ = f"power_{classes}"
    return scenario


SCENARIOS: list[Callable[[int, np.random.Generator], list[dict]]] = [
    *(false_beats(c, n, False) for c in (10, 100) for n in (100, 300)),
    *(false_beats(c, n, True) for c in (10, 100) for n in (100, 300)),
    power(10),
    power(100),
]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="200 replications (100 adaptive, 100 for power)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    failed = 0
    for i, scenario in enumerate(SCENARIOS):
        adaptive = "adaptive" in scenario.__name__
        reps = (100 if adaptive or "power" in scenario.__name__ else 200) if args.quick else (300 if adaptive else 1000)
        t0 = time.perf_counter()
        for row in scenario(reps, np.random.default_rng([args.seed, i])):
            low, high = (0.0, 0.05) if row["target"] == "<= 0.05" else (0.70, 0.90)
            # a rate passes when its target lies within 2 Monte Carlo standard errors
            ok = low - 2 * row["mc_se"] <= row["rate"] <= high + 2 * row["mc_se"]
            failed += not ok
            print(f"{row['what']:<56} {row['scenario']:<52} {100 * row['rate']:5.1f} % ± {100 * row['mc_se']:.1f}  "
                  f"target {row['target']:<9} {'ok' if ok else 'MISSED'}  ({time.perf_counter() - t0:.0f} s, {reps} reps)",
                  flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

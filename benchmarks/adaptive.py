"""Adaptive evaluation against the full run: forward passes used, verdicts reached, and coverage.

1. On the bundled sample with both embedded models, a full run and an ``--adaptive`` run of the
   same domain: forward passes (images scored, summed over models and cells) of each, their
   ratio (target: adaptive <= 50 % of full), and whether every pair's verdict winner is the same.
2. A simulation of the betting confidence sequence on Bernoulli streams at several true rates:
   the share of streams whose interval holds the true rate at *every* step (anytime coverage),
   which must be >= the nominal level.

    python benchmarks/adaptive.py --quick      # <= 3 min on a 2-core CPU
    python benchmarks/adaptive.py              # all 1,000 sample images, 10,000 streams
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

os.environ.setdefault("NO_ALBUMENTATIONS_UPDATE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import domainbench
from domainbench.records.config import CorruptionChoice, DomainConfig, RunConfig
from domainbench.stats.confseq import coverage_simulation
from domainbench.store.sqlite_store import SQLiteStore

MODELS = ["embedded:fmnist-plain", "embedded:fmnist-augmented"]
DOMAIN = DomainConfig(domain="adaptive benchmark", corruptions=[
    CorruptionChoice(name="contrast", severities=[2, 4]),
    CorruptionChoice(name="gaussian_noise", severities=[1, 4]),
    CorruptionChoice(name="brightness", severities=[4]),
])


def evaluate(store: SQLiteStore, run_id: str, cfg: RunConfig) -> tuple[int, float, dict[tuple[str, str], str | None]]:
    t0 = time.perf_counter()
    domainbench.run(DOMAIN, run_config=cfg, run_id=run_id, store=store)
    elapsed = time.perf_counter() - t0
    passes = sum(u.n for u in store.units(run_id))
    verdicts = {(v.model_a, v.model_b): v.winner for v in domainbench.compare([run_id], store=store).verdicts}
    return passes, elapsed, verdicts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="300 images, 2,000 streams of 300 steps")
    ap.add_argument("--target-width", type=float, default=0.15)
    args = ap.parse_args()
    limit, streams, length = (300, 2000, 300) if args.quick else (1000, 10000, 1000)

    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(os.path.join(tmp, "bench.sqlite"))
        base = dict(models=MODELS, limit=limit, stability=False, threat=False, workers=0, shard_size=25, device="cpu")
        full, t_full, v_full = evaluate(store, "full", RunConfig(**base))
        adaptive, t_ad, v_ad = evaluate(store, "adaptive", RunConfig(**base, adaptive=True, target_width=args.target_width))
        cells = {(u.corruption, u.severity): 0 for u in store.units("adaptive")}
        for u in store.units("adaptive"):
            if u.model == MODELS[0]:
                cells[(u.corruption, u.severity)] += u.n
    print(f"sample, {limit} images, {len(cells)} cells (clean included), models {', '.join(MODELS)}, "
          f"target width {args.target_width}")
    print(f"  forward passes: full {full:,} ({t_full:.1f} s), adaptive {adaptive:,} ({t_ad:.1f} s): "
          f"ratio {adaptive / full:.2f} (target <= 0.50)")
    print("  images per cell (adaptive): " + ", ".join(f"{c}@{s} {n}" for (c, s), n in sorted(cells.items())))
    same = v_full == v_ad
    print(f"  verdict winners full {v_full}, adaptive {v_ad}: {'same' if same else 'DIFFERENT'}")

    t0 = time.perf_counter()
    rates = [0.05, 0.3, 0.5, 0.7, 0.95]
    cov = coverage_simulation(rates, streams=streams, length=length, confidence=0.95, seed=0)
    print(f"coverage of the betting confidence sequence, {streams:,} Bernoulli streams of {length} steps per rate, "
          f"nominal 0.95, anytime (every step must hold the rate), {time.perf_counter() - t0:.1f} s:")
    print("  " + ", ".join(f"p={p}: {c:.4f}" for p, c in cov.items())
          + f" -> {'all >= nominal' if min(cov.values()) >= 0.95 else 'BELOW nominal'}")


if __name__ == "__main__":
    main()

"""The Ray executor against the local one on the same run: wall time and identical units.

Runs one domain on the bundled sample with both embedded models, first with the local
executor, then on a local Ray instance (start-up timed separately), and prints seconds,
images per second and whether the stored predictions agree unit by unit.

    python benchmarks/ray_executor.py [--quick] [--cpus N]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("NO_ALBUMENTATIONS_UPDATE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import domainbench  # noqa: E402
from domainbench.records.config import CorruptionChoice, DomainConfig, RunConfig  # noqa: E402
from domainbench.store import open_store  # noqa: E402

DOMAIN = DomainConfig(domain="ray benchmark", corruptions=[
    CorruptionChoice(name="gaussian_noise", severities=[1, 3, 5], reason="sensor"),
    CorruptionChoice(name="motion_blur", severities=[2, 4], reason="hand shake"),
    CorruptionChoice(name="jpeg_compression", severities=[3], reason="upload"),
])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--cpus", type=int, default=os.cpu_count() or 2)
    args = ap.parse_args()
    limit = 300 if args.quick else 1000
    cfg = RunConfig(limit=limit, shard_size=100, workers=0, stability=False, threat=False, device="cpu")
    store = open_store(home=Path(tempfile.mkdtemp()))
    t0 = time.perf_counter()
    local = domainbench.run(DOMAIN, run_config=cfg, store=store).id
    t_local = time.perf_counter() - t0

    import ray

    t0 = time.perf_counter()
    ray.init(num_cpus=args.cpus, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    t_start = time.perf_counter() - t0
    t0 = time.perf_counter()
    remote = domainbench.run(DOMAIN, run_config=cfg, store=store, executor="ray").id
    t_ray = time.perf_counter() - t0
    ray.shutdown()

    key = lambda u: (u.model, u.corruption, u.severity, u.shard)  # noqa: E731
    a = {key(u): (u.preds, u.confusion, u.flips) for u in store.units(local)}
    b = {key(u): (u.preds, u.confusion, u.flips) for u in store.units(remote)}
    cells = 1 + sum(len(c.severities) for c in DOMAIN.corruptions)
    images = limit * cells * len(cfg.models)
    print(f"{limit} images x {cells} cells x {len(cfg.models)} models, cpu, {args.cpus} Ray CPUs")
    print(f"local executor : {t_local:7.1f} s  {images / t_local:7.0f} img/s")
    print(f"ray executor   : {t_ray:7.1f} s  {images / t_ray:7.0f} img/s  (+ {t_start:.1f} s to start Ray)")
    print(f"ray / local    : {t_ray / t_local:.2f}")
    print(f"units identical: {a == b} ({len(a)} units)")


if __name__ == "__main__":
    main()

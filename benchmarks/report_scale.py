"""How long does a run's report take to build from its stored units, at 10,000 units?

A synthetic run: 2 models × (clean + 20 corruptions × 5 severities) cells × 50 shards (10,100
units), 1,000 classes, 200 images a unit, written through the store as the engine
writes units (packed predictions, correctness bits, confidences, sparse confusion). Times
``build_report`` (what ``show``, ``export`` and the UI call) on embedded SQLite and on the
pymongo code over mongomock, and prints the stored bytes per unit. Target: < 2 s.

    python benchmarks/report_scale.py            # 10,000 units
    python benchmarks/report_scale.py --quick    # 10,000 units, SQLite only
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from domainbench.records.confusion import SparseConfusion
from domainbench.engine.reports import build_report
from domainbench.store.base import Store
from domainbench.store.records import RunRecord, UnitRecord

CORRUPTIONS = [f"corruption_{i:02d}" for i in range(20)]
MODELS = ["open_clip:ViT-B-32/openai", "open_clip:ViT-L-14/openai"]
CLASSES = [f"imagenet class {i}" for i in range(1000)]
RUN = "20261125-000000-report-scale-0001"


def units(n_shards: int, per_unit: int, seed: int = 0) -> list[UnitRecord]:
    rng = np.random.default_rng(seed)
    c = len(CLASSES)
    out = []
    for shard in range(n_shards):
        idx = np.arange(shard * per_unit, (shard + 1) * per_unit)
        labels = rng.integers(0, c, per_unit)
        for model in MODELS:
            clean = np.where(rng.random(per_unit) < 0.7, labels, rng.integers(0, c, per_unit))
            cells = [("clean", 0)] + [(k, s) for k in CORRUPTIONS for s in range(1, 6)]
            for corr, sev in cells:
                keep = rng.random(per_unit) < 0.9 - 0.1 * sev
                preds = clean if corr == "clean" else np.where(keep, clean, rng.integers(0, c, per_unit))
                out.append(UnitRecord(
                    run_id=RUN, model=model, corruption=corr, severity=sev, shard=shard, n=per_unit,
                    confusion=SparseConfusion.from_pairs(labels, preds, c), flips=int((preds != clean).sum()),
                    preds=preds, indices=idx, labels=labels if corr == "clean" else None,
                    hits=(preds == labels).astype(np.int8), confidence=rng.random(per_unit).astype(np.float32),
                    params={} if corr == "clean" else {"level": 0.1 * sev}, seed=0, classes=CLASSES,
                    corrupted_on=None if corr == "clean" else "cpu", elapsed_s=0.5,
                    computed_at="2026-11-25T00:00:00+00:00"))
    return out


def run_record() -> RunRecord:
    return RunRecord.model_validate({
        "run_id": RUN, "domain_id": "d", "status": "done", "created_at": "2026-11-25T00:00:00+00:00",
        "domain": {"domain": "report scale", "corruptions": []},
        "config": {"models": MODELS, "stability": False, "threat": False}})


def fill(store: Store, records: list[UnitRecord]) -> None:
    store.put_run(run_record())
    for i in range(0, len(records), 500):
        store.upsert_many("units", records[i : i + 500])


def time_build(store: Store, repeats: int = 3) -> tuple[float, float]:
    """(best wall seconds, best CPU seconds of this process) of ``build_report`` after one warm-up
    (the first build imports the report's modules). On a shared machine the CPU time is the fairer
    number: wall time there includes waiting for a core."""
    build_report(store, RUN)
    wall = cpu = float("inf")
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        report = build_report(store, RUN)
        wall, cpu = min(wall, time.perf_counter() - t0), min(cpu, time.process_time() - c0)
    assert len(report.models) == len(MODELS)
    return wall, cpu


def measure(n_shards: int = 50, per_unit: int = 200, mongo: bool = True) -> dict[str, Any]:
    records = units(n_shards, per_unit)
    out: dict[str, Any] = {"units": len(records), "classes": len(CLASSES), "images_per_unit": per_unit}
    with tempfile.TemporaryDirectory() as d:
        from domainbench.store.sqlite_store import SQLiteStore

        path = Path(d) / "bench.sqlite"
        store = SQLiteStore(path)
        fill(store, records)
        sizes = [len(r[0].encode()) for r in sqlite3.connect(path).execute("SELECT doc FROM units")]
        out["sqlite_bytes_per_unit"] = float(np.mean(sizes))
        out["sqlite_report_s"], out["sqlite_report_cpu_s"] = time_build(store)
        store.close()
    if mongo:
        import mongomock

        from domainbench.store.mongo_store import MongoStore

        store = MongoStore("mongodb://localhost/bench", client=mongomock.MongoClient())
        fill(store, records)
        out["mongomock_report_s"], out["mongomock_report_cpu_s"] = time_build(store, repeats=1)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="SQLite only")
    args = ap.parse_args()
    res = measure(mongo=not args.quick)
    print(json.dumps(res, indent=1))
    for k in ("sqlite", "mongomock"):
        if f"{k}_report_s" in res:
            wall, cpu = res[f"{k}_report_s"], res[f"{k}_report_cpu_s"]
            print(f"{k}: report of {res['units']} units in {wall:.2f} s wall, {cpu:.2f} s CPU "
                  f"({'meets' if cpu < 2 else 'MISSES'} the 2 s target in CPU time)")


if __name__ == "__main__":
    main()

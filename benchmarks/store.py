"""Does the embedded store's cost per operation stay flat as the store grows?

Fills a fresh SQLite store with N unit documents (N = 1,000 and N = 1,000,000), then times,
on top of each: committed single-unit upserts (a worker streaming results), one run's
report read and one run's unit listing (the UI). Prints per-operation times and the ratio
large/small, which should stay near 1.

    python benchmarks/store.py            # 1,000 vs 1,000,000
    python benchmarks/store.py --quick    # 1,000 vs 100,000
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from domainbench.records.report import RunReport
from domainbench.store.sqlite_store import SQLiteStore

CONFUSION = [[5 if i == j else 0 for j in range(10)] for i in range(10)]


def unit(run: int, i: int) -> dict:
    return {"run_id": f"run-{run}", "model": f"m{i % 3}", "corruption": f"c{(i // 3) % 20}", "severity": 1 + (i // 60) % 5,
            "shard": i // 300, "n": 50, "confusion": CONFUSION, "flips": i % 7, "seed": 0, "classes": [str(c) for c in range(10)]}


def fill(store: SQLiteStore, n: int, per_run: int = 3000) -> None:
    batch = []
    for i in range(n):
        batch.append(unit(i // per_run, i % per_run))
        if len(batch) == 20000:
            store.upsert_many("units", batch)
            batch = []
    store.upsert_many("units", batch)
    template = report()
    for r in range(0, max(1, n // per_run)):
        store.put_report(template.model_copy(update={"run_id": f"run-{r}"}))


def report() -> RunReport:
    """A one-model report of the shape the engine stores."""
    from domainbench.metrics.run_report import build_report
    from domainbench.store.records import RunRecord, UnitRecord

    clean = UnitRecord.model_validate(unit(0, 0) | {"corruption": "clean", "severity": 0, "flips": 0, "model": "m0"})
    run = RunRecord(run_id="run-0", domain_id="d", domain={"domain": "bench", "corruptions": []}, config={"models": ["m0"]},
                    status="done", created_at="2026-01-01")
    return build_report(run, [clean], [], [], baseline="m0", version="bench")


def measure(n: int, ops: int = 1000) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as d:
        store = SQLiteStore(Path(d) / "bench.sqlite")
        t0 = time.perf_counter()
        fill(store, n)
        fill_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        for i in range(ops):
            store.upsert("units", unit(10**7, i))  # one committed transaction each
        upsert = (time.perf_counter() - t0) / ops
        t0 = time.perf_counter()
        for i in range(ops):
            store.get_report(f"run-{i % max(1, n // 3000)}")
        summary = (time.perf_counter() - t0) / ops
        t0 = time.perf_counter()
        for _ in range(20):
            store.units("run-10000000", model="m0")
        listing = (time.perf_counter() - t0) / 20
        return {"fill_s": fill_s, "upsert_ms": upsert * 1e3, "summary_ms": summary * 1e3, "run_units_ms": listing * 1e3}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="1,000 vs 100,000 stored units")
    args = ap.parse_args()
    small, large = 1000, (100_000 if args.quick else 1_000_000)
    a, b = measure(small), measure(large)
    print(f"{'operation':<28}{small:>12,} units{large:>14,} units{'ratio':>9}")
    for k in ("upsert_ms", "summary_ms", "run_units_ms"):
        print(f"{k:<28}{a[k]:>15.4f} ms{b[k]:>16.4f} ms{b[k] / a[k]:>9.2f}")
    print(f"(filling took {a['fill_s']:.1f} s and {b['fill_s']:.1f} s)")


if __name__ == "__main__":
    main()

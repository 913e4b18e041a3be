"""One record of every kind a run owns, written into a store: what deleting a run must remove."""

from __future__ import annotations

import time

from domainbench.store.base import COLLECTIONS, Store


def records(store: Store, run_id: str, status: str = "done") -> None:
    """One document in every run-keyed collection, plus the run's domain."""
    store.put_domain({"domain_id": "d1", "domain": "x", "corruptions": []})
    store.put_run({"run_id": run_id, "domain_id": "d1", "domain": {"domain": "x", "corruptions": []},
                   "config": {"models": ["m"]}, "status": status, "created_at": "2026-01-01",
                   **({"pid": 1, "host": "elsewhere", "worker": "w", "lease_until": time.time() + 60}
                      if status == "running" else {})})
    store.upsert("units", {"run_id": run_id, "model": "m", "corruption": "fog", "severity": 1, "shard": 0, "n": 2,
                           "confusion": [[1, 0], [0, 1]], "flips": 0, "seed": 0, "classes": ["a", "b"]})
    store.upsert("stability", {"run_id": run_id, "model": "m", "corruption": "fog", "shard": 0, "indices": [0],
                               "points": 3, "divergence_radius": [0.1], "cosine": [0.01], "euclidean": [0.1]})
    store.upsert("threat", {"run_id": run_id, "corruption": "fog", "severity": 1, "shard": 0, "n": 2, "sum": 1.0,
                            "sum_sq": 0.5, "n_above_1": 0, "max": 0.5})
    store.upsert("fmr", {"run_id": run_id, "model": "m", "shard": 0, "search": "greedy", "seed": 0, "indices": [0],
                         "labels": [0], "clean_preds": [0], "final_preds": [1], "validated": [True], "steps": [2],
                         "oracle_clean": [[0]], "oracle_final": [[0]], "ops": [[["fog", 0.5]]], "images": [None],
                         "originals": [None]})
    store.upsert("task_units", {"run_id": run_id, "model": "m", "corruption": "fog", "severity": 1,
                                "head": {"images": 1, "questions": 1}, "outcomes": {"vqa_accuracy": [[1.0], [0.0]]},
                                "raw": {"answers": ["yes"]}, "predictions": [{"answer": "yes"}]})
    store.upsert("clip_units", {"run_id": run_id, "model": "m", "cell": "flicker:4", "preds": [[0, 1]],
                                "mean_preds": [0]})


def counts(store: Store, run_id: str) -> dict[str, int]:
    return {c: len(store.keys(c, run_id=run_id)) for c in COLLECTIONS if COLLECTIONS[c][0] == "run_id"}

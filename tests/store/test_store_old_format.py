"""Stores written by earlier versions stay readable: a real run of the bundled sample, stored by the
domainbench of 2026-11-25 (unit schema 1: dense confusion matrices, per-image lists), is read through
today's store on SQLite and mongomock, and gives the report it stored then."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from domainbench.engine.reports import build_report
from domainbench.store.base import Store

FIXTURE = Path(__file__).parent / "fixtures" / "store_v1_units.json"


def old_docs() -> dict[str, list[dict[str, Any]]]:
    return json.loads(FIXTURE.read_text())


def load_raw(store: Store) -> dict[str, list[dict[str, Any]]]:
    """The fixture's documents written as they were (no validation, no migration)."""
    docs = old_docs()
    for coll, rows in docs.items():
        store._upsert_many(coll, rows)
    return docs


def test_old_units_read_with_their_predictions_and_counts(store: Store) -> None:
    docs = load_raw(store)
    stored = {(d["model"], d["corruption"], d["severity"], d["shard"]): d for d in docs["units"]}
    units = store.units("fixture-v1")
    assert len(units) == len(stored) == 16
    for u in units:
        raw = stored[(u.model, u.corruption, u.severity, u.shard)]
        assert list(u.preds) == raw["preds"] and list(u.indices) == raw["indices"]
        np.testing.assert_array_equal(np.asarray(u.confusion), np.asarray(raw["confusion"]))
        assert (u.n, u.flips) == (raw["n"], raw["flips"])
        assert (None if u.labels is None else list(u.labels)) == raw["labels"]


def test_old_store_rebuilds_the_report_it_stored(store: Store) -> None:
    docs = load_raw(store)
    old = docs["summaries"][0]["classification"]
    new = build_report(store, "fixture-v1").classification
    assert [m.model for m in new.models] == [m["model"] for m in old["models"]]
    for m, om in zip(new.models, old["models"]):
        for key in ("clean_accuracy", "mean_corrupted_accuracy", "mce", "rce", "mfr", "pearson_acc_lfp"):
            assert getattr(m, key) == om[key], (m.model, key)
        cells = [m.clean, *m.cells]
        ocells = [om["clean"], *om["cells"]]
        for c, oc in zip(cells, ocells):
            assert (c.corruption, c.severity, c.n, c.flips, c.lfp, c.accuracy) == (
                oc["corruption"], oc["severity"], oc["n"], oc["flips"], oc["lfp"], oc["accuracy"])
            np.testing.assert_array_equal(np.asarray(c.confusion), np.asarray(oc["confusion"]))


def test_old_store_rebuilds_its_threat_and_stability_sections(store: Store) -> None:
    docs = load_raw(store)
    old = docs["summaries"][0]
    new = build_report(store, "fixture-v1").model_dump(mode="json")
    for key in ("threat", "safe_accuracy", "stability", "stability_link", "different_class_threat"):
        assert new[key] == old[key], key
    assert old["stability_link"]  # the fixture exercises the per-image join

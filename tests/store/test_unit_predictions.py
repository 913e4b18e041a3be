"""The statistics' fast read of a run's units (issue 37, Compare's speed): ``Store.unit_predictions`` returns what a
validated read returns for the fields the per-image outcomes use, on every backend, for plain-list (version 1) and
packed (version 2) units, labelled and unlabelled; ``image_outcomes``, vectorised over all units, equals a plain loop
over them (a later unit's value winning for an image stored twice); and ``query``'s ``read_outcomes`` equals the
outcomes of the validated records, real-shift and adaptive runs included."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from domainbench.metrics.outcomes import MISSING, UnitPredictions, image_outcomes
from domainbench.query.confidence import read_outcomes
from domainbench.store.base import Store
from domainbench.store.records import StoreVersionError

CLASSES = ["a", "b", "c"]


def unit(run_id: str, model: str, corruption: str, severity: int, shard: int, indices: list[int], preds: list[int],
         labels: list[int] | None, version: int = 2, labelled: bool = True) -> dict[str, Any]:
    confusion = [[0] * 3 for _ in CLASSES]
    for y, p in zip(labels or [0] * len(preds), preds, strict=True):
        confusion[y][p] += 1
    doc: dict[str, Any] = {
        "schema_version": version, "run_id": run_id, "model": model, "corruption": corruption, "severity": severity,
        "shard": shard, "n": len(indices), "confusion": confusion if labelled else None, "flips": 0, "params": {},
        "seed": 0, "classes": CLASSES, "preds": preds, "indices": indices, "labels": labels}
    if version == 1:
        doc.pop("schema_version")  # the oldest units carry none
    return doc


def fill(store: Store, run_id: str, images: int, version: int, labelled: bool = True, shift: bool = False) -> None:
    """Two models, clean and two corrupted cells, two shards (100 images each pack; 5 stay plain lists)."""
    rng = np.random.default_rng(images)
    rows = []
    half = images // 2
    for model in ("m1", "m2"):
        for corruption, severity in (("clean", 0), ("blur", 2), ("blur", 4)):
            for shard, idx in enumerate((list(range(half)), list(range(half, images)))):
                preds = rng.integers(0, 3, len(idx)).tolist()
                labels = [i % 3 for i in idx] if corruption == "clean" and labelled else None
                rows.append(unit(run_id, model, corruption, severity, shard, idx, preds, labels, version, labelled))
        if shift:
            rows.append(unit(run_id, model, "shift:dim", 1, 0, [0, 1, 2, 3], [0, 1, 1, 0], [0, 1, 2, 0], version))
    store._upsert_many("units", rows)  # as stored, even the version-1 documents an older domainbench wrote


FIELDS = ("model", "corruption", "severity", "shard")


def validated(store: Store, run_id: str) -> list[dict[str, Any]]:
    return [{**{f: getattr(u, f) for f in FIELDS}, "preds": list(u.preds), "indices": list(u.indices),
             "labels": None if u.labels is None else list(u.labels), "labelled": u.confusion is not None}
            for u in store.units(run_id)]


def fast(store: Store, run_id: str, base: bool = False) -> list[dict[str, Any]]:
    docs = Store._unit_prediction_docs(store, run_id) if base else None
    if base:  # the backend-neutral read (MongoDB's), whatever this backend overrides
        store = type("Base", (), {"_unit_prediction_docs": lambda self, r: docs, "description": "x"})()
        found = Store.unit_predictions(store, run_id)  # type: ignore[arg-type]
    else:
        found = store.unit_predictions(run_id)
    return [{**{f: d[f] for f in FIELDS}, **{k: None if d[k] is None else UnitPredictions.from_stored(d)._asdict()[k]
                                              for k in ("preds", "indices", "labels")}, "labelled": d["labelled"]}
            for d in found]


def as_lists(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: list(np.asarray(v).tolist()) if k in ("preds", "indices", "labels") and v is not None else v
             for k, v in r.items()} for r in rows]


@pytest.mark.parametrize("images, version, labelled", [(200, 2, True), (10, 1, True), (200, 1, False), (10, 2, False)])
@pytest.mark.parametrize("base", [False, True])
def test_unit_predictions_equal_the_validated_records(store: Store, images: int, version: int, labelled: bool,
                                                      base: bool) -> None:
    fill(store, "r1", images, version, labelled, shift=True)
    fill(store, "r2", 6, 2)  # another run's units are not read
    if version == 2:  # packed as the engine writes them: validated on the way in
        store.delete("units", run_id="r1")
        store.upsert_many("units", [unit("r1", m, c, s, sh, list(range(sh * images // 2, (sh + 1) * images // 2)),
                                         [(i * 7 + len(m)) % 3 for i in range(images // 2)],
                                         [i % 3 for i in range(sh * images // 2, (sh + 1) * images // 2)]
                                         if c == "clean" and labelled else None, 2, labelled)
                                    for m in ("m1", "m2") for c, s in (("clean", 0), ("blur", 3)) for sh in (0, 1)])
    want = validated(store, "r1")
    got = as_lists(fast(store, "r1", base))
    assert sorted(got, key=lambda r: [r[f] for f in FIELDS]) == sorted(want, key=lambda r: [r[f] for f in FIELDS])
    assert len(want) > 4 and any(r["labelled"] is labelled for r in want)


def test_units_stored_without_per_image_arrays_read_as_the_records_defaults(store: Store) -> None:
    doc = unit("r1", "m1", "clean", 0, 0, [0, 1], [0, 1], [0, 1], version=1)
    for k in ("preds", "indices", "labels"):
        doc.pop(k)
    store._upsert_many("units", [doc])  # an older run's unit: counts only
    found, want = read_outcomes(store, "r1").outcomes(), image_outcomes(store.units("r1"))
    assert found.n == want.n == 0 and list(found.preds) == list(want.preds) == [("m1", "clean", 0)]


def test_a_newer_domainbench_unit_is_refused_as_by_a_validated_read(store: Store) -> None:
    fill(store, "r1", 6, 2)
    store._upsert_many("units", [{**unit("r1", "m1", "clean", 0, 9, [7], [0], [0]), "schema_version": 99}])
    with pytest.raises(StoreVersionError, match="newer"):
        store.unit_predictions("r1")


def loop_outcomes(units: list[UnitPredictions]) -> tuple[np.ndarray, np.ndarray | None, dict[Any, np.ndarray]]:
    """The plain loop the vectorised ``image_outcomes`` replaced: units in stored order, a later one winning."""
    indices = np.unique(np.concatenate([np.asarray(u.indices) for u in units]))
    label_of = {int(i): int(y) for u in units if u.labels is not None for i, y in zip(u.indices, u.labels, strict=True)}
    labels = np.array([label_of[int(i)] for i in indices]) if any(u.labelled for u in units) else None
    preds: dict[Any, np.ndarray] = {}
    for u in units:
        row = preds.setdefault(u.cell, np.full(indices.size, MISSING))
        for i, p in zip(u.indices, u.preds, strict=True):
            row[np.searchsorted(indices, i)] = p
    return indices, labels, preds


@pytest.mark.parametrize("seed", range(6))
def test_vectorised_outcomes_equal_a_loop_over_the_units(seed: int) -> None:
    rng = np.random.default_rng(seed)
    units = []
    for k in range(int(rng.integers(1, 40))):
        idx = sorted(rng.choice(60, int(rng.integers(1, 12)), replace=False).tolist())  # shards overlap: re-stored images
        clean = k % 3 == 0
        units.append(UnitPredictions(f"m{k % 2}", "clean" if clean else f"c{k % 4}", 0 if clean else 1 + k % 5, k,
                                     rng.integers(-1, 4, len(idx)).tolist(), idx,
                                     rng.integers(0, 3, len(idx)).tolist() if clean else None, True))
    labelled_images = {i for u in units if u.labels is not None for i in u.indices}
    units = [u for u in units if set(u.indices) <= labelled_images]  # the clean pass covers every image
    indices, labels, preds = loop_outcomes(units)
    got = image_outcomes(units)
    np.testing.assert_array_equal(got.indices, indices)
    np.testing.assert_array_equal(got.labels, labels)
    assert list(got.preds) == list(preds)
    for cell, row in preds.items():
        np.testing.assert_array_equal(got.preds[cell], row)


def test_outcomes_refuse_what_a_loop_refused() -> None:
    ok = UnitPredictions("m", "clean", 0, 0, [0, 1], [0, 1], [0, 1], True)
    with pytest.raises(ValueError, match="no stored label for images \\[5\\]"):
        image_outcomes([ok, UnitPredictions("m", "blur", 1, 0, [0], [5], None, True)])
    with pytest.raises(ValueError, match="stores 1 predictions for 2 images"):
        image_outcomes([ok, UnitPredictions("m", "blur", 1, 3, [0], [0, 1], None, True)])
    assert image_outcomes([UnitPredictions("m", "clean", 0, 0, [0, 1], [0, 1], None, False)]).labels is None


@pytest.mark.parametrize("adaptive", [False, True])
def test_read_outcomes_equal_the_validated_units_outcomes(store: Store, adaptive: bool) -> None:
    store._upsert_many("runs", [{"run_id": "r1", "domain_id": "d", "status": "done", "created_at": "2026-01-01",
                                 "domain": {"domain": "x", "corruptions": []},
                                 "config": {"models": ["m1", "m2"], "dataset": "sample", "adaptive": adaptive}}])
    fill(store, "r1", 200, 2, shift=True)
    found = read_outcomes(store, "r1")
    units = store.units("r1")
    want = image_outcomes(units)
    np.testing.assert_array_equal(found.outcomes().indices, want.indices)
    np.testing.assert_array_equal(found.outcomes().labels, want.labels)
    assert list(found.outcomes().preds) == list(want.preds)
    for cell, row in want.preds.items():
        np.testing.assert_array_equal(found.outcomes().preds[cell], row)
    assert sorted(u.cell for u in found.shift_units) == [("m1", "shift:dim", 1), ("m2", "shift:dim", 1)]
    assert found.shift_units == tuple(u for u in units if u.corruption.startswith("shift:"))
    assert (found.adaptive_units == tuple(units)) if adaptive else found.adaptive_units is None

"""Compact units: packed per-image arrays and sparse confusions round-trip exactly, a unit of 1,000
images at 1,000 classes stays under 32 KB in SQLite and in BSON, and a report built from the
stored counts equals one built from the per-image arrays (property test over random units)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import bson
import mongomock
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import balanced_accuracy_score, confusion_matrix

from domainbench.records.confusion import SparseConfusion
from domainbench.metrics.aggregate import summarize
from domainbench.metrics.classification import balanced_accuracy
from domainbench.records.packed import PLAIN_MAX, PackedArray
from domainbench.store.indexes import PARTS
from domainbench.store.mongo_store import MongoStore
from domainbench.store.records import UnitRecord
from domainbench.store.sqlite_store import SQLiteStore

LIMIT = 32 * 1024


def roundtrip(a: PackedArray) -> PackedArray:
    return PackedArray.coerce(json.loads(json.dumps(a.to_json())))


@pytest.mark.parametrize("lo, hi, dtype", [(0, 127, "|i1"), (-5, 999, "<i2"), (0, 40_000, "<i4"), (-(2**40), 2**40, "<i8")])
def test_integers_pack_in_the_narrowest_dtype_and_come_back_exactly(lo: int, hi: int, dtype: str) -> None:
    rng = np.random.default_rng(0)
    values = rng.integers(lo, hi, 500, endpoint=True)
    values[:2] = [hi, lo]  # unsorted, both extremes present
    packed = PackedArray(values).to_json()
    assert isinstance(packed, dict) and packed["dtype"] == dtype and "first" not in packed
    np.testing.assert_array_equal(roundtrip(PackedArray(values)).array, values)


def test_sorted_integers_are_stored_as_differences() -> None:
    values = np.arange(10**6, 10**6 + 1000)
    packed = PackedArray(values).to_json()
    assert packed["first"] == 10**6 and packed["dtype"] == "|i1"  # differences of 1
    assert len(packed["zlib"]) < 100
    np.testing.assert_array_equal(roundtrip(PackedArray(values)).array, values)


def test_floats_keep_every_bit() -> None:
    values = np.random.default_rng(1).random(300).astype(np.float32)
    back = roundtrip(PackedArray(values)).array
    assert back.dtype == np.float32 and back.tobytes() == values.tobytes()


def test_short_arrays_stay_plain_lists_and_old_lists_read() -> None:
    assert PackedArray(list(range(PLAIN_MAX))).to_json() == list(range(PLAIN_MAX))
    assert isinstance(PackedArray(list(range(PLAIN_MAX + 1))).to_json(), dict)
    a = PackedArray.coerce([3, 1, 2])
    assert a == [3, 1, 2] and list(a) == [3, 1, 2] and len(a) == 3 and a[1] == 1


def test_a_packed_array_decodes_only_when_read() -> None:
    a = PackedArray.coerce(PackedArray(np.arange(1000) % 7).to_json())
    assert len(a) == 1000 and a._array is None
    assert int(np.asarray(a).sum()) == int((np.arange(1000) % 7).sum())


def test_sparse_confusion_equals_scikit_learn() -> None:
    rng = np.random.default_rng(2)
    c = 30
    y, p = rng.integers(0, c, 400), rng.integers(0, c, 400)
    p[:200] = y[:200]
    sc = SparseConfusion.from_pairs(y, p, c)
    ref = confusion_matrix(y, p, labels=range(c))
    np.testing.assert_array_equal(np.asarray(sc), ref)
    np.testing.assert_array_equal(sc.support(), ref.sum(axis=1))
    np.testing.assert_array_equal(sc.correct(), np.diag(ref))
    assert sc == ref.tolist() and SparseConfusion.from_dense(ref) == sc and sc.total == 400
    halves = SparseConfusion.total_of([SparseConfusion.from_pairs(y[:150], p[:150], c),
                                       SparseConfusion.from_pairs(y[150:], p[150:], c)])
    assert halves == sc


def test_dense_rows_read_as_the_checked_sparse_cells() -> None:
    # the dense (older) form skips the order and range checks its construction guarantees, never the sign's
    rng = np.random.default_rng(5)
    dense = rng.integers(0, 3, (7, 7)) * (rng.random((7, 7)) < 0.5)
    read = SparseConfusion.coerce(dense.tolist())
    read.check()  # what the full check would say of the same cells
    np.testing.assert_array_equal(np.asarray(read), dense)
    assert read == SparseConfusion.coerce({"classes": 7, "index": read.index.tolist(), "count": read.count.tolist()})
    dense[2, 4] = -1
    with pytest.raises(ValueError, match="negative counts"):
        SparseConfusion.coerce(dense.tolist())
    with pytest.raises(ValueError, match="negative counts"):
        SparseConfusion.coerce({"classes": 2, "index": [0, 3], "count": [1, -1]})
    assert SparseConfusion.coerce([[0, 0], [0, 0]]).total == 0


def big_unit(**kw: Any) -> UnitRecord:
    """A unit of 1,000 images at 1,000 classes, half of them right, as the engine writes it."""
    rng = np.random.default_rng(3)
    n, c = 1000, 1000
    labels = rng.permutation(np.arange(n) % c)
    preds = np.where(rng.random(n) < 0.5, labels, rng.integers(0, c, n))
    return UnitRecord(
        run_id="20261125-000000-big-label-set-abcd", model="open_clip:ViT-L-14-quickgelu/openai",
        corruption="gaussian_noise", severity=3, shard=12, n=n,
        confusion=SparseConfusion.from_pairs(labels, preds, c), flips=int((preds != labels).sum()),
        preds=preds, indices=np.arange(12_000, 12_000 + n), labels=labels,
        hits=(preds == labels).astype(np.int8), confidence=rng.random(n).astype(np.float32),
        params={"severity": 0.38}, seed=0, classes=[f"imagenet class number {i}" for i in range(c)],
        elapsed_s=1.5, computed_at="2026-11-25T00:00:00+00:00", **kw,
    )


def assert_same_unit(a: UnitRecord, b: UnitRecord) -> None:
    for f in ("preds", "indices", "labels", "hits"):
        np.testing.assert_array_equal(np.asarray(getattr(a, f)), np.asarray(getattr(b, f)))
    assert np.asarray(a.confidence).tobytes() == np.asarray(b.confidence).tobytes()
    assert a.confusion == b.confusion and a.model_dump(mode="json") == b.model_dump(mode="json")


def test_a_1000_class_unit_takes_under_32_kb_in_sqlite(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.sqlite")
    unit = big_unit()
    store.upsert("units", unit)
    (doc,) = sqlite3.connect(tmp_path / "s.sqlite").execute("SELECT doc FROM units").fetchone()
    assert len(doc.encode()) <= LIMIT, len(doc)
    assert_same_unit(store.units(unit.run_id)[0], unit)


def test_a_1000_class_unit_takes_under_32_kb_in_bson() -> None:
    client = mongomock.MongoClient()
    store = MongoStore("mongodb://localhost/compact", client=client)
    unit = big_unit()
    store.upsert("units", unit)
    sizes = [len(bson.encode(d)) for d in client["compact"]["units"].find()]
    sizes += [len(bson.encode(d)) for d in client["compact"][PARTS].find()]
    assert sum(sizes) <= LIMIT, sizes
    assert_same_unit(store.units(unit.run_id)[0], unit)


def engine_unit(store: Any, corruption: str, severity: int) -> tuple[UnitRecord, dict[str, list[Any]]]:
    """``big_unit``'s images as the engine's own ``write_unit`` stores them for a cell of ``corruption``, with
    what its kernel drew for the 1,000 images in hand as a shard has them (64 px: shadow's polygons take 45 KB
    packed); returns the stored unit and the draws."""
    from types import SimpleNamespace

    from domainbench import corruptions
    from domainbench.engine.jobs import Corrupted
    from domainbench.engine.shards import write_unit
    from domainbench.engine.tasks import Cell

    ref = big_unit()
    images = np.zeros((ref.n, 64, 64, 3), dtype=np.uint8)
    _, drawn = corruptions.corrupt_batch(images, corruption, severity=severity, seeds=list(range(ref.n)),
                                         return_drawn=True)
    ctx = SimpleNamespace(run_id=ref.run_id, cfg=SimpleNamespace(seed=0), dataset=SimpleNamespace(classes=ref.classes),
                          store=store)
    batch = SimpleNamespace(labels=np.asarray(ref.labels), indices=np.asarray(ref.indices), unreadable=[])
    cell = Cell(corruption, severity, None, corruptions.resolve_params(corruption, severity=severity))
    clean = np.asarray(ref.labels)
    write_unit(ctx, SimpleNamespace(name=ref.model), cell, ref.shard, batch, np.asarray(ref.preds), clean,
               Corrupted(images, drawn), 0.0, confidence=np.asarray(ref.confidence))
    (unit,) = store.units(ref.run_id)
    assert unit.params == cell.applied and np.array_equal(np.asarray(unit.preds), np.asarray(ref.preds))
    return unit, drawn


@pytest.mark.parametrize("corruption, severity", [("gaussian_noise", 3), ("shadow", 5)])
def test_a_1000_class_unit_of_any_cell_takes_under_32_kb_as_the_engine_writes_it(corruption: str, severity: int,
                                                                                   tmp_path: Path) -> None:
    """Per-image draws (shadow's polygons) are not stored in units (``query.drawn_of`` makes them again): the
    engine's unit of a shadow cell takes what a plain cell's does, where its draws alone took more than 32 KB."""
    from domainbench.records.drawn_params import pack_params

    client = mongomock.MongoClient()
    mongo = MongoStore("mongodb://localhost/compact", client=client)
    sqlite = SQLiteStore(tmp_path / "s.sqlite")
    (unit, drawn), (again, _) = engine_unit(sqlite, corruption, severity), engine_unit(mongo, corruption, severity)
    (doc,) = sqlite3.connect(tmp_path / "s.sqlite").execute("SELECT doc FROM units").fetchone()
    docs = list(client["compact"]["units"].find()) + list(client["compact"][PARTS].find())
    assert len(doc.encode()) <= LIMIT and sum(len(bson.encode(d)) for d in docs) <= LIMIT
    assert "drawn" not in json.loads(doc)["params"]
    when = {"computed_at", "elapsed_s"}
    assert unit.model_dump(mode="json", exclude=when) == again.model_dump(mode="json", exclude=when)
    if corruption == "shadow":
        assert len(json.dumps(pack_params({"drawn": drawn})["drawn"])) > LIMIT  # what storing them would have cost


# --------------------------------------------------------------------------- counts vs arrays

@st.composite
def random_units(draw: st.DrawFn) -> tuple[list[dict[str, Any]], dict[tuple[str, str, int], tuple[np.ndarray, np.ndarray]]]:
    """Units of 2 models over random cells and shards, with their per-image (labels, preds)."""
    n_classes = draw(st.integers(2, 6))
    classes = [f"c{i}" for i in range(n_classes)]
    cells = [("clean", 0)] + [("blur", s) for s in range(1, draw(st.integers(1, 3)) + 1)] + [("fog", 1), ("fog", 2)]
    n_shards = draw(st.integers(1, 3))
    seed = draw(st.integers(0, 2**31))
    rng = np.random.default_rng(seed)
    sizes = [int(rng.integers(1, 12)) for _ in range(n_shards)]
    labels = [rng.integers(0, n_classes, s) for s in sizes]
    units, arrays = [], {}
    for model in ("base", "other"):
        clean = [rng.integers(0, n_classes, s) for s in sizes]
        for corr, sev in cells:
            per_shard = clean if corr == "clean" else [
                np.where(rng.random(s) < 0.6, c, rng.integers(0, n_classes, s)) for s, c in zip(sizes, clean)]
            for shard, (y, p, c) in enumerate(zip(labels, per_shard, clean)):
                units.append(dict(
                    schema_version=2, run_id="r", model=model, corruption=corr, severity=sev, shard=shard, n=len(y),
                    confusion=SparseConfusion.from_pairs(y, p, n_classes).to_json(), flips=int((p != c).sum()),
                    seed=0, classes=classes))
            arrays[(model, corr, sev)] = (np.concatenate(labels), np.concatenate(per_shard))
    return units, arrays


@pytest.mark.filterwarnings("ignore::UserWarning")
@settings(max_examples=60, deadline=None)
@given(random_units())
def test_report_from_counts_equals_report_from_per_image_arrays(case: Any) -> None:
    units, arrays = case
    from_counts = summarize(units, baseline="base")
    # the arrays' way: a dense confusion per cell from every image, as units were stored before
    dense_units = []
    for u in units:
        y, p = arrays[(u["model"], u["corruption"], u["severity"])]
        start = sum(x["n"] for x in units if (x["model"], x["corruption"], x["severity"]) == (u["model"], u["corruption"], u["severity"]) and x["shard"] < u["shard"])
        m = np.zeros((len(u["classes"]),) * 2, dtype=np.int64)
        np.add.at(m, (y[start:start + u["n"]], p[start:start + u["n"]]), 1)
        dense_units.append({**u, "schema_version": 1, "confusion": m.tolist()})
    from_arrays = summarize(dense_units, baseline="base")
    assert from_counts.model_dump(mode="json") == from_arrays.model_dump(mode="json")
    for m in from_counts.models:
        for c in [m.clean, *m.cells]:
            y, p = arrays[(m.model, c.corruption, c.severity)]
            assert c.accuracy == balanced_accuracy(confusion_matrix(y, p, labels=range(len(from_counts.classes))))
            assert c.accuracy == pytest.approx(balanced_accuracy_score(y, p), abs=1e-12)

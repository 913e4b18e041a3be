"""A unit's per-image drawn parameters are stored packed and read back exactly as recorded.

References: the plain nested lists the engine recorded (compared with ==, and as JSON text so
ints stay ints and floats keep every bit), and a fixture unit written in the old plain format.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import mongomock
import numpy as np
import pytest

from domainbench import corruptions
from domainbench.records.confusion import SparseConfusion
from domainbench.records.drawn_params import MARKER, pack_params, unpack_params
from domainbench.store.mongo_store import MongoStore
from domainbench.store.records import UnitRecord
from domainbench.store.sqlite_store import SQLiteStore


def _same(a: Any, b: Any) -> bool:
    return a == b and json.dumps(a) == json.dumps(b)  # the JSON text tells 1 from 1.0


def test_the_docstring_example_by_hand() -> None:
    nested = [[[1, 2], [3, 4]], [[5, 6]]] * 40  # 240 leaves: above the plain-list limit
    stored = pack_params({"drawn": {"polygons": nested}})["drawn"]["polygons"][MARKER]
    assert stored["values"]["n"] == 240
    assert [len(x) if isinstance(x, list) else x["n"] for x in stored["lengths"]] == [80, 120]
    assert _same(unpack_params({"drawn": {"polygons": {MARKER: stored}}})["drawn"]["polygons"], nested)


def _random_nested(rng: np.random.Generator, depth: int, floats: bool) -> list[Any]:
    if depth == 0:
        n = int(rng.integers(0, 4))
        return [float(x) for x in rng.normal(0, 1e3, n)] if floats else [int(x) for x in rng.integers(-2**40, 2**40, n)]
    return [_random_nested(rng, depth - 1, floats) for _ in range(int(rng.integers(0, 4)))]


@pytest.mark.parametrize("seed", range(20))
def test_random_ragged_lists_round_trip_exactly(seed: int) -> None:
    rng = np.random.default_rng(seed)
    depth, floats = seed % 4, seed % 2 == 1
    drawn = {"x": [_random_nested(rng, depth, floats) for _ in range(200)],
             "flat": [float(v) for v in rng.random(100)] if floats else [int(v) for v in rng.integers(0, 5, 100)]}
    params = {"scale": 2.5, "drawn": drawn}
    stored = json.loads(json.dumps(pack_params(params)))  # through JSON text, as a store keeps it
    assert _same(unpack_params(stored), params)
    if depth == 0:
        assert isinstance(stored["drawn"]["flat"], dict)


def test_what_is_kept_plain() -> None:
    drawn = {
        "texture": ["imagenet-c"] * 100,  # strings
        "flag": [True, False] * 50,  # booleans are not numbers here
        "mixed": [1, 2.5] * 50,  # one dtype would make the ints floats
        "uneven": [[1, 2], 3] * 50,  # leaves at two depths
        "short": [1.5] * 10,  # packing would make it longer
        "empty": [[], []] * 50,  # no leaves at all
    }
    assert pack_params({"drawn": drawn}) == {"drawn": drawn}
    assert pack_params({"no_drawn": [1] * 100}) == {"no_drawn": [1] * 100}


def _drawn_of(name: str, n: int = 120) -> dict[str, Any]:
    imgs = np.random.default_rng(0).integers(0, 255, (n, 32, 32, 3), dtype=np.uint8)
    if name == "composition":
        _, steps = corruptions.corrupt_composed(imgs, [("shadow", 3), ("motion_blur", 2)], list(range(n)))
        return {"steps": steps}
    _, drawn = corruptions.corrupt_batch(imgs, name, severity=3, seeds=list(range(n)), return_drawn=True)
    return json.loads(json.dumps(drawn))  # as the engine's unit holds it once stored


def _unit(drawn: dict[str, Any], corruption: str = "shadow") -> UnitRecord:
    labels = np.array([0, 1, 1])
    return UnitRecord(run_id="r", model="m", corruption=corruption, severity=3, shard=0, n=3,
                      confusion=SparseConfusion.from_pairs(labels, labels, 2), flips=0, preds=labels,
                      indices=np.arange(3), params={"shadow_intensity": 0.5, "drawn": drawn}, seed=0, classes=["a", "b"])


@pytest.mark.parametrize("name", ["shadow", "occluder", "perspective", "grid_distortion", "frost", "motion_blur",
                                  "composition"])
def test_real_draws_round_trip_through_sqlite_and_mongomock(name: str, tmp_path: Path) -> None:
    drawn = _drawn_of(name)
    unit = _unit(drawn)
    sqlite = SQLiteStore(tmp_path / "u.sqlite")
    sqlite.upsert("units", unit)
    mongo = MongoStore("mongodb://localhost/u", client=mongomock.MongoClient())
    mongo.upsert("units", unit)
    for store in (sqlite, mongo):
        (back,) = store.units("r")
        assert _same(back.params, unit.params) and back == unit
    (doc,) = sqlite3.connect(tmp_path / "u.sqlite").execute("SELECT doc FROM units").fetchone()
    plain = len(json.dumps(drawn))
    stored = len(json.dumps(json.loads(doc)["params"]["drawn"]))
    if name in ("shadow", "occluder", "perspective", "grid_distortion", "composition"):
        assert stored < 0.6 * plain, (stored, plain)  # random float64s: 8 bytes (base64: 10.7) against ~19 digits


def test_a_unit_stored_with_plain_drawn_lists_reads_unchanged() -> None:
    # a unit document as written before drawn parameters were packed (schema 2, plain lists)
    old = {"schema_version": 2, "run_id": "r", "model": "m", "corruption": "shadow", "severity": 3, "shard": 0, "n": 2,
           "confusion": [[1, 0], [0, 1]], "flips": 0, "n_unreadable": 0,
           "params": {"shadow_intensity": 0.5, "drawn": {"polygons": [[[[1, 2], [3, 4], [5, 6]]], [[[7, 8], [9, 10], [11, 12]]]]}},
           "seed": 0, "classes": ["a", "b"], "preds": [0, 1], "indices": [0, 1]}
    unit = UnitRecord.model_validate(old)
    assert unit.params == old["params"]
    assert unit.model_dump(mode="json")["params"] == old["params"]  # short: still plain when written again

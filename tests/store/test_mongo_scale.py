"""MongoDB for real use: the indexes serve every query shape the engine, the report and the UI
make, no stored document nears the 16 MB limit at 10,000 images per shard, and wrong
credentials are one line naming the variable without the password."""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Any

import bson
import mongomock
import numpy as np
import pytest

from domainbench import corruptions
from domainbench.records.config import CorruptionChoice, DomainConfig, RunConfig
from domainbench.engine.reports import build_report, load_report
from domainbench.engine.runner import Engine
from domainbench.store import mongo_parts
from domainbench.store.indexes import INDEXES, PARTS, QueryShape, serving_index
from domainbench.store.mongo_store import MongoStore
from domainbench.store.records import StabilityRecord, UnitRecord
from domainbench.store.sqlite_store import SQLiteStore

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))
import fake_models  # noqa: E402,F401  (registers the fake: backend)

MONGO_LIMIT = 16 * 1024 * 1024
N = 10_000


class RecordingStore(SQLiteStore):
    """The embedded store, noting the shape of every query made through it."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.shapes: set[QueryShape] = set()
        self.sort: str | None = None

    def _find(self, collection: str, where: dict[str, Any]) -> list[dict[str, Any]]:
        self.shapes.add(QueryShape(collection, frozenset(where), self.sort))
        return super()._find(collection, where)

    def keys(self, collection: str, **where: Any) -> set[tuple[Any, ...]]:
        self.shapes.add(QueryShape(collection, frozenset(where)))
        return super().keys(collection, **where)

    def delete(self, collection: str, **where: Any) -> int:
        self.shapes.add(QueryShape(collection, frozenset(where)))
        return super().delete(collection, **where)

    def list_runs(self) -> list[Any]:
        self.sort = "created_at"  # the listing is sorted newest first (by MongoDB, on the "recent" index)
        try:
            return super().list_runs()
        finally:
            self.sort = None


# what the UI asks (frontend/data.py, frontend/views): run lists, one run, its records, domains newest first
UI_SHAPES = [
    QueryShape("runs", frozenset(), sort="created_at"),
    QueryShape("runs", frozenset({"run_id"})),
    QueryShape("units", frozenset({"run_id"})),
    QueryShape("threat", frozenset({"run_id"})),
    QueryShape("stability", frozenset({"run_id"})),
    QueryShape("summaries", frozenset({"run_id"})),
    QueryShape("domains", frozenset(), sort="created_at"),
    QueryShape("domains", frozenset({"domain_id"})),
    # the worker's claim (find_one_and_update on status, oldest queued first)
    QueryShape("runs", frozenset({"status"}), sort="queued_at"),
]


def test_every_query_shape_is_served_by_an_index(tmp_path: Path) -> None:
    store = RecordingStore(tmp_path / "db.sqlite")
    domain = DomainConfig(domain="shapes", corruptions=[CorruptionChoice(name="gaussian_noise", severities=[1], reason="r")])
    cfg = RunConfig(models=["fake:a", "fake:b"], limit=20, shard_size=10, workers=0, stability_points=2,
                    stability_images=4, threat_anchors=2)
    engine = Engine(store)
    run_id = engine.start(domain, cfg)
    store.delete("units", run_id=run_id, model="fake:b", corruption="gaussian_noise", severity=1, shard=1)
    Engine(store).resume(run_id)
    build_report(store, run_id)
    load_report(store, run_id, baseline="fake:b")
    store.list_runs()
    store.delete_run(run_id)
    shapes = store.shapes | set(UI_SHAPES)
    assert QueryShape("units", frozenset({"run_id", "model", "corruption", "severity", "shard"})) in shapes
    unserved = [s for s in shapes if serving_index(s) is None]
    assert unserved == []
    # per-run queries are bounded by the key index's leading run_id, whatever else they filter on
    for s in shapes:
        if "run_id" in s.equals:
            assert serving_index(s).name == "key"  # type: ignore[union-attr]


def test_a_collection_scan_would_be_caught() -> None:
    assert serving_index(QueryShape("units", frozenset({"model"}))) is None
    assert serving_index(QueryShape("units", frozenset())) is None
    assert serving_index(QueryShape("runs", frozenset(), sort="created_at")).name == "recent"  # type: ignore[union-attr]


def test_mongo_store_creates_the_declared_indexes() -> None:
    client = mongomock.MongoClient()
    MongoStore("mongodb://localhost/ix", client=client)
    for coll, specs in INDEXES.items():
        info = client["ix"][coll].index_information()
        for spec in specs:
            assert info[spec.name]["key"] == list(spec.fields)
            assert bool(info[spec.name].get("unique")) == spec.unique


@functools.lru_cache(maxsize=None)
def _drawn() -> dict[str, list[Any]]:
    """What shadow (the library's largest per-image record: polygons) draws, for 10,000 images."""
    tiny = np.zeros((2, 32, 32, 3), np.uint8)
    _, drawn = corruptions.corrupt_batch(tiny, "shadow", severity=5, seeds=[1, 2], return_drawn=True)
    assert drawn, "shadow records what it drew per image"
    return {k: (v * (N // 2))[:N] for k, v in drawn.items()}


def _worst_doc(n_classes: int) -> dict[str, Any]:
    """A unit document at 10,000 images with per-image drawn parameters and an n-class confusion matrix."""
    rng = np.random.default_rng(0)
    labels, preds = rng.integers(0, n_classes, N), rng.integers(0, n_classes, N)
    conf = np.bincount(labels * n_classes + preds, minlength=n_classes**2).reshape(n_classes, n_classes)
    return dict(
        run_id="20261122-233000-warehouse-phone-photos-1a2b", model="open_clip:ViT-L-14-quickgelu/openai",
        corruption="shadow", severity=5, shard=999, n=N, confusion=conf.tolist(), flips=int((labels != preds).sum()),
        preds=preds.tolist(), indices=list(range(10**6, 10**6 + N)), n_unreadable=0,
        params={**corruptions.resolve_params("shadow", severity=5), "drawn": _drawn()}, seed=0,
        classes=[f"class name number {i} of a large label set" for i in range(n_classes)], labels=labels.tolist(),
        elapsed_s=1.0, computed_at="2026-11-22T23:30:00+00:00",
    )


def _sizes(client: mongomock.MongoClient, db: str) -> dict[str, int]:
    """Largest BSON document per collection, as stored."""
    return {c: max((len(bson.encode(d)) for d in client[db][c].find()), default=0) for c in client[db].list_collection_names()}


@pytest.mark.parametrize("n_classes", [1000, 2000])
def test_split_and_join_are_inverse(n_classes: int) -> None:
    doc = _worst_doc(n_classes)
    main, parts = mongo_parts.split(doc)
    assert len(bson.encode(main)) <= mongo_parts.SPLIT_ABOVE
    assert max(mongo_parts.bson_size(v) for _, _, v in parts) <= mongo_parts.PART_BYTES * 1.05
    assert {tuple(p) for p, _, _ in parts} >= {("confusion",), ("params", "drawn", "polygons")}
    back = mongo_parts.join(main, [{"path": p, "part": i, "values": v} for p, i, v in parts])
    assert back == doc


def test_documents_stay_under_16_mb_at_10000_images_per_shard() -> None:
    # 10 classes; the drawn polygons are stored packed (~17 KB: domainbench.records.drawn_params), so per-image
    # strings (stored as plain lists) put the unit over the split threshold (4.6 MB);
    # mongomock is too slow for the 1000-class document, whose split is checked above
    doc = _worst_doc(10)
    texture = [f"texture {i:05d} " + "x" * 440 for i in range(N)]
    doc["params"] = {**doc["params"], "drawn": {**doc["params"]["drawn"], "texture": texture}}
    unit = UnitRecord.model_validate(doc)
    whole = len(bson.encode(unit.model_dump(mode="json")))
    assert whole > mongo_parts.SPLIT_ABOVE
    client = mongomock.MongoClient()
    store = MongoStore("mongodb://localhost/big", client=client)
    store.upsert("units", unit)
    store.upsert("units", unit)  # a rewrite keeps one generation of parts
    sizes = _sizes(client, "big")
    assert max(sizes.values()) <= mongo_parts.SPLIT_ABOVE + mongo_parts.PART_BYTES < MONGO_LIMIT
    assert sizes["units"] < 1_000_000 and client["big"][PARTS].count_documents({}) >= 3
    assert len(client["big"][PARTS].distinct("gen")) == 1
    assert store.units(unit.run_id) == [unit]  # every per-image value back, in order
    store.delete_run(unit.run_id)
    assert client["big"][PARTS].count_documents({}) == 0 and store.units(unit.run_id) == []


def test_worst_case_sizes_are_what_docs_scale_md_quotes() -> None:
    mb = lambda n: len(bson.encode(_worst_doc(n))) / 1e6  # noqa: E731
    assert 4.5 < mb(10) < 5.5  # drawn shadow polygons dominate: ~460 bytes per image
    assert 13 < mb(1000) < 15  # + a 1000 x 1000 confusion matrix: under 16 MB, but not by much
    assert mb(2000) > 16.8  # would not fit without splitting
    rng = np.random.default_rng(0)
    stab = StabilityRecord(run_id="r" * 40, model="m" * 40, corruption="shadow", shard=999, indices=list(range(N)),
                           points=5, grid=[{"shadow_intensity": 0.5}] * 5,
                           **{k: rng.random(N).tolist() for k in ("divergence_radius", "cosine", "euclidean", "gap")})
    assert len(bson.encode(stab.model_dump(mode="json"))) < 1_000_000


def test_wrong_credentials_are_one_line_naming_the_variable(home: Path, capsys: pytest.CaptureFixture[str],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    import pymongo

    from domainbench.app.cli import main

    class Refusing(mongomock.MongoClient):  # what pymongo raises when the server has auth on
        def __getitem__(self, name: str) -> Any:
            db = super().__getitem__(name)

            class Coll:
                def __init__(self, *a: Any) -> None:
                    pass

                def create_index(self, *a: Any, **k: Any) -> None:
                    raise pymongo.errors.OperationFailure("Authentication failed. user=bob pwd=hunter2", code=18)

            return {c: Coll() for c in [*INDEXES]} | {"__db": db}

    monkeypatch.setattr(pymongo, "MongoClient", lambda *a, **k: Refusing())
    monkeypatch.setenv("DOMAINBENCH_MONGO_URI", "mongodb://bob:hunter2@db.example:27017/domainbench")
    monkeypatch.setattr(sys, "argv", ["domainbench", "ls"])
    with pytest.raises(SystemExit) as e:
        main()
    out = capsys.readouterr()
    assert e.value.code == 2
    lines = [ln for ln in out.err.splitlines() if ln.strip()]
    assert len(lines) == 1, out.err
    line = lines[0]
    assert line.startswith("error: DOMAINBENCH_MONGO_URI=mongodb://bob:***@db.example:27017/domainbench")
    assert "refused the credentials" in line and "authentication failed" in line
    assert "hunter2" not in out.err + out.out

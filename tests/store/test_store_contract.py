"""One contract, every backend: embedded SQLite, pymongo code over mongomock, and a real
MongoDB when DOMAINBENCH_TEST_MONGO_URI is set."""

from __future__ import annotations

import math
import multiprocessing as mp
from pathlib import Path

import pytest

from domainbench.store import open_store, redact_uri
from domainbench.records.report import RunReport
from domainbench.store.base import Store
from domainbench.store.mongo_store import MongoStore
from domainbench.store.sqlite_store import SQLiteStore

def unit(run: str = "r1", model: str = "m", corruption: str = "fog", severity: int = 1, shard: int = 0, n: int = 10) -> dict:
    return {"run_id": run, "model": model, "corruption": corruption, "severity": severity, "shard": shard,
            "n": n, "confusion": [[n, 0], [0, 0]], "flips": 1, "seed": 0, "classes": ["a", "b"]}


def run_doc(run_id: str, created_at: str, status: str = "running", **extra: object) -> dict:
    return {"run_id": run_id, "domain_id": "d1", "domain": {"domain": "x", "corruptions": []}, "config": {},
            "status": status, "created_at": created_at, **extra}


def report(run_id: str) -> RunReport:
    from domainbench.metrics.run_report import build_report
    from domainbench.store.records import RunRecord, UnitRecord

    units = [UnitRecord.model_validate(unit(run=run_id, corruption="clean", severity=0) | {"flips": 0})]
    return build_report(RunRecord.model_validate(run_doc(run_id, "2026-01-01", config={"models": ["m"]})),
                        units, [], [], baseline="m", version="test")


def test_upsert_is_idempotent_and_keyed(store: Store) -> None:
    store.upsert("units", unit(n=10))
    store.upsert("units", unit(n=12))  # same key: replaces
    store.upsert("units", unit(shard=1))
    docs = store.units("r1")
    assert len(docs) == 2
    assert sorted(d.n for d in docs) == [10, 12]
    assert all(d.schema_version == 2 for d in docs)


def test_find_and_keys_filter_on_key_prefix(store: Store) -> None:
    store.upsert_many("units", [unit(run=r, model=m, severity=s) for r in ("a", "b") for m in ("x", "y") for s in (1, 2, 3)])
    assert len(store.units("a")) == 6
    assert len(store.units("a", model="x")) == 3
    assert store.keys("units", run_id="b", model="y") == {("b", "y", "fog", s, 0) for s in (1, 2, 3)}
    assert store.get("units", run_id="a", model="x", corruption="fog", severity=2, shard=0).severity == 2
    assert store.get("units", run_id="zzz", model="x", corruption="fog", severity=2, shard=0) is None


def test_runs_summaries_and_delete_run(store: Store) -> None:
    store.put_run(run_doc("r1", "2026-01-01"))
    store.put_run(run_doc("r2", "2026-02-01", status="done"))
    store.update_run("r1", status="done")
    assert [r.run_id for r in store.list_runs()] == ["r2", "r1"]
    assert store.get_run("r1").status == "done"
    store.put_report(report("r1"))
    assert store.get_report("r1") == report("r1")
    store.upsert("units", unit())
    store.delete_run("r1")
    assert store.get_run("r1") is None and store.get_report("r1") is None and store.units("r1") == []
    assert store.get_run("r2") is not None


def test_bad_queries_are_named(store: Store) -> None:
    with pytest.raises(ValueError, match="key fields"):
        store.find("units", flips=3)
    with pytest.raises(ValueError, match="unknown collection"):
        store.find("nope")
    with pytest.raises(ValueError, match="invalid units document"):
        store.upsert("units", {"run_id": "r"})


def test_records_are_validated_on_write_and_nothing_lands(store: Store) -> None:
    store.put_run(run_doc("r1", "2026-01-01"))
    with pytest.raises(ValueError, match="status"):
        store.update_run("r1", status="exploded")
    with pytest.raises(ValueError, match="confusion"):
        store.upsert("units", unit(n=3) | {"confusion": [[10, 0], [0, 0]]})  # counts 10 images, not 3
    assert store.get_run("r1").status == "running" and store.units("r1") == []


def test_newer_documents_are_a_clear_error_and_older_runs_migrate(store: Store) -> None:
    from domainbench.store.records import StoreVersionError

    store._upsert_many("runs", [run_doc("new", "2026-01-01") | {"schema_version": 99}])
    with pytest.raises(StoreVersionError, match="schema version 99.*upgrade domainbench"):
        store.get_run("new")
    old = run_doc("old", "2025-01-01") | {"schema_version": 1, "threat_reference": 2.5}
    store._upsert_many("runs", [old])
    assert store.get_run("old").different_class_threat == 2.5
    # a version-1 summary was an untyped dict: it is not read, the report is rebuilt instead
    store._upsert_many("summaries", [{"run_id": "old", "schema_version": 1, "table": []}])
    assert store.get_report("old") is None


def test_units_stored_before_ladder_versions_keep_their_parameters_and_read_as_version_1(store: Store) -> None:
    """A unit written before severities were recalibrated (no ladder_version) stays readable as ladder 1."""
    old_params = {"density": 0.6, "roughness": 0.55}  # fog severity 1 before the ImageNet-C calibration
    store._upsert_many("units", [unit(run="old") | {"schema_version": 1, "params": old_params}])
    store.upsert("units", unit(run="new") | {"params": {"density": 1.5, "decay": 2.0}, "ladder_version": 2})
    (old,) = store.units("old")
    (new,) = store.units("new")
    assert old.ladder_version == 1 and old.params == old_params
    assert new.ladder_version == 2 and old.ladder_version != new.ladder_version


def test_sqlite_rejects_nan_and_keeps_old_doc(tmp_path: Path) -> None:
    s = SQLiteStore(tmp_path / "s.sqlite")
    s.upsert("units", unit(n=5))
    with pytest.raises(ValueError):
        s.upsert("units", unit() | {"elapsed_s": math.nan})
    assert s.units("r1")[0].n == 5


def _writer(path: str, worker: int, count: int) -> None:
    s = SQLiteStore(Path(path))
    for i in range(count):
        s.upsert("units", unit(model=f"w{worker}", shard=i, n=i) | {"flips": 0})
        if i % 10 == 0:  # re-upserting a finished unit must not duplicate it
            s.upsert("units", unit(model=f"w{worker}", shard=i, n=i) | {"flips": 0})


def _reader(path: str, rounds: int, out: mp.Queue) -> None:
    s = SQLiteStore(Path(path))
    seen = 0
    for _ in range(rounds):
        docs = s.units("r1")
        assert all(d.n == d.shard for d in docs)
        seen = max(seen, len(docs))
    out.put(seen)


def test_two_writers_and_a_reader_lose_nothing(tmp_path: Path) -> None:
    path = str(tmp_path / "shared.sqlite")
    SQLiteStore(Path(path))
    ctx = mp.get_context("spawn")
    q: mp.Queue = ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(path, w, 200)) for w in (0, 1)]
    procs.append(ctx.Process(target=_reader, args=(path, 50, q)))
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    s = SQLiteStore(Path(path))
    docs = s.units("r1")
    assert len(docs) == 400
    assert {(d.model, d.shard) for d in docs} == {(f"w{w}", i) for w in (0, 1) for i in range(200)}
    assert q.get(timeout=5) <= 400
    assert s._conn().execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_open_store_selects_backend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOMAINBENCH_HOME", str(tmp_path / "home"))
    s = open_store()
    assert isinstance(s, SQLiteStore) and s.path == tmp_path / "home" / "domainbench.sqlite"
    from domainbench.errors import UserInputError

    with pytest.raises(UserInputError) as e:
        open_store("postgres://user:hunter2@db/x")
    assert "hunter2" not in str(e.value)


def test_redact_uri_hides_passwords() -> None:
    assert redact_uri("mongodb://alice:s3cr3t@db:27017/x") == "mongodb://alice:***@db:27017/x"
    assert redact_uri("mongodb://db:27017/x") == "mongodb://db:27017/x"


def test_unreachable_mongo_error_hides_password() -> None:
    from domainbench.errors import UserInputError

    with pytest.raises(UserInputError) as e:
        MongoStore("mongodb://bob:topsecret@127.0.0.1:9/x", timeout_ms=200)
    assert "topsecret" not in str(e.value) and "bob:***" in str(e.value)

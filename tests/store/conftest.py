"""The store every contract test runs on: embedded SQLite, pymongo code over mongomock, and a real
MongoDB when DOMAINBENCH_TEST_MONGO_URI is set."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from domainbench.store.base import COLLECTIONS, Store
from domainbench.store.mongo_store import MongoStore
from domainbench.store.sqlite_store import SQLiteStore

MONGO_URI = os.environ.get("DOMAINBENCH_TEST_MONGO_URI")
BACKENDS = ["sqlite", "mongomock"] + (["mongo"] if MONGO_URI else [])


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "sqlite":
        s: Store = SQLiteStore(tmp_path / "s.sqlite")
    elif request.param == "mongomock":
        import mongomock

        s = MongoStore("mongodb://localhost/dbtest", client=mongomock.MongoClient())
    else:
        s = MongoStore(MONGO_URI, db=f"domainbench_test_{os.getpid()}")  # type: ignore[arg-type]
    yield s
    for coll in COLLECTIONS:
        s.delete(coll)
    s.close()

"""Embedded store: one SQLite file in WAL mode, JSON documents, indexed key columns.

Why SQLite and not a pymongo look-alike: WAL gives one writer and many readers across
processes (the UI and a worker) without corruption, and the primary-key index keeps one
upsert or lookup O(log n) however large the store grows.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
from pathlib import Path
from collections.abc import Iterator
from typing import Any

from domainbench.errors import StoreUnavailableError
from domainbench.store.base import COLLECTIONS, Store, key_of
from domainbench.store.fence import Fence


class SQLiteStore(Store):
    def __init__(self, path: Path, timeout_s: float = 60.0) -> None:
        self.path = Path(path)
        self.description = f"embedded SQLite at {self.path}"
        self._timeout = timeout_s
        self._local = threading.local()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = self._conn()
            with conn:
                for coll, fields in COLLECTIONS.items():
                    cols = ", ".join(f"{f}" for f in fields)
                    conn.execute(
                        f"CREATE TABLE IF NOT EXISTS {coll} ({cols}, doc TEXT NOT NULL, PRIMARY KEY ({cols})) WITHOUT ROWID"
                    )
        except (OSError, sqlite3.Error) as e:
            self.close()
            raise StoreUnavailableError(f"cannot open the embedded store {self.path}: {_open_failure(self.path, e)}") from e

    def _conn(self) -> sqlite3.Connection:
        # one connection per thread: Streamlit serves each session on its own thread
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=self._timeout, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute(f"PRAGMA busy_timeout={int(self._timeout * 1000)}")
            self._local.conn = conn
        return conn

    def _upsert_many(self, collection: str, docs: list[dict[str, Any]], fence: Fence | None = None) -> None:
        fields = COLLECTIONS[collection]
        rows = [(*key_of(collection, d), json.dumps(d, allow_nan=False)) for d in docs]
        cols = ", ".join(fields)
        marks = ", ".join("?" for _ in range(len(fields) + 1))
        sql = f"INSERT INTO {collection} ({cols}, doc) VALUES ({marks}) ON CONFLICT ({cols}) DO UPDATE SET doc = excluded.doc"
        conn = self._conn()
        # BEGIN IMMEDIATE takes the write lock up front, so concurrent writers queue
        # on busy_timeout instead of failing mid-transaction
        with self._transaction(conn, fence):
            conn.executemany(sql, rows)

    @contextlib.contextmanager
    def _transaction(self, conn: sqlite3.Connection, fence: Fence | None) -> Iterator[None]:
        """One write transaction; with a ``fence``, the lease is checked inside it (LeaseLost: nothing written)."""
        conn.execute("BEGIN IMMEDIATE")
        try:
            if fence is not None:
                row = conn.execute("SELECT doc FROM runs WHERE run_id = ?", (fence.run_id,)).fetchone()
                if not fence.holds(json.loads(row[0]) if row else None):
                    raise fence.lost()
            yield
            conn.execute("COMMIT")
        except BaseException:
            # a failed COMMIT (disk full) may already have ended the transaction: rolling back
            # again would raise "cannot rollback" and hide why the write failed
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            raise

    def _where(self, collection: str, where: dict[str, Any]) -> tuple[str, list[Any]]:
        self._check_where(collection, where)
        if not where:
            return "", []
        return " WHERE " + " AND ".join(f"{k} = ?" for k in where), list(where.values())

    def _find(self, collection: str, where: dict[str, Any]) -> list[dict[str, Any]]:
        clause, args = self._where(collection, where)
        rows = self._conn().execute(f"SELECT doc FROM {collection}{clause}", args).fetchall()
        return [json.loads(r[0]) for r in rows]

    def _unit_prediction_docs(self, run_id: str) -> list[dict[str, Any]]:
        # the fields alone, extracted by SQLite and returned as one JSON array: parsing every whole document
        # (its confusion, params, calibration) in Python is what made a large run's outcomes slow to read
        fields = ", ".join(f"'{f}', json_extract(doc, '$.{f}')"
                           for f in ("schema_version", "preds", "indices", "labels"))
        keys = ", ".join(f"'{f}', {f}" for f in ("model", "corruption", "severity", "shard"))
        # whether a confusion matrix is stored, not the matrix: 1 stands in for one
        fields += ", 'confusion', CASE WHEN coalesce(json_type(doc, '$.confusion'), 'null') = 'null' THEN NULL ELSE 1 END"
        row = self._conn().execute(f"SELECT json_group_array(json_object({keys}, {fields})) FROM units WHERE run_id = ?",
                                   (run_id,)).fetchone()
        docs = json.loads(row[0]) if row and row[0] else []
        for d in docs:  # a missing version reads as 1, as in ``records.upgrade``; json_object wrote it as null
            if d["schema_version"] is None:
                del d["schema_version"]
        return docs

    def keys(self, collection: str, **where: Any) -> set[tuple[Any, ...]]:
        clause, args = self._where(collection, where)
        cols = ", ".join(COLLECTIONS[collection])
        return {tuple(r) for r in self._conn().execute(f"SELECT {cols} FROM {collection}{clause}", args)}

    def delete(self, collection: str, fence: Fence | None = None, **where: Any) -> int:
        clause, args = self._where(collection, where)
        conn = self._conn()
        if fence is None:
            return conn.execute(f"DELETE FROM {collection}{clause}", args).rowcount
        with self._transaction(conn, fence):
            return conn.execute(f"DELETE FROM {collection}{clause}", args).rowcount

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None


def _open_failure(path: Path, e: OSError | sqlite3.Error) -> str:
    """Why ``path`` cannot be opened, in the user's terms (sqlite's own words are terse)."""
    blocker = next((p for p in path.parents if p.exists() and not p.is_dir()), None)
    if blocker is not None:
        return f"{blocker} is a file, not a directory"
    if isinstance(e, OSError):
        return f"cannot create the directory {path.parent} ({e.strerror or e})"
    if path.is_dir():
        return "it is a directory, not a file"
    if "not a database" in str(e):
        return f"the file is damaged or not a SQLite database ({e})"
    if not os.access(path.parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        return f"it is not writable ({e})"
    return str(e)

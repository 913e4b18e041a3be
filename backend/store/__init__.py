"""The result store: one repository API over two backends.

- MongoDB through pymongo when ``DOMAINBENCH_MONGO_URI`` is set (a real deployment);
- an embedded SQLite file under ``$DOMAINBENCH_HOME`` (default ``./.domainbench``) otherwise.

Every collection has key fields; writes are idempotent upserts on them, so a resumed or
repeated run never duplicates a document.
"""

from __future__ import annotations

import os
from pathlib import Path

from backend.store.base import COLLECTIONS, SCHEMA_VERSION, Store, redact_uri

ENV_URI = "DOMAINBENCH_MONGO_URI"
ENV_HOME = "DOMAINBENCH_HOME"


def home_dir() -> Path:
    return Path(os.environ.get(ENV_HOME, ".domainbench")).expanduser()


def open_store(uri: str | None = None) -> Store:
    """The configured store: ``uri`` or $DOMAINBENCH_MONGO_URI, else the embedded SQLite file."""
    uri = uri or os.environ.get(ENV_URI)
    if uri and uri.startswith(("mongodb://", "mongodb+srv://")):
        from backend.store.mongo_store import MongoStore

        return MongoStore(uri)
    if uri and uri.startswith("sqlite:///"):
        from backend.store.sqlite_store import SQLiteStore

        return SQLiteStore(Path(uri.removeprefix("sqlite:///")))
    if uri:
        from backend.errors import UserInputError

        raise UserInputError(
            f"store URI {redact_uri(uri)!r} is not understood: use mongodb://HOST:PORT/DB or sqlite:///PATH"
        )
    from backend.store.sqlite_store import SQLiteStore

    return SQLiteStore(home_dir() / "domainbench.sqlite")


__all__ = ["COLLECTIONS", "SCHEMA_VERSION", "Store", "home_dir", "open_store", "redact_uri"]

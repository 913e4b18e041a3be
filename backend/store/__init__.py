"""The result store: one repository API over two backends.

- MongoDB through pymongo when ``DOMAINBENCH_MONGO_URI`` is set (a real deployment);
- an embedded SQLite file under ``$DOMAINBENCH_HOME`` (default ``./.domainbench``) otherwise.

The entry points read those variables once (``domainbench.runtime.settings.Settings``) and pass them to
``open_store``; a store that cannot be opened is a ``StoreUnavailableError`` naming the
variable and the file.

Every collection has key fields; writes are idempotent upserts on them, so a resumed or
repeated run never duplicates a document.
"""

from __future__ import annotations

from pathlib import Path

from domainbench.errors import StoreUnavailableError, UserInputError
from domainbench.runtime.settings import DEFAULT_HOME, ENV_HOME, ENV_MONGO_URI, Settings, redact_uri
from domainbench.store.base import COLLECTIONS, Store

STORE_FILE = "domainbench.sqlite"


def home_dir() -> Path:
    """$DOMAINBENCH_HOME, for callers that hold no ``Settings`` (prefer ``Settings.home``)."""
    return Settings.from_env().home


def open_store(uri: str | None = None, home: Path | None = None) -> Store:
    """The store at ``uri`` (mongodb://… or sqlite:///PATH), else the embedded SQLite file in ``home``.

    ``uri`` and ``home`` are the values of $DOMAINBENCH_MONGO_URI and $DOMAINBENCH_HOME, and
    errors name those variables. With neither given (tests, benchmarks, scripts), they are
    read from the environment here.
    """
    if not uri and home is None:
        settings = Settings.from_env()
        uri, home = settings.store_uri, settings.home
    if uri:
        return _open_uri(uri)
    from domainbench.store.sqlite_store import SQLiteStore

    try:
        return SQLiteStore(Path(home or DEFAULT_HOME) / STORE_FILE)
    except StoreUnavailableError as e:
        raise StoreUnavailableError(f"{ENV_HOME}={home}: {e}; fix that or set {ENV_HOME} to another directory") from e


def _open_uri(uri: str) -> Store:
    if uri.startswith(("mongodb://", "mongodb+srv://")):
        from domainbench.store.mongo_store import MongoStore

        return MongoStore(uri)  # its errors name the variable already, with the password redacted
    if uri.startswith("sqlite:///"):
        from domainbench.store.sqlite_store import SQLiteStore

        try:
            return SQLiteStore(Path(uri.removeprefix("sqlite:///")))
        except StoreUnavailableError as e:
            raise StoreUnavailableError(f"{ENV_MONGO_URI}={redact_uri(uri)}: {e}") from e
    raise UserInputError(
        f"{ENV_MONGO_URI}: store URI {redact_uri(uri)!r} is not understood: use mongodb://HOST:PORT/DB or sqlite:///PATH"
    )


__all__ = ["COLLECTIONS", "ENV_HOME", "ENV_MONGO_URI", "STORE_FILE", "Store", "home_dir", "open_store", "redact_uri"]

"""MongoDB store through pymongo: one collection per kind, a unique index on its key fields."""

from __future__ import annotations

from typing import Any

from pydantic import SecretStr

from backend.errors import StoreUnavailableError
from backend.settings import ENV_MONGO_URI, Settings, redact_uri
from backend.store.base import COLLECTIONS, Store, key_of


class MongoStore(Store):
    def __init__(self, uri: str, db: str | None = None, client: Any = None, timeout_ms: int = 5000) -> None:
        import pymongo

        self.description = f"MongoDB at {redact_uri(uri)}"
        #: for Ray actors that reopen the store; a SecretStr, so no repr or log shows the password
        self.uri = SecretStr(uri)
        if client is None:
            try:
                client = pymongo.MongoClient(uri, serverSelectionTimeoutMS=timeout_ms)
            except (pymongo.errors.PyMongoError, ValueError) as e:
                why = Settings(mongo_uri=SecretStr(uri)).redact(str(e))  # the message may quote the password
                raise StoreUnavailableError(
                    f"{ENV_MONGO_URI}={redact_uri(uri)} is not a valid MongoDB URI ({why}); fix it "
                    "or unset it to use the embedded store"
                ) from None
        self._client = client
        try:
            name = db or pymongo.uri_parser.parse_uri(uri).get("database") or "domainbench"
        except Exception:  # mongomock URIs and the like
            name = db or "domainbench"
        self._db = client[name]
        try:
            for coll, fields in COLLECTIONS.items():
                self._db[coll].create_index([(f, 1) for f in fields], unique=True, name="key")
        except pymongo.errors.PyMongoError as e:
            # the message of a failed connection can echo the URI: never pass it on raw
            raise StoreUnavailableError(
                f"{ENV_MONGO_URI}: cannot reach MongoDB at {redact_uri(uri)} ({type(e).__name__}); check the "
                "variable or unset it to use the embedded store"
            ) from None

    def _filter(self, collection: str, where: dict[str, Any]) -> dict[str, Any]:
        self._check_where(collection, where)
        return dict(where)

    def _upsert_many(self, collection: str, docs: list[dict[str, Any]]) -> None:
        fields = COLLECTIONS[collection]
        # one replace per document: each is atomic on its own, which is all a unit needs
        for d in docs:
            self._db[collection].replace_one(dict(zip(fields, key_of(collection, d))), d, upsert=True)

    def _find(self, collection: str, where: dict[str, Any]) -> list[dict[str, Any]]:
        return list(self._db[collection].find(self._filter(collection, where), {"_id": False}))

    def keys(self, collection: str, **where: Any) -> set[tuple[Any, ...]]:
        fields = COLLECTIONS[collection]
        proj = {f: True for f in fields} | {"_id": False}
        return {tuple(d[f] for f in fields) for d in self._db[collection].find(self._filter(collection, where), proj)}

    def delete(self, collection: str, **where: Any) -> int:
        return self._db[collection].delete_many(self._filter(collection, where)).deleted_count

    def close(self) -> None:
        self._client.close()

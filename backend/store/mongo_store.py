"""MongoDB store through pymongo: one collection per kind, the indexes of ``indexes.py``.

Documents above a few MB have their large per-image arrays split into the ``parts``
collection (``mongo_parts.py``), so none nears MongoDB's 16 MB limit at 10,000 images a shard.
"""

from __future__ import annotations

import uuid
from typing import Any

from pydantic import SecretStr

from domainbench.errors import StoreUnavailableError
from domainbench.settings import ENV_MONGO_URI, Settings, redact_uri
from domainbench.store import mongo_parts
from domainbench.store.base import COLLECTIONS, Store, key_of
from domainbench.store.collections import Collection
from domainbench.store.fence import Fence
from domainbench.store.indexes import INDEXES, PARTS


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
            for coll, indexes in INDEXES.items():
                for ix in indexes:
                    self._db[coll].create_index(list(ix.fields), unique=ix.unique, name=ix.name)
        except pymongo.errors.PyMongoError as e:
            raise StoreUnavailableError(_connection_error(uri, e)) from None

    def _filter(self, collection: str, where: dict[str, Any]) -> dict[str, Any]:
        self._check_where(collection, where)
        return dict(where)

    def _check_fence(self, fence: Fence | None) -> None:
        # the run document must match the fence's condition at the moment of the write; without a
        # replica set MongoDB has no transaction across two documents, so this read sits right before it
        if fence is not None and self._db[Collection.RUNS].find_one(fence.mongo_filter(), {"_id": True}) is None:
            raise fence.lost()

    def _upsert_many(self, collection: str, docs: list[dict[str, Any]], fence: Fence | None = None) -> None:
        fields = COLLECTIONS[collection]
        # one replace per document: each is atomic on its own, which is all a unit needs
        for d in docs:
            self._check_fence(fence)
            key = key_of(collection, d)
            doc, parts = mongo_parts.split(d)
            owner = mongo_parts.part_key(key)
            if parts:
                # parts first, under a new generation; the document then names it; old parts go last
                gen = uuid.uuid4().hex
                self._db[PARTS].insert_many([{"collection": collection, "key": owner, "gen": gen, "path": path,
                                              "part": i, "values": values} for path, i, values in parts])
                doc = {**doc, "_parts": gen}
            self._db[collection].replace_one(dict(zip(fields, key)), doc, upsert=True)
            if parts:
                self._db[PARTS].delete_many({"collection": collection, "key": owner, "gen": {"$ne": doc["_parts"]}})

    def _find(self, collection: str, where: dict[str, Any]) -> list[dict[str, Any]]:
        docs = list(self._db[collection].find(self._filter(collection, where), {"_id": False}))
        return [self._joined(collection, d) if "_parts" in d else d for d in docs]

    def _joined(self, collection: str, doc: dict[str, Any]) -> dict[str, Any]:
        gen = doc.pop("_parts")
        owner = mongo_parts.part_key(key_of(collection, doc))
        parts = list(self._db[PARTS].find({"collection": collection, "key": owner, "gen": gen}, {"_id": False}))
        return mongo_parts.join(doc, parts)

    def list_runs(self) -> list[Any]:
        # newest first, sorted by the server on the "recent" index rather than in Python
        from domainbench.store.records import RunRecord, upgrade

        docs = self._db[Collection.RUNS].find({}, {"_id": False}).sort("created_at", -1)
        out = [upgrade(Collection.RUNS, d, self.description) for d in docs]
        return [RunRecord.model_validate(d) for d in out if d is not None]

    def keys(self, collection: str, **where: Any) -> set[tuple[Any, ...]]:
        fields = COLLECTIONS[collection]
        proj = {f: True for f in fields} | {"_id": False}
        return {tuple(d[f] for f in fields) for d in self._db[collection].find(self._filter(collection, where), proj)}

    def delete(self, collection: str, fence: Fence | None = None, **where: Any) -> int:
        filt = self._filter(collection, where)
        self._check_fence(fence)
        if self._db[PARTS].find_one({"collection": collection}, {"_id": True}) is not None:
            owners = [mongo_parts.part_key(k) for k in self.keys(collection, **where)]
            for i in range(0, len(owners), 1000):
                self._db[PARTS].delete_many({"collection": collection, "key": {"$in": owners[i : i + 1000]}})
        return self._db[collection].delete_many(filt).deleted_count

    def close(self) -> None:
        self._client.close()


def _connection_error(uri: str, e: Exception) -> str:
    """One line naming the variable and what to fix; the URI's password is never included."""
    import pymongo

    target = f"{ENV_MONGO_URI}={redact_uri(uri)}"
    code = getattr(e, "code", None)
    if isinstance(e, pymongo.errors.OperationFailure) and code in (18, 13):  # AuthenticationFailed, Unauthorized
        what = "authentication failed" if code == 18 else "the user may not create indexes in this database"
        return (f"{target}: MongoDB refused the credentials ({what}); fix the user name and password in the URI "
                "(and authSource=admin for a root user) or unset it to use the embedded store")
    # the message of a failed connection can echo the URI: never pass it on raw
    return (f"{ENV_MONGO_URI}: cannot reach MongoDB at {redact_uri(uri)} ({type(e).__name__}); check the "
            "variable or unset it to use the embedded store")

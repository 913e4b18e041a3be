"""MongoDB store through pymongo: one collection per kind, the indexes of ``indexes.py``.

Documents above a few MB have their large per-image arrays split into the ``parts``
collection (``mongo_parts.py``), so none nears MongoDB's 16 MB limit at 10,000 images a shard.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable
from typing import Any

from pydantic import SecretStr

from domainbench.errors import StoreUnavailableError
from domainbench.runtime.settings import ENV_MONGO_URI, Settings, redact_uri
from domainbench.store import mongo_parts
from domainbench.store.base import COLLECTIONS, Store, key_of
from domainbench.store.collections import Collection
from domainbench.store.fence import EPOCH_FIELD, HIDDEN, TOUCH_FIELD, Fence, epoch_field, not_newer
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

    # -- writes, each under the lease fence when given one (``domainbench.store.fence``) ---------
    @functools.cached_property
    def transactions(self) -> bool:
        """Whether the server runs multi-document transactions (a replica set member or a mongos)."""
        return supports_transactions(self._client)

    def _fenced(self, fence: Fence | None, write: Callable[[int | None, Any], Any]) -> Any:
        """``write(epoch, session)``: unfenced; or in one transaction with the fence's check where the
        server has transactions; else right after the check, under the epoch's conditions."""
        if fence is None:
            return write(None, None)
        if not self.transactions:
            return write(self._hold(fence, None), None)
        with self._client.start_session() as session:
            return session.with_transaction(lambda s: write(self._hold(fence, s), s))

    def _hold(self, fence: Fence, session: Any) -> int:
        """The epoch of the lease ``fence`` holds; ``LeaseLost`` when it holds none."""
        runs, proj = self._db[Collection.RUNS], {"lease_epoch": True, "_id": False}
        if session is None:
            doc = runs.find_one(fence.mongo_filter(), proj)
        else:
            # a write, not only a read: a claim committed meanwhile conflicts with the transaction
            # (which then retries and finds the lease gone) instead of slipping past its snapshot
            doc = runs.find_one_and_update(fence.mongo_filter(), {"$inc": {TOUCH_FIELD: 1}}, projection=proj,
                                           session=session)
        if doc is None:
            raise fence.lost()
        return doc.get("lease_epoch") or 0

    def _upsert_many(self, collection: str, docs: list[dict[str, Any]], fence: Fence | None = None) -> None:
        # one replace per document: each is atomic on its own (with its parts), which is all a unit needs
        for d in docs:
            self._fenced(fence, lambda epoch, session, d=d: self._replace(collection, d, fence, epoch, session))

    def _replace(self, collection: str, d: dict[str, Any], fence: Fence | None, epoch: int | None,
                 session: Any) -> None:
        import pymongo

        key = key_of(collection, d)
        where = dict(zip(COLLECTIONS[collection], key))
        field = epoch_field(collection) if epoch is not None else None
        stamp, guard = ({}, {}) if field is None else ({field: epoch}, not_newer(field, epoch))
        parts_stamp, parts_guard = ({}, {}) if field is None else ({EPOCH_FIELD: epoch}, not_newer(EPOCH_FIELD, epoch))
        doc, parts = mongo_parts.split(d)
        owner = mongo_parts.part_key(key)
        gen = uuid.uuid4().hex
        if parts:
            # parts first, under a new generation; the document then names it; old parts go last
            self._db[PARTS].insert_many([{"collection": collection, "key": owner, "gen": gen, "path": path,
                                          "part": i, "values": values, **parts_stamp} for path, i, values in parts],
                                        session=session)
            doc = {**doc, "_parts": gen}
        for attempt in range(3):
            try:
                # with a guard, a document a newer holder wrote does not match: the upsert then meets
                # the unique key and fails, and nothing of it is changed
                self._db[collection].replace_one({**where, **guard}, {**doc, **stamp}, upsert=True, session=session)
                break
            except pymongo.errors.DuplicateKeyError:
                if field is None or session is not None or attempt == 2 or self._newer(collection, where, field, epoch):
                    if parts and session is None:  # (an aborted transaction takes its parts with it)
                        self._db[PARTS].delete_many({"collection": collection, "key": owner, "gen": gen})
                    if fence is not None and field is not None:
                        raise fence.lost() from None
                    raise
                # two upserts of a new document raced (no transaction): the other one is ours to replace
        if parts:
            self._db[PARTS].delete_many({"collection": collection, "key": owner, "gen": {"$ne": gen}, **parts_guard},
                                        session=session)

    def _newer(self, collection: str, where: dict[str, Any], field: str, epoch: int | None) -> bool:
        doc = self._db[collection].find_one(where, {field: True})
        return doc is not None and (doc.get(field) or 0) > (epoch or 0)

    def _find(self, collection: str, where: dict[str, Any]) -> list[dict[str, Any]]:
        docs = list(self._db[collection].find(self._filter(collection, where), HIDDEN))
        return [self._joined(collection, d) if "_parts" in d else d for d in docs]

    def _joined(self, collection: str, doc: dict[str, Any]) -> dict[str, Any]:
        gen = doc.pop("_parts")
        owner = mongo_parts.part_key(key_of(collection, doc))
        parts = list(self._db[PARTS].find({"collection": collection, "key": owner, "gen": gen}, HIDDEN))
        return mongo_parts.join(doc, parts)

    def list_runs(self) -> list[Any]:
        # newest first, sorted by the server on the "recent" index rather than in Python
        from domainbench.store.records import RunRecord, upgrade

        docs = self._db[Collection.RUNS].find({}, HIDDEN).sort("created_at", -1)
        out = [upgrade(Collection.RUNS, d, self.description) for d in docs]
        return [RunRecord.model_validate(d) for d in out if d is not None]

    def keys(self, collection: str, **where: Any) -> set[tuple[Any, ...]]:
        fields = COLLECTIONS[collection]
        proj = {f: True for f in fields} | {"_id": False}
        return {tuple(d[f] for f in fields) for d in self._db[collection].find(self._filter(collection, where), proj)}

    def delete(self, collection: str, fence: Fence | None = None, **where: Any) -> int:
        filt = self._filter(collection, where)
        return self._fenced(fence, lambda epoch, session: self._delete(collection, filt, epoch, session))

    def _delete(self, collection: str, filt: dict[str, Any], epoch: int | None, session: Any) -> int:
        field = epoch_field(collection) if epoch is not None else None
        parts_guard: dict[str, Any] = {}
        if field is not None:  # what a newer lease holder wrote stays
            filt, parts_guard = {**filt, **not_newer(field, epoch)}, not_newer(EPOCH_FIELD, epoch)  # type: ignore[arg-type]
        owners: list[str] = []
        if self._db[PARTS].find_one({"collection": collection}, {"_id": True}, session=session) is not None:
            fields = COLLECTIONS[collection]
            found = self._db[collection].find(filt, {f: True for f in fields} | {"_id": False}, session=session)
            owners = [mongo_parts.part_key(tuple(d[f] for f in fields)) for d in found]
        # documents first: parts left by an interruption here are never read and go with the next write
        n = self._db[collection].delete_many(filt, session=session).deleted_count
        for i in range(0, len(owners), 1000):
            self._db[PARTS].delete_many({"collection": collection, "key": {"$in": owners[i : i + 1000]}, **parts_guard},
                                        session=session)
        return n

    def close(self) -> None:
        self._client.close()


def supports_transactions(client: Any) -> bool:
    """Whether ``client``'s server runs multi-document transactions: a replica set member names its
    set, a mongos answers "isdbgrid"; a standalone server does neither."""
    import pymongo

    for command in ("hello", "isMaster"):  # servers before 4.4.2 know only isMaster
        try:
            hello = client.admin.command(command)
        except (pymongo.errors.OperationFailure, NotImplementedError):  # NotImplementedError: test doubles
            continue
        return bool(hello.get("setName")) or hello.get("msg") == "isdbgrid"
    return False


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

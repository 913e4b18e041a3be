"""The repository interface shared by the SQLite and MongoDB backends."""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import Any

SCHEMA_VERSION = 1

#: collection -> key fields (the upsert key; queries filter on a prefix of it)
COLLECTIONS: dict[str, tuple[str, ...]] = {
    "domains": ("domain_id",),
    "runs": ("run_id",),
    # sufficient statistics of one unit of work
    "units": ("run_id", "model", "corruption", "severity", "shard"),
    # per-image stability metrics of one (model, corruption) over one shard
    "stability": ("run_id", "model", "corruption", "shard"),
    # PD threat sums of one corruption cell over one shard (model-independent)
    "threat": ("run_id", "corruption", "severity", "shard"),
    "summaries": ("run_id",),
}


def redact_uri(uri: str) -> str:
    """``mongodb://user:secret@host`` -> ``mongodb://user:***@host``: URIs may carry passwords."""
    return re.sub(r"(//[^:/@]+):[^@]*@", r"\1:***@", uri)


def key_of(collection: str, doc: dict[str, Any]) -> tuple[Any, ...]:
    fields = COLLECTIONS[collection]
    missing = [f for f in fields if f not in doc]
    if missing:
        raise ValueError(f"{collection} document lacks key field(s) {missing}")
    return tuple(doc[f] for f in fields)


class Store(ABC):
    """Documents keyed per collection; every write is an idempotent upsert."""

    description: str

    @abstractmethod
    def upsert(self, collection: str, doc: dict[str, Any]) -> None: ...

    @abstractmethod
    def upsert_many(self, collection: str, docs: Iterable[dict[str, Any]]) -> None: ...

    @abstractmethod
    def find(self, collection: str, **where: Any) -> list[dict[str, Any]]:
        """Documents whose key fields equal ``where`` (any subset of the key fields)."""

    @abstractmethod
    def keys(self, collection: str, **where: Any) -> set[tuple[Any, ...]]:
        """Key tuples of matching documents, without loading the documents."""

    @abstractmethod
    def delete(self, collection: str, **where: Any) -> int: ...

    def close(self) -> None:  # noqa: B027 - optional hook
        pass

    # -- typed helpers: the names the rest of the product uses ---------------------------
    def get(self, collection: str, **key: Any) -> dict[str, Any] | None:
        docs = self.find(collection, **key)
        return docs[0] if docs else None

    def put_domain(self, doc: dict[str, Any]) -> None:
        self.upsert("domains", doc)

    def put_run(self, doc: dict[str, Any]) -> None:
        self.upsert("runs", doc)

    def get_run(self, run_id: str) -> dict[str, Any] | None:
        return self.get("runs", run_id=run_id)

    def list_runs(self) -> list[dict[str, Any]]:
        return sorted(self.find("runs"), key=lambda d: d.get("created_at", ""), reverse=True)

    def update_run(self, run_id: str, **fields: Any) -> None:
        doc = self.get_run(run_id)
        if doc is None:
            raise KeyError(run_id)
        doc.update(fields)
        self.put_run(doc)

    def units(self, run_id: str, **where: Any) -> list[dict[str, Any]]:
        return self.find("units", run_id=run_id, **where)

    def put_summary(self, doc: dict[str, Any]) -> None:
        self.upsert("summaries", doc)

    def get_summary(self, run_id: str) -> dict[str, Any] | None:
        return self.get("summaries", run_id=run_id)

    def delete_run(self, run_id: str) -> None:
        for coll, fields in COLLECTIONS.items():
            if fields[0] == "run_id":
                self.delete(coll, run_id=run_id)

    @staticmethod
    def _check_where(collection: str, where: dict[str, Any]) -> None:
        if collection not in COLLECTIONS:
            raise ValueError(f"unknown collection {collection!r}; known: {', '.join(COLLECTIONS)}")
        bad = set(where) - set(COLLECTIONS[collection])
        if bad:
            raise ValueError(f"{collection} can only be filtered on its key fields {COLLECTIONS[collection]}, not {sorted(bad)}")

    @staticmethod
    def _stamp(doc: dict[str, Any]) -> dict[str, Any]:
        return {"schema_version": SCHEMA_VERSION, **doc}

"""The repository interface shared by the SQLite and MongoDB backends."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from domainbench.store import labelsets
from domainbench.store.collections import KEY_FIELDS, Collection
from domainbench.store.fence import Fence
from domainbench.store.repositories import Repositories

if TYPE_CHECKING:
    from domainbench.records.report import RunReport
    from domainbench.store.records import DomainRecord, RunRecord

#: collection -> key fields (declared in ``collections.py``; this name is kept for callers)
COLLECTIONS: dict[Collection, tuple[str, ...]] = KEY_FIELDS
#: what ``Store.unit_predictions`` reads of a unit (besides whether it stores a confusion matrix)
UNIT_PREDICTION_FIELDS = ("model", "corruption", "severity", "shard", "preds", "indices", "labels")


def key_of(collection: str, doc: dict[str, Any]) -> tuple[Any, ...]:
    fields = COLLECTIONS[collection]
    missing = [f for f in fields if f not in doc]
    if missing:
        raise ValueError(f"{collection} document lacks key field(s) {missing}")
    return tuple(doc[f] for f in fields)


class Store(Repositories, ABC):
    """Documents keyed per collection; every write is an idempotent upsert.

    Backends implement the raw JSON-document operations (``_upsert_many``, ``_find``); the
    public methods validate every document against its record model (``domainbench.store.records``)
    on the way in and on the way out, so nothing unchecked is written or read.
    """

    description: str

    @abstractmethod
    def _upsert_many(self, collection: str, docs: list[dict[str, Any]], fence: Fence | None = None) -> None: ...

    @abstractmethod
    def _find(self, collection: str, where: dict[str, Any]) -> list[dict[str, Any]]: ...

    @abstractmethod
    def keys(self, collection: str, **where: Any) -> set[tuple[Any, ...]]:
        """Key tuples of matching documents, without loading the documents."""

    @abstractmethod
    def delete(self, collection: str, fence: Fence | None = None, **where: Any) -> int: ...

    def close(self) -> None:  # noqa: B027 - optional hook
        pass

    # -- validated documents ------------------------------------------------------------
    def upsert(self, collection: str, doc: BaseModel | dict[str, Any], fence: Fence | None = None) -> None:
        self.upsert_many(collection, [doc], fence=fence)

    def upsert_many(self, collection: str, docs: Iterable[BaseModel | dict[str, Any]], fence: Fence | None = None) -> None:
        """Validate and store ``docs``; with a ``fence``, only while its worker holds the run (else LeaseLost)."""
        from domainbench.store.records import validate

        self._check_where(collection, {})
        rows = [validate(collection, d).model_dump(mode="json") for d in docs]
        for row in rows:
            key_of(collection, row)
        if rows and collection == Collection.UNITS:
            sets = labelsets.detach(rows)
            if sets:  # the label set lands before any unit that refers to it
                self._upsert_many(Collection.LABELSETS, sets, fence)
        if rows:
            self._upsert_many(collection, rows, fence)

    def find(self, collection: str, **where: Any) -> list[Any]:
        """Records whose key fields equal ``where`` (any subset of the key fields), validated.

        Older documents are migrated; a document a newer domainbench wrote raises
        ``StoreVersionError``. Documents that must be rebuilt rather than migrated (old
        summaries) are left out.
        """
        from domainbench.store.records import RECORDS, upgrade

        self._check_where(collection, where)
        model = RECORDS[collection]
        out = []
        raws = self._find(collection, where)
        if collection == Collection.UNITS:
            raws = labelsets.attach(raws, self._labelset, self.description)
        for raw in raws:
            doc = upgrade(collection, raw, self.description)
            if doc is not None:
                out.append(model.model_validate(doc))
        return out

    def unit_predictions(self, run_id: str) -> list[dict[str, Any]]:
        """The per-image fields of the run's units in stored order, read without validating each document: per unit
        its key (``model``, ``corruption``, ``severity``, ``shard``), ``preds``, ``indices`` and ``labels`` as stored
        (a plain list or a packed array's JSON form; ``labels`` None where the unit stores none) and ``labelled``
        (the unit stores a confusion matrix).

        Every unit was validated when it was written; what its per-image outcomes need is read here at a fraction
        of a validated read's cost (the statistics of a run of thousands of small shards). Documents are upgraded
        as ``find`` upgrades them, so a newer domainbench's document still raises ``StoreVersionError``."""
        from domainbench.store.records import upgrade

        out = []
        for raw in self._unit_prediction_docs(run_id):
            doc = upgrade(Collection.UNITS, raw, self.description)
            if doc is not None:
                found = {k: doc.get(k) for k in UNIT_PREDICTION_FIELDS}
                found["labelled"] = doc.get("confusion") is not None
                out.append(found)
        return out

    def _unit_prediction_docs(self, run_id: str) -> list[dict[str, Any]]:
        """The run's unit documents in stored order, holding at least ``schema_version``, ``UNIT_PREDICTION_FIELDS``
        and ``confusion`` (a backend may read only those, and put any value that is not None for a stored matrix)."""
        return self._find(Collection.UNITS, {"run_id": run_id})

    def _labelset(self, key: str) -> list[str] | None:
        docs = self._find(Collection.LABELSETS, {"labelset_id": key})
        return docs[0]["classes"] if docs else None

    def get(self, collection: str, **key: Any) -> Any | None:
        docs = self.find(collection, **key)
        return docs[0] if docs else None

    # -- typed helpers: the names the rest of the product uses ---------------------------
    def put_domain(self, doc: DomainRecord | dict[str, Any]) -> None:
        self.domains.put(doc)

    def put_run(self, doc: RunRecord | dict[str, Any]) -> None:
        self.runs.put(doc)

    def get_run(self, run_id: str) -> RunRecord | None:
        return self.runs.get(run_id=run_id)

    def list_runs(self) -> list[RunRecord]:
        return sorted(self.runs.find(), key=lambda d: d.created_at, reverse=True)

    def update_run(self, run_id: str, **fields: Any) -> RunRecord:
        doc = self.get_run(run_id)
        if doc is None:
            raise KeyError(run_id)
        updated = doc.model_copy(update=fields)
        self.put_run(updated.model_dump(mode="json"))  # re-validated: a bad field never lands
        return updated

    def put_report(self, report: RunReport) -> None:
        self.reports.put(report)

    def get_report(self, run_id: str) -> RunReport | None:
        return self.reports.get(run_id=run_id)

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

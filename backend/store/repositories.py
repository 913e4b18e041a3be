"""Typed repositories: one per record kind, the only way the rest of the product names a collection.

``store.units.put(unit)``, ``store.threat.keys(run_id=...)``, ``store.units(run_id)``: each
repository validates through the store it was reached by, so a view of the store that fences
its writes (the worker's lease, ``domainbench.app.worker.OwnedStore``) fences the repositories too.
Domain records are built in one place, ``DomainRepository.save``; cached model outputs (not
results) are read and written in one place, ``CacheRepository``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from domainbench.store.collections import Collection

if TYPE_CHECKING:
    from domainbench.records.config import DomainConfig
    from domainbench.records.report import RunReport
    from domainbench.store.records import (ClipUnitRecord, DomainRecord, FmrUnitRecord, RunRecord, StabilityRecord,
                                           TaskUnitRecord, TextEmbeddingRecord, ThreatRecord, UnitRecord)

R = TypeVar("R")


class Documents(Protocol):
    """What a repository needs of a store: validated upserts and reads by key fields."""

    def upsert_many(self, collection: str, docs: Iterable[Any]) -> None: ...
    def find(self, collection: str, **where: Any) -> list[Any]: ...
    def keys(self, collection: str, **where: Any) -> set[tuple[Any, ...]]: ...
    def delete(self, collection: str, **where: Any) -> int: ...


class Repository(Generic[R]):
    """The records of one collection; ``where`` filters on any of the collection's key fields."""

    def __init__(self, store: Documents, collection: Collection) -> None:
        self._store, self.collection = store, collection

    def put(self, record: R | dict[str, Any]) -> None:
        self._store.upsert_many(self.collection, [record])

    def put_many(self, records: Iterable[R | dict[str, Any]]) -> None:
        self._store.upsert_many(self.collection, records)

    def find(self, **where: Any) -> list[R]:
        return self._store.find(self.collection, **where)

    def get(self, **key: Any) -> R | None:
        found = self.find(**key)
        return found[0] if found else None

    def keys(self, **where: Any) -> set[tuple[Any, ...]]:
        return self._store.keys(self.collection, **where)

    def delete(self, **where: Any) -> int:
        return self._store.delete(self.collection, **where)


class RunRecords(Repository[R]):
    """Records keyed by run first: ``repo(run_id, **where)`` is the run's records."""

    def __call__(self, run_id: str, **where: Any) -> list[R]:
        return self.find(run_id=run_id, **where)


def domain_id(domain: DomainConfig) -> str:
    """A plan's id: the hash of its content (its planning time left out), so one plan is stored once."""
    # a plan without compositions hashes as it did before they existed
    exclude: dict[str, Any] = {"planner": {"created_at", "planner_version"}} | ({} if domain.compositions else {"compositions": True})
    blob = json.dumps(domain.model_dump(mode="json", exclude=exclude), sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


class DomainRepository(Repository["DomainRecord"]):
    def save(self, domain: DomainConfig, created_at: str) -> str:
        """Store the plan under its content hash; returns that id (the same plan twice is one record)."""
        from domainbench.store.records import DomainRecord

        did = domain_id(domain)
        self.put(DomainRecord(domain_id=did, created_at=created_at, **domain.model_dump()))
        return did


class CacheRepository:
    """Cached model outputs that save work, never results: the one reader and writer of cache records.

    Today the zero-shot classifiers (class-prompt embeddings, ``engine/text_cache.py``) that the
    local engine, a Ray actor, FMR's tested models and its oracle all build through.
    """

    def __init__(self, store: Documents) -> None:
        self._text: Repository[TextEmbeddingRecord] = Repository(store, Collection.TEXT_EMBEDDINGS)

    def text_embedding(self, cache_key: str) -> TextEmbeddingRecord | None:
        return self._text.get(cache_key=cache_key)

    def put_text_embedding(self, record: TextEmbeddingRecord) -> None:
        self._text.put(record)

    def text_embeddings(self) -> list[TextEmbeddingRecord]:
        return self._text.find()


class Repositories:
    """The typed repositories of a store (mixed into ``Store`` and into views of it such as the worker's)."""

    @property
    def domains(self: Documents) -> DomainRepository:
        return DomainRepository(self, Collection.DOMAINS)

    @property
    def runs(self: Documents) -> Repository[RunRecord]:
        return Repository(self, Collection.RUNS)

    @property
    def units(self: Documents) -> RunRecords[UnitRecord]:
        return RunRecords(self, Collection.UNITS)

    @property
    def stability(self: Documents) -> RunRecords[StabilityRecord]:
        return RunRecords(self, Collection.STABILITY)

    @property
    def threat(self: Documents) -> RunRecords[ThreatRecord]:
        return RunRecords(self, Collection.THREAT)

    @property
    def fmr(self: Documents) -> RunRecords[FmrUnitRecord]:
        return RunRecords(self, Collection.FMR)

    @property
    def task_units(self: Documents) -> RunRecords[TaskUnitRecord]:
        return RunRecords(self, Collection.TASK_UNITS)

    @property
    def clip_units(self: Documents) -> RunRecords[ClipUnitRecord]:
        return RunRecords(self, Collection.CLIP_UNITS)

    @property
    def caches(self: Documents) -> CacheRepository:
        return CacheRepository(self)

    @property
    def reports(self: Documents) -> RunRecords[RunReport]:
        return RunRecords(self, Collection.SUMMARIES)

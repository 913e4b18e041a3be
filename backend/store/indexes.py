"""MongoDB indexes, one list per collection, and the rule deciding whether one serves a query.

Every query the product makes filters on equality of some key fields of a collection (see
``Store.find``/``keys``/``delete``), optionally with a sort; the UI's run and domain lists
read a whole collection newest first. An index *serves* a query when the query's equality
fields include the index's first field, so the scan is bounded by the index (IXSCAN on that
prefix, never a collection scan), or, for a whole-collection read, when the index's leading
field is the sort field. ``tests/store/test_mongo_indexes.py`` checks every query shape the
engine, the report and the UI make against these definitions.
"""

from __future__ import annotations

from dataclasses import dataclass

from domainbench.store.base import COLLECTIONS
from domainbench.store.collections import Collection

#: large per-image arrays of a document are stored in this side collection (see mongo_store)
PARTS = "parts"


@dataclass(frozen=True)
class IndexSpec:
    name: str
    fields: tuple[tuple[str, int], ...]  # (field, 1 ascending | -1 descending)
    unique: bool = False


@dataclass(frozen=True)
class QueryShape:
    collection: str
    equals: frozenset[str]  # fields compared for equality
    sort: str | None = None  # field the results are sorted on (descending or ascending alike)


def _key(collection: str) -> IndexSpec:
    # the upsert key: unique, and its prefixes serve every per-run query (run_id comes first)
    return IndexSpec("key", tuple((f, 1) for f in COLLECTIONS[collection]), unique=True)


INDEXES: dict[str, list[IndexSpec]] = {coll: [_key(coll)] for coll in COLLECTIONS}
# `domainbench ls` and the UI list runs and domains newest first
INDEXES[Collection.RUNS].append(IndexSpec("recent", (("created_at", -1),)))
INDEXES[Collection.DOMAINS].append(IndexSpec("recent", (("created_at", -1),)))
# the work queue (`domainbench worker`) claims the oldest queued or lease-expired run by status
INDEXES[Collection.RUNS].append(IndexSpec("queue", (("status", 1), ("queued_at", 1), ("created_at", 1))))
# parts of a split document: found by the owner's key fields, its write generation and path
INDEXES[PARTS] = [IndexSpec("owner", (("collection", 1), ("key", 1), ("gen", 1), ("path", 1), ("part", 1)), unique=True)]


def serving_index(shape: QueryShape) -> IndexSpec | None:
    """The first index that serves ``shape`` (bounded scan, see the module doc), else None."""
    for index in INDEXES.get(shape.collection, []):
        lead = index.fields[0][0]
        if lead in shape.equals:
            return index
        if not shape.equals and shape.sort == lead:
            return index
    return None

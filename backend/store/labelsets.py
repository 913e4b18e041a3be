"""Label sets stored once: a unit names its class list by digest instead of repeating it.

Every unit carries its dataset's class names (so shards of one cell can be checked to agree).
At 1,000 classes the names alone are ~30 KB, more than all of a compact unit's statistics; a
run of 10,000 units would store the same list 10,000 times. A class list longer than
``INLINE_MAX_BYTES`` (as JSON) is written once to the ``labelsets`` collection, keyed by the
SHA-256 of its JSON, and the unit stores ``{"labelset": digest, "n": count}``; reading puts the
list back before the unit is validated. Short lists (the bundled sample's 10 names) stay inline.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

#: class lists up to this many bytes of JSON stay in the unit itself
INLINE_MAX_BYTES = 1024


def labelset_id(classes: list[str]) -> str:
    return hashlib.sha256(json.dumps(classes, ensure_ascii=False).encode()).hexdigest()[:32]


def detach(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Replace long class lists in ``rows`` (in place) by references; returns the label sets to store."""
    sets: dict[str, list[str]] = {}
    for row in rows:
        classes = row.get("classes")
        if isinstance(classes, list) and len(json.dumps(classes, ensure_ascii=False)) > INLINE_MAX_BYTES:
            key = labelset_id(classes)
            sets[key] = classes
            row["classes"] = {"labelset": key, "n": len(classes)}
    return [{"labelset_id": k, "classes": v} for k, v in sets.items()]


def attach(docs: list[dict[str, Any]], lookup: Callable[[str], list[str] | None], where: str) -> list[dict[str, Any]]:
    """Put referenced class lists back into ``docs`` (in place); ``lookup`` fetches one by digest."""
    cache: dict[str, list[str]] = {}
    for doc in docs:
        ref = doc.get("classes")
        if isinstance(ref, dict) and "labelset" in ref:
            key = ref["labelset"]
            if key not in cache:
                found = lookup(key)
                if found is None:
                    raise ValueError(f"{where} lacks the label set {key} a stored unit refers to; the store is damaged")
                cache[key] = found
            doc["classes"] = cache[key]
    return docs

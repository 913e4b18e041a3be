"""Splitting a document's large per-image arrays into parts, so no MongoDB document nears 16 MB.

A unit at 10,000 images per shard holds per-image predictions, indices, labels and the
parameters each corruption drew per image (a shadow's polygons are ~460 bytes an image), and
a 1,000-class confusion matrix (~9 MB in BSON): 13.9 MB in all, too close to MongoDB's 16 MB
limit. Above ``SPLIT_ABOVE`` bytes the largest list fields are moved out, in parts of at most
about ``PART_BYTES``, to the ``parts`` collection and put back on read. The embedded SQLite
store has no such limit and never splits.

Parts carry a write generation: a new version of a document writes new parts first, then the
document naming their generation, then drops older parts, so a reader never mixes versions.
"""

from __future__ import annotations

import json
import math
from typing import Any

import bson

#: documents larger than this are split (MongoDB's hard limit is 16 MiB)
SPLIT_ABOVE = 4 << 20
#: target size of one part
PART_BYTES = 2 << 20
#: list fields smaller than this stay in the document
MIN_FIELD_BYTES = 256 << 10


def bson_size(value: Any) -> int:
    return len(bson.encode({"v": value}))


def part_key(key: tuple[Any, ...]) -> str:
    """The owner's key as one string (an index-friendly equality on one field)."""
    return json.dumps(list(key), separators=(",", ":"))


def _lists(doc: dict[str, Any], prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], list[Any]]]:
    out: list[tuple[tuple[str, ...], list[Any]]] = []
    for k, v in doc.items():
        if isinstance(v, list):
            out.append(((*prefix, k), v))
        elif isinstance(v, dict) and len(prefix) < 4:
            out += _lists(v, (*prefix, k))
    return out


def split(doc: dict[str, Any]) -> tuple[dict[str, Any], list[tuple[list[str], int, list[Any]]]]:
    """(document without its large lists, [(path, part number, values)]); no parts when small enough."""
    size = len(bson.encode(doc))
    if size <= SPLIT_ABOVE:
        return doc, []
    doc = _copy_dicts(doc)  # the caller's document is left as it was (lists are moved, never changed)
    parts: list[tuple[list[str], int, list[Any]]] = []
    sized = sorted(((bson_size(v), path, v) for path, v in _lists(doc)), key=lambda t: -t[0])
    for nbytes, path, values in sized:
        if size <= SPLIT_ABOVE or nbytes < MIN_FIELD_BYTES:
            break
        n = max(1, math.ceil(nbytes / PART_BYTES))
        step = max(1, math.ceil(len(values) / n))
        for i, start in enumerate(range(0, len(values), step)):
            parts.append((list(path), i, values[start : start + step]))
        _pop(doc, path)
        size -= nbytes
    return doc, parts


def join(doc: dict[str, Any], parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Put the parts back (in part order) into ``doc``."""
    for p in sorted(parts, key=lambda p: (p["path"], p["part"])):
        target = doc
        for k in p["path"][:-1]:
            target = target.setdefault(k, {})
        target.setdefault(p["path"][-1], []).extend(p["values"])
    return doc


def _copy_dicts(doc: dict[str, Any]) -> dict[str, Any]:
    return {k: _copy_dicts(v) if isinstance(v, dict) else v for k, v in doc.items()}


def _pop(doc: dict[str, Any], path: tuple[str, ...]) -> None:
    target = doc
    for k in path[:-1]:
        target = target[k]
    del target[path[-1]]

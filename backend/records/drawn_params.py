"""What a corruption drew per image (a unit's ``params["drawn"]``), as units stored it until they stopped.

A corruption records its random draws per image: an angle, a crop, a shadow's polygons (lists of
[x, y] vertices, a different number per image). Units no longer store them (they are the same for
every model of a cell, and ``query.drawn_of`` makes them again from the run's seed); this module
reads the units that did, and still packs a record that carries them. As JSON lists they took
~460 bytes an image for shadow, more than the rest of a unit; packed, each numeric value list
becomes its leaves as one ``PackedArray`` (``domainbench.records.packed``) plus one packed array of list
lengths per nesting level, so ragged nesting comes back exactly:

    [[[1, 2], [3, 4]], [[5, 6]]]  ->  {"packed_lists": {"values": [1..6], "lengths": [[2, 1], [2, 2, 2]]}}

Values come back as the same Python ints and floats (floats are float64, bit for bit). Lists that
are short, hold strings or booleans, mix ints with floats or nest unevenly stay plain lists;
a composition's per-step draws (a list of such dicts) are packed step by step. Reading accepts the
plain lists units were written with before, unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from domainbench.records.packed import PLAIN_MAX, PackedArray

MARKER = "packed_lists"


def pack_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """``params`` as stored: its ``drawn`` entry packed (see the module docstring)."""
    drawn = params.get("drawn")
    if not isinstance(drawn, Mapping):
        return dict(params)
    return {**params, "drawn": _pack_drawn(drawn)}


def unpack_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """``params`` as the engine recorded them: packed ``drawn`` lists back as plain nested lists."""
    drawn = params.get("drawn")
    if not isinstance(drawn, Mapping):
        return dict(params)
    return {**params, "drawn": _unpack_drawn(drawn)}


def _pack_drawn(drawn: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _pack_value(v) for k, v in drawn.items()}


def _unpack_drawn(drawn: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _unpack_value(v) for k, v in drawn.items()}


def _pack_value(v: Any) -> Any:
    if isinstance(v, list) and v and all(isinstance(d, Mapping) for d in v):  # a composition's steps
        return [_pack_drawn(d) for d in v]
    flat = _flatten(v)
    if flat is None or len(flat[0]) <= PLAIN_MAX:
        return v
    values, lengths = flat
    return {MARKER: {"values": PackedArray(values).to_json(), "lengths": [PackedArray(n).to_json() for n in lengths]}}


def _unpack_value(v: Any) -> Any:
    if isinstance(v, list) and v and all(isinstance(d, Mapping) for d in v):
        return [_unpack_drawn(d) for d in v]
    if not (isinstance(v, Mapping) and MARKER in v):
        return v
    doc = v[MARKER]
    values = PackedArray.coerce(doc["values"]).tolist()
    lengths = [PackedArray.coerce(n).tolist() for n in doc["lengths"]]
    return _nest(values, lengths)


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, (bool, np.bool_))


def _flatten(v: Any) -> tuple[np.ndarray, list[list[int]]] | None:
    """(leaves, lengths per nesting level) of a list nested to one depth everywhere; None: keep it plain."""
    if not isinstance(v, list):
        return None
    lengths: list[list[int]] = []
    level: list[Any] = [v]
    while level and all(isinstance(x, list) for x in level):
        lengths.append([len(x) for x in level])
        level = [y for x in level for y in x]
    if not level or not all(_is_number(x) for x in level):
        return None  # strings, booleans, dicts, uneven depth, or no leaves at all
    kinds = {isinstance(x, (float, np.floating)) for x in level}
    if len(kinds) > 1:
        return None  # ints and floats mixed: one dtype would turn the ints into floats
    values = np.array(level, dtype=np.float64 if kinds == {True} else np.int64)
    return values, lengths[1:]  # the outer list's own length is implied by the next level


def _nest(values: list[Any], lengths: list[list[int]]) -> list[Any]:
    items = values
    for level in reversed(lengths):
        grouped, i = [], 0
        for n in level:
            grouped.append(items[i : i + n])
            i += n
        items = grouped
    return items

"""Per-image arrays stored compactly: a 1-D numeric array as zlib-compressed little-endian bytes.

A unit at 1,000 images holds predictions, indices, labels, correctness bits and confidences; as
JSON lists (SQLite) or BSON arrays (MongoDB, ~9 bytes an integer with its key) they dominated a
unit's size. Packed, an integer array takes the narrowest dtype its values fit (int16 for any
label set under 32,768 classes), a non-decreasing one (indices, sparse confusion cells) is
stored as differences, and floats keep their dtype bit for bit. Short arrays stay plain lists:
packing 10 numbers makes them longer, and a plain list keeps small stores readable.

The array decodes lazily, on first use, so a reader that only needs a unit's counts never pays
for its per-image arrays. Reading accepts a plain list or the packed form, so documents written
before packing (plain lists) read unchanged.
"""

from __future__ import annotations

import base64
import zlib
from collections.abc import Iterator
from typing import Any

import numpy as np
from pydantic_core import core_schema

#: arrays of at most this many values are stored as plain JSON lists
PLAIN_MAX = 64
_INT_DTYPES = (np.dtype("<i1"), np.dtype("<i2"), np.dtype("<i4"), np.dtype("<i8"))


class JsonValue:
    """A value type that pydantic fields hold as itself: read through ``cls.coerce`` (its stored JSON form, or an
    older plain one), written as ``to_json()``."""

    __slots__ = ()

    @classmethod
    def coerce(cls, value: Any) -> Any:
        raise NotImplementedError

    def to_json(self) -> Any:
        raise NotImplementedError

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> core_schema.CoreSchema:
        return core_schema.no_info_plain_validator_function(
            cls.coerce,
            serialization=core_schema.plain_serializer_function_ser_schema(
                lambda v: cls.coerce(v).to_json(), when_used="json"),  # model_copy(update=...) skips validation
        )


class PackedArray(JsonValue):
    """An immutable 1-D int or float array with a compact JSON form (``{"dtype", "n", "zlib"}``)."""

    __slots__ = ("_array", "_packed")

    def __init__(self, values: Any = None, *, packed: dict[str, Any] | None = None) -> None:
        self._packed = packed
        self._array: np.ndarray | None = None
        if packed is None:
            arr = np.asarray(values if values is not None else [])
            if arr.ndim != 1:
                raise ValueError(f"a packed array is 1-D, got shape {arr.shape}")
            if arr.size == 0:
                arr = arr.astype(np.int64)
            elif arr.dtype.kind == "b":
                arr = arr.astype(np.int64)
            elif arr.dtype.kind not in "iuf":
                raise ValueError(f"a packed array holds numbers, got dtype {arr.dtype}")
            arr = arr.copy()
            arr.flags.writeable = False
            self._array = arr
        else:
            _check_packed(packed)

    # -- the array ------------------------------------------------------------------------
    @property
    def array(self) -> np.ndarray:
        """The values (read-only); decoded from the packed form on first use."""
        if self._array is None:
            self._array = _unpack(self._packed)  # type: ignore[arg-type]
        return self._array

    def __len__(self) -> int:
        return int(self._packed["n"]) if self._array is None else len(self._array)  # type: ignore[index]

    def __iter__(self) -> Iterator[Any]:
        return iter(self.array.tolist())

    def __getitem__(self, i: Any) -> Any:
        v = self.array[i]
        return v.tolist() if isinstance(v, np.generic) else v

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return self.array if dtype is None else self.array.astype(dtype)

    def tolist(self) -> list[Any]:
        return self.array.tolist()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PackedArray):
            other = other.array
        if isinstance(other, (list, tuple, np.ndarray)):
            o = np.asarray(other)
            return o.ndim == 1 and o.shape == self.array.shape and bool(np.array_equal(self.array, o))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable-looking equality; never a dict key

    def __repr__(self) -> str:
        return f"PackedArray({self.array.tolist()!r})" if len(self) <= 8 else f"PackedArray(n={len(self)})"

    # -- the stored form ------------------------------------------------------------------
    def to_json(self) -> list[Any] | dict[str, Any]:
        if self._packed is not None:
            return self._packed
        arr = self.array
        if len(arr) <= PLAIN_MAX:
            return arr.tolist()
        self._packed = _pack(arr)
        return self._packed

    @classmethod
    def coerce(cls, value: Any) -> PackedArray:
        if isinstance(value, PackedArray):
            return value
        if isinstance(value, dict):
            return cls(packed=value)
        if isinstance(value, (list, tuple, np.ndarray)):
            return cls(value)
        raise ValueError(f"expected a list of numbers or a packed array, got {type(value).__name__}")

    @classmethod
    def __get_pydantic_json_schema__(cls, schema: Any, handler: Any) -> dict[str, Any]:
        return {"anyOf": [{"type": "array", "items": {"type": "number"}},
                          {"type": "object", "required": ["dtype", "n", "zlib"]}]}


def _narrowest(arr: np.ndarray) -> np.dtype:
    lo, hi = int(arr.min()), int(arr.max())
    for dt in _INT_DTYPES:
        info = np.iinfo(dt)
        if info.min <= lo and hi <= info.max:
            return dt
    raise ValueError(f"integer values {lo}..{hi} exceed int64")


def _pack(arr: np.ndarray) -> dict[str, Any]:
    doc: dict[str, Any] = {"n": len(arr)}
    if arr.dtype.kind == "f":
        data = arr.astype(arr.dtype.newbyteorder("<"))
        doc["dtype"] = data.dtype.str
    else:
        values = arr.astype(np.int64)
        if len(values) > 1 and bool(np.all(values[1:] >= values[:-1])):
            # sorted (indices, sparse cells): small differences compress to almost nothing
            doc["first"] = int(values[0])
            values = np.diff(values)
        data = values.astype(_narrowest(values)) if len(values) else values
        doc["dtype"] = data.dtype.str
    doc["zlib"] = base64.b64encode(zlib.compress(data.tobytes(), 9)).decode("ascii")
    return doc


def _unpack(doc: dict[str, Any]) -> np.ndarray:
    raw = np.frombuffer(zlib.decompress(base64.b64decode(doc["zlib"])), dtype=np.dtype(doc["dtype"]))
    if "first" in doc:
        arr = np.empty(len(raw) + 1, dtype=np.int64)
        arr[0] = doc["first"]
        np.cumsum(raw, dtype=np.int64, out=arr[1:])
        arr[1:] += doc["first"]
    elif raw.dtype.kind == "f":
        arr = raw.astype(raw.dtype.newbyteorder("="))
    else:
        arr = raw.astype(np.int64)
    if len(arr) != doc["n"]:
        raise ValueError(f"packed array holds {len(arr)} values but says n={doc['n']}")
    arr.flags.writeable = False
    return arr


#: the dtypes ``_pack`` writes
_DTYPES = frozenset({"|i1", "<i2", "<i4", "<i8", "<f4", "<f8", "<f2"})


def _check_packed(doc: dict[str, Any]) -> None:
    # cheap on purpose: a report reads thousands of units and decodes few of their arrays
    if "zlib" not in doc or "n" not in doc or doc.get("dtype") not in _DTYPES:
        raise ValueError(f"not a packed array of numbers: keys {sorted(doc)}, dtype {doc.get('dtype')!r}")

"""A confusion matrix that never exists densely: its nonzero cells, as flat indices and counts.

At 1,000 classes a dense matrix is 10^6 counts (8.9 MB a unit as JSON) although a unit of n
images fills at most n cells. :class:`SparseConfusion` keeps ``index = true * C + predicted``
(ascending, unique) and the ``count`` of each, packed (``domainbench.records.packed``). Shards merge
by adding counts; per-class support and correct counts, everything balanced and top-1 accuracy
need, come from the cells directly. ``np.asarray(confusion)`` gives the dense matrix for the
few readers that draw it (the UI's heatmap at a handful of classes).

Reading accepts the dense list-of-rows form that units and reports stored before, so old
stores read unchanged.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from domainbench.records.packed import JsonValue, PackedArray


class SparseConfusion(JsonValue):
    """Nonzero cells of a C×C confusion matrix (rows: true class, columns: predicted class)."""

    __slots__ = ("n_classes", "_index", "_count")

    def __init__(self, n_classes: int, index: Any, count: Any) -> None:
        if n_classes < 1:
            raise ValueError(f"a confusion matrix needs at least one class, got {n_classes}")
        self.n_classes = int(n_classes)
        self._index = PackedArray.coerce(index)
        self._count = PackedArray.coerce(count)
        if len(self._index) != len(self._count):
            raise ValueError(f"confusion has {len(self._index)} cells but {len(self._count)} counts")

    # -- construction ---------------------------------------------------------------------
    @classmethod
    def from_pairs(cls, labels: np.ndarray, preds: np.ndarray, n_classes: int) -> SparseConfusion:
        """The confusion of per-image (true, predicted) class indices."""
        flat = np.asarray(labels, dtype=np.int64) * n_classes + np.asarray(preds, dtype=np.int64)
        index, count = np.unique(flat, return_counts=True)
        return cls(n_classes, index, count)

    @classmethod
    def from_dense(cls, matrix: Any) -> SparseConfusion:
        m = np.asarray(matrix, dtype=np.int64)
        if m.ndim != 2 or m.shape[0] != m.shape[1] or m.shape[0] == 0:
            raise ValueError(f"confusion must be a non-empty square C×C matrix, got shape {m.shape}")
        index = np.flatnonzero(m)
        return cls(m.shape[0], index, m.ravel()[index])

    @classmethod
    def total_of(cls, parts: list[SparseConfusion]) -> SparseConfusion:
        """The sum of confusions of the same classes (shards of one cell): order-independent."""
        c = parts[0].n_classes
        if any(p.n_classes != c for p in parts):
            raise ValueError("confusions of different class counts cannot be added")
        if len(parts) == 1:
            return parts[0]
        index = np.concatenate([p.index for p in parts])
        count = np.concatenate([p.count for p in parts])
        cells, inverse = np.unique(index, return_inverse=True)
        return cls(c, cells, np.bincount(inverse, weights=count, minlength=len(cells)).astype(np.int64))

    # -- reading --------------------------------------------------------------------------
    @property
    def index(self) -> np.ndarray:
        return self._index.array

    @property
    def count(self) -> np.ndarray:
        return self._count.array

    @property
    def total(self) -> int:
        return int(self.count.sum())

    def support(self) -> np.ndarray:
        """Images of each true class (the dense matrix's row sums), int64."""
        return np.bincount(self.index // self.n_classes, weights=self.count, minlength=self.n_classes).astype(np.int64)

    def correct(self) -> np.ndarray:
        """Correctly classified images of each true class (the dense matrix's diagonal), int64."""
        rows, cols = np.divmod(self.index, self.n_classes)
        diag = rows == cols
        out = np.zeros(self.n_classes, dtype=np.int64)
        out[rows[diag]] = self.count[diag]
        return out

    def dense(self) -> np.ndarray:
        m = np.zeros(self.n_classes * self.n_classes, dtype=np.int64)
        m[self.index] = self.count
        return m.reshape(self.n_classes, self.n_classes)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        m = self.dense()
        return m if dtype is None else m.astype(dtype)

    def __len__(self) -> int:
        return self.n_classes

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (list, np.ndarray)):
            try:
                other = SparseConfusion.from_dense(other)
            except ValueError:
                return False
        if not isinstance(other, SparseConfusion):
            return NotImplemented
        return (self.n_classes == other.n_classes and np.array_equal(self.index, other.index)
                and np.array_equal(self.count, other.count))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"SparseConfusion(n_classes={self.n_classes}, cells={len(self._index)}, total={self.total})"

    def check(self) -> None:
        """Raise ``ValueError`` unless the cells are in range, ascending, unique and counted positively."""
        idx, cnt = self.index, self.count
        if len(idx) and (idx[0] < 0 or idx[-1] >= self.n_classes**2):
            raise ValueError(f"confusion cells outside a {self.n_classes}×{self.n_classes} matrix")
        if len(idx) > 1 and not bool(np.all(np.diff(idx) > 0)):
            raise ValueError("confusion cells must be ascending and unique")
        if np.any(cnt < 0):
            raise ValueError("confusion contains negative counts")

    # -- the stored form ------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {"classes": self.n_classes, "index": self._index.to_json(), "count": self._count.to_json()}

    @classmethod
    def coerce(cls, value: Any) -> SparseConfusion:
        if isinstance(value, SparseConfusion):
            return value
        if isinstance(value, dict):
            missing = {"classes", "index", "count"} - set(value)
            if missing:
                raise ValueError(f"a sparse confusion needs {sorted(missing)}")
            out = cls(value["classes"], value["index"], value["count"])
        elif isinstance(value, (list, tuple, np.ndarray)):
            out = cls.from_dense(value)  # the dense rows stored before units were compact
            # its cells come from flatnonzero: in range, ascending and unique by construction, so of check() only
            # the sign is left (a run's thousands of dense units are read on every `show`: issue 43)
            if len(out._count) and out.count.min() < 0:
                raise ValueError("confusion contains negative counts")
            return out
        else:
            raise ValueError(f"expected a confusion matrix (rows or sparse cells), got {type(value).__name__}")
        out.check()
        return out

    @classmethod
    def __get_pydantic_json_schema__(cls, schema: Any, handler: Any) -> dict[str, Any]:
        return {"type": "object", "required": ["classes", "index", "count"]}

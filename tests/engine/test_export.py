"""export's columns: named for what they hold, and top-1 distinct from balanced accuracy."""

from __future__ import annotations

import pytest

from domainbench.engine.export import CELL_COLUMNS, CELL_FIELDS, CSV_FIELDS, top1_accuracy
from domainbench.metrics.aggregate import CellSummary
from domainbench.metrics.classification import balanced_accuracy


def cell(confusion: list[list[int]] | None) -> CellSummary:
    n = 0 if confusion is None else sum(map(sum, confusion))
    return CellSummary(corruption="fog", severity=2, n=n or 4, n_unreadable=0, flips=1, lfp=0.25,
                       accuracy=None if confusion is None else balanced_accuracy(confusion),
                       confusion=confusion, in_common=True)


def test_columns_say_what_they_hold() -> None:
    assert "accuracy" not in CELL_FIELDS and "lfp" not in CELL_FIELDS  # the ambiguous old names
    assert {"balanced_accuracy", "top1_accuracy", "label_flip_probability"} <= set(CELL_FIELDS)
    assert CSV_FIELDS == ["run_id", *CELL_FIELDS]
    assert all(CELL_COLUMNS[f] for f in CELL_FIELDS)


def test_top1_differs_from_balanced_on_unbalanced_classes() -> None:
    # class 0: 8 of 8 right; class 1: 0 of 2 right -> top-1 0.8, balanced (1 + 0) / 2 = 0.5
    c = cell([[8, 0], [2, 0]])
    assert top1_accuracy(c) == pytest.approx(0.8)
    assert c.accuracy == pytest.approx(0.5)
    assert top1_accuracy(cell(None)) is None

"""export's columns: named for what they hold, and top-1 distinct from balanced accuracy."""

from __future__ import annotations

import pytest

from domainbench.query.export import CELL_COLUMNS, CELL_FIELDS, CSV_FIELDS, top1_accuracy
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


def test_json_export_names_the_unit_of_every_column_and_keeps_the_csv_names() -> None:
    """The columns keep their names (scripts and the statistics' *_ci_* columns depend on them); the JSON says
    each one's unit, rates being fractions from 0 to 1 (the UI shows them in %)."""
    import csv
    import io
    import json

    from domainbench.query.export import BREAKING_FIELDS, UNPARSEABLE_FIELD, column_units, to_csv, to_json
    from domainbench.metrics.aggregate import summarize
    from domainbench.records.report import RunReport, Versions

    units = [{"schema_version": 1, "run_id": "r", "model": "m", "corruption": c, "severity": s, "shard": 0, "n": 4,
              "confusion": [[2, 0], [1, 1]], "flips": 0 if s == 0 else 1, "seed": 0, "classes": ["a", "b"]}
             for c, s in (("clean", 0), ("fog", 2))]
    report = RunReport(run_id="r", baseline="m", seed=0, classification=summarize(units, "m"),
                       versions=Versions(domainbench="test"))
    doc = json.loads(to_json(None, report))
    csv_columns = next(csv.reader(io.StringIO(to_csv(report))))
    assert csv_columns == CSV_FIELDS  # unchanged names
    assert doc["units"] == column_units()
    assert set(doc["units"]) == {c for c in CELL_FIELDS if c not in ("model", "corruption", "severity")} | {
        UNPARSEABLE_FIELD, *BREAKING_FIELDS, "sa", "fmr", "validation_rate", "mean_steps"}
    assert {doc["units"][c] for c in ("balanced_accuracy", "top1_accuracy_ci_low", "label_flip_probability",
                                      "breaking_point_ci_high", "sa")} == {"fraction"}
    assert (doc["units"]["n_images"], doc["units"]["psnr_db"], doc["units"]["fmr"]) == ("count", "decibel", "percent")
    clean = next(r for r in doc["cells"] if r["corruption"] == "clean")
    assert clean["balanced_accuracy"] == pytest.approx(0.75) and clean["top1_accuracy"] == pytest.approx(0.75)

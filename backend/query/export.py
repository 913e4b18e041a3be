"""A run's results as files: one CSV row per model × cell, or the run and its report as JSON.

Shared by ``domainbench export`` and the UI's download buttons, so both give the same file.
Columns are named for what they hold, since a CSV travels without its documentation: the
stored ``CellSummary.accuracy`` is *balanced* accuracy (mean per-class recall), so the column
says so, and top-1 accuracy (the fraction correct, CLIP_benchmark's ``acc1``) sits next to it.

Units: rates are fractions from 0 to 1 (the UI shows them in %), under the metric registry's names.
Those names are kept as they are, since scripts and the statistics' ``*_ci_low``/``*_ci_high``
columns depend on them; the unit of every column is said instead by the registry (``domainbench
metrics``) and in the JSON export's ``units`` section (``column_units``), which also covers the CSV's columns.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping, Sequence
from typing import Any

from domainbench.metrics.breaking import BreakingPoint
from domainbench.metrics.confidence import APPROXIMATE_COLUMN, RunIntervals, cell_interval_metrics, interval_columns
from domainbench.stats.smoothed import FEW_IMAGES_NOTE, FEW_IMAGES_PER_CLASS
from domainbench.metrics.defs.classification import top1_accuracy as top1_accuracy  # where readers found it
from domainbench.metrics.registry import metric, metrics_of
from domainbench.records.report import RunReport
from domainbench.store.records import RunRecord

#: the columns that say which cell a row is; the metric columns follow, from the registry's cell metrics
CELL_KEY_COLUMNS: dict[str, str] = {
    "model": "registry name of the model",
    "corruption": "corruption name, or 'clean' for the uncorrupted pass",
    "severity": "severity 1..5 (0 for the clean pass)",
}
#: the export column that says whether a row's intervals are anytime-valid (an adaptive run's) or fixed-sample ones
ANYTIME_VALID_COLUMN = "ci_anytime_valid"
#: the interval columns sit between the classification metrics and the PD threat's (registry order < 65 / > 65)
INTERVAL_COLUMNS_AT = 65
_INTERVAL_NAMES = {"wilson": "continuity-corrected Wilson score", "smoothed": "smoothed per-class normal", "bootstrap": "stratified bootstrap"}
_END = {"low": "lower", "high": "upper"}


def interval_column_docs() -> dict[str, str]:
    """``NAME_ci_low`` / ``NAME_ci_high`` of every cell metric declaring an interval (the registry's), and the
    approximate flag; what each holds."""
    return {
        f"{name}_ci_{end}": f"{_END[end]} end of the {_INTERVAL_NAMES[str(metric(name).interval)]} interval of {name} at "
                            "the export's --confidence (empty without it, or where the metric does not apply; an adaptive "
                            "run's are anytime-valid confidence sequences, the JSON export's intervals.anytime_valid)"
        for name in cell_interval_metrics() for end in ("low", "high")
    } | {APPROXIMATE_COLUMN: f"True where the cell's median class has fewer than {FEW_IMAGES_PER_CLASS} images "
                             f"({FEW_IMAGES_NOTE}), else False; empty without a balanced-accuracy interval",
         ANYTIME_VALID_COLUMN: "True where the run was adaptive (run --adaptive): its intervals are anytime-valid "
                               "confidence sequences, valid although the run chose when to stop by looking at the data; "
                               "False where they are fixed-sample intervals; empty without intervals"}


def cell_columns() -> dict[str, str]:
    """One row per model × cell, in this order; what each column holds: the registry's cell metrics (a plug-in's
    included), their interval columns between the classification metrics and the PD threat's."""
    return {
        **CELL_KEY_COLUMNS,
        **{m.name: m.meaning for m in metrics_of("cell") if m.order < INTERVAL_COLUMNS_AT},
        **interval_column_docs(),
        **{m.name: m.meaning for m in metrics_of("cell") if m.order > INTERVAL_COLUMNS_AT},
    }


def cell_fields() -> list[str]:
    return list(cell_columns())


def csv_fields() -> list[str]:
    return ["run_id", *cell_fields()]


def __getattr__(name: str) -> Any:
    # the module constants these were: read from the registry on each use, so a plug-in metric is a column too
    lazy = {"INTERVAL_COLUMNS": interval_column_docs, "CELL_COLUMNS": cell_columns, "CELL_FIELDS": cell_fields,
            "CSV_FIELDS": csv_fields}
    if name in lazy:
        return lazy[name]()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def cell_rows(report: RunReport, intervals: RunIntervals | None = None) -> list[dict[str, Any]]:
    """One row per model × (corruption, severity), the clean pass first, with the cell's PD threat
    and, given ``intervals``, the ``*_ci_low``/``*_ci_high`` columns (empty without them)."""
    metrics = metrics_of("cell")
    columns = cell_columns()
    rows = []
    for m, c in report.all_cells():
        t = report.threat_of(c.corruption, c.severity)
        values = {metric.name: metric.read(c, t) for metric in metrics}
        values |= interval_columns(intervals.cell(m.model, c.corruption, c.severity) if intervals else None)
        values[ANYTIME_VALID_COLUMN] = None if intervals is None else intervals.anytime_valid
        rows.append({"model": m.model, "corruption": c.corruption, "severity": c.severity,
                     **{k: values[k] for k in columns if k in values}})
    return rows


#: a run with generative models answering freely adds this column (docs/generative-vlms.md)
UNPARSEABLE_FIELD = "unparseable_rate"
UNPARSEABLE_DOC = metric(UNPARSEABLE_FIELD).meaning

#: an FMR run's CSV adds one row per tested model (corruption "fmr", severity 0) with its images in
#: n_images, PA (top-1 accuracy on the perturbed images) as its top1_accuracy, and a column for each
#: other FMR metric of the registry (``fmr_fields``)
FMR_ACCURACY = "pa"


def fmr_fields() -> list[str]:
    return [m.name for m in metrics_of("fmr") if m.name != FMR_ACCURACY]


#: a run of several models on labelled images adds the tied group of each row's model (``metrics.letters``): models
#: sharing a letter are not significantly different by the verdicts' test
GROUP_FIELD = "group"
GROUP_DOC = ("the model's tied group letters (compact letter display): models sharing a letter are not significantly "
             "different by the verdicts' paired test, Holm-adjusted over the pairs")

#: a run made with --breaking-point adds these columns, filled on every row of the model × corruption
BREAKING_FIELDS = ["breaking_point", "breaking_point_ci_low", "breaking_point_ci_high"]


def breaking_section(points: Sequence[BreakingPoint]) -> dict[str, Any]:
    """The JSON export's ``breaking_points`` (only for a run made with --breaking-point)."""
    return {"breaking_points": [b.model_dump(mode="json") for b in points]} if points else {}


def to_csv(report: RunReport, intervals: RunIntervals | None = None,
           unparseable: dict[tuple[str, str, int], float] | None = None, breaking: Sequence[BreakingPoint] = (),
           groups: Mapping[str, str] | None = None) -> str:
    """Cells as CSV; a value that does not apply (unlabelled accuracy, no threat) is empty.

    ``unparseable`` (from ``engine.vlm_units.unparseable_rates``) adds the unparseable_rate column;
    ``breaking`` (a --breaking-point run's) the breaking_point columns; ``groups`` (model -> tied group letters) the
    group column.
    """
    fields, rows = csv_rows(report, intervals, unparseable, breaking, groups)
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=fields)  # a key with no column raises: nothing is dropped silently
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()


def csv_rows(report: RunReport, intervals: RunIntervals | None = None,
             unparseable: dict[tuple[str, str, int], float] | None = None,
             breaking: Sequence[BreakingPoint] = (),
             groups: Mapping[str, str] | None = None) -> tuple[list[str], list[dict[str, Any]]]:
    """The CSV export's columns and rows (``to_csv``; ``domainbench.Run.to_pandas`` reads the same rows)."""
    fields = (csv_fields() + ([UNPARSEABLE_FIELD] if unparseable else []) + (BREAKING_FIELDS if breaking else [])
              + (fmr_fields() if report.fmr else []) + ([GROUP_FIELD] if groups else []))
    rows = []
    at = {(b.model, b.corruption): b for b in breaking}
    for row in cell_rows(report, intervals):
        b = at.get((row["model"], row["corruption"]))
        if unparseable:
            row[UNPARSEABLE_FIELD] = unparseable.get((row["model"], row["corruption"], row["severity"]))
        extra = {k: getattr(b, k) for k in BREAKING_FIELDS} if b is not None else {}
        rows.append({"run_id": report.run_id, **row, **extra})
    for m in report.fmr.models if report.fmr else []:
        rows.append({"run_id": report.run_id, "model": m.model, "corruption": "fmr", "severity": 0, "n_images": m.n,
                     "top1_accuracy": metric(FMR_ACCURACY).read(m), **{f: metric(f).read(m) for f in fmr_fields()}})
    if groups:
        for row in rows:
            row[GROUP_FIELD] = groups.get(row["model"])
    return fields, rows


def column_units() -> dict[str, str]:
    """Every metric column the exports can hold (the cells' fixed columns, then the optional ones) -> its unit
    in the registry ("fraction": 0 to 1, "ratio": to the baseline, ...); an interval column has its metric's."""
    names = [*cell_fields(), UNPARSEABLE_FIELD, *BREAKING_FIELDS, *fmr_fields()]
    interval_of = {c: c.rsplit("_ci_", 1)[0] for c in (*interval_column_docs(), *BREAKING_FIELDS) if "_ci_" in c}
    return {c: "flag" if c in (APPROXIMATE_COLUMN, ANYTIME_VALID_COLUMN) else metric(interval_of.get(c, c)).unit
            for c in names if c not in CELL_KEY_COLUMNS}


def to_json(run: RunRecord | None, report: RunReport, intervals: RunIntervals | None = None,
            extra: dict[str, Any] | None = None) -> str:
    """The run, its report, the intervals (when given) and ``extra`` sections (e.g. ``pairs``)."""
    doc = {"run": None if run is None else run.model_dump(mode="json"), "report": report.model_dump(mode="json"),
           # the CSV's rows (ssim, psnr_db, ece, nll, ...): null where a value does not apply or is infinite
           "cells": cell_rows(report, intervals),
           # the unit of each of those columns and of the CSV's (rates are fractions from 0 to 1)
           "units": column_units()}
    if intervals is not None:
        doc["intervals"] = intervals.model_dump(mode="json")
    doc.update(extra or {})
    return json.dumps(doc, indent=2, default=str)

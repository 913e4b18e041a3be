"""A run's results as files: one CSV row per model × cell, or the run and its report as JSON.

Shared by ``domainbench export`` and the UI's download buttons, so both give the same file.
Columns are named for what they hold, since a CSV travels without its documentation: the
stored ``CellSummary.accuracy`` is *balanced* accuracy (mean per-class recall), so the column
says so, and top-1 accuracy (the fraction correct, CLIP_benchmark's ``acc1``) sits next to it.
"""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from domainbench.metrics.aggregate import CellSummary
from domainbench.metrics.confidence import RunIntervals, interval_columns
from domainbench.report import RunReport
from domainbench.store.records import RunRecord

#: one row per model × cell, in this order; what each column holds:
CELL_COLUMNS: dict[str, str] = {
    "model": "registry name of the model",
    "corruption": "corruption name, or 'clean' for the uncorrupted pass",
    "severity": "severity 1..5 (0 for the clean pass)",
    "n_images": "images scored in the cell",
    "balanced_accuracy": "mean per-class recall, 0..1 (empty when the dataset is unlabelled)",
    "top1_accuracy": "fraction of images whose top-1 prediction is the true class, 0..1 (empty when unlabelled)",
    "label_flip_probability": "fraction of images whose prediction differs from the clean one (0 for clean)",
    "label_flips": "number of images whose prediction differs from the clean one",
    "shared_by_all_models": "whether every model has the cell, so it enters the aggregates",
    "top1_accuracy_ci_low": "lower end of the Wilson interval of top1_accuracy at the export's --confidence",
    "top1_accuracy_ci_high": "upper end of the Wilson interval of top1_accuracy",
    "balanced_accuracy_ci_low": "lower end of the stratified bootstrap interval of balanced_accuracy",
    "balanced_accuracy_ci_high": "upper end of the stratified bootstrap interval of balanced_accuracy",
    "label_flip_probability_ci_low": "lower end of the Wilson interval of label_flip_probability (empty for clean)",
    "label_flip_probability_ci_high": "upper end of the Wilson interval of label_flip_probability (empty for clean)",
    "mean_pd_threat": "mean Projected Displacement threat of the corruption cell (empty: not computed)",
    "pd_safe": "whether the PD threat calls the cell label-preserving (empty: not computed)",
}
CELL_FIELDS = list(CELL_COLUMNS)
CSV_FIELDS = ["run_id", *CELL_FIELDS]


def top1_accuracy(cell: CellSummary) -> float | None:
    """Trace over total of the cell's confusion matrix; None when unlabelled (no matrix)."""
    if cell.confusion is None:
        return None
    total = cell.confusion.total
    if total == 0:
        return None
    return int(cell.confusion.correct().sum()) / total


def cell_rows(report: RunReport, intervals: RunIntervals | None = None) -> list[dict[str, Any]]:
    """One row per model × (corruption, severity), the clean pass first, with the cell's PD threat
    and, given ``intervals``, the ``*_ci_low``/``*_ci_high`` columns (empty without them)."""
    rows = []
    for m, c in report.all_cells():
        t = report.threat_of(c.corruption, c.severity)
        rows.append(
            {
                "model": m.model,
                "corruption": c.corruption,
                "severity": c.severity,
                "n_images": c.n,
                "balanced_accuracy": c.accuracy,
                "top1_accuracy": top1_accuracy(c),
                "label_flip_probability": c.lfp,
                "label_flips": c.flips,
                **interval_columns(intervals.cell(m.model, c.corruption, c.severity) if intervals else None),
                "shared_by_all_models": c.in_common,
                "mean_pd_threat": None if t is None else t.mean_threat,
                "pd_safe": None if t is None else t.safe,
            }
        )
    return rows


#: an FMR run's CSV adds one row per tested model (corruption "fmr", accuracy = PA) and these columns
FMR_FIELDS = ["sa", "fmr", "validation_rate", "mean_steps"]


def to_csv(report: RunReport, intervals: RunIntervals | None = None) -> str:
    """Cells as CSV; a value that does not apply (unlabelled accuracy, no threat) is empty."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_FIELDS + (FMR_FIELDS if report.fmr else []), extrasaction="ignore")
    w.writeheader()
    for row in cell_rows(report, intervals):
        w.writerow({"run_id": report.run_id, **row})
    for m in report.fmr.models if report.fmr else []:
        w.writerow({"run_id": report.run_id, "model": m.model, "corruption": "fmr", "severity": 0, "n": m.n,
                    "accuracy": m.pa, "sa": m.sa, "fmr": m.fmr, "validation_rate": m.validation_rate,
                    "mean_steps": m.mean_steps})
    return buf.getvalue()


def to_json(run: RunRecord | None, report: RunReport, intervals: RunIntervals | None = None,
            extra: dict[str, Any] | None = None) -> str:
    """The run, its report, the intervals (when given) and ``extra`` sections (e.g. ``pairs``)."""
    doc = {"run": None if run is None else run.model_dump(mode="json"), "report": report.model_dump(mode="json")}
    if intervals is not None:
        doc["intervals"] = intervals.model_dump(mode="json")
    doc.update(extra or {})
    return json.dumps(doc, indent=2, default=str)

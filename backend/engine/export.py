"""A run's results as files: one CSV row per model × cell, or the run and its report as JSON.

Shared by ``domainbench export`` and the UI's download buttons, so both give the same file.
"""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from backend.report import RunReport
from backend.store.records import RunRecord

CELL_FIELDS = ["model", "corruption", "severity", "n", "accuracy", "lfp", "flips", "in_common", "mean_threat", "safe"]
CSV_FIELDS = ["run_id", "model", "corruption", "severity", "n", "accuracy", "lfp", "flips", "mean_threat", "safe"]


def cell_rows(report: RunReport) -> list[dict[str, Any]]:
    """One row per model × (corruption, severity), the clean pass first, with the cell's PD threat."""
    rows = []
    for m, c in report.all_cells():
        t = report.threat_of(c.corruption, c.severity)
        rows.append(
            {
                "model": m.model,
                "corruption": c.corruption,
                "severity": c.severity,
                "n": c.n,
                "accuracy": c.accuracy,
                "lfp": c.lfp,
                "flips": c.flips,
                "in_common": c.in_common,
                "mean_threat": None if t is None else t.mean_threat,
                "safe": None if t is None else t.safe,
            }
        )
    return rows


#: an FMR run's CSV adds one row per tested model (corruption "fmr", accuracy = PA) and these columns
FMR_FIELDS = ["sa", "fmr", "validation_rate", "mean_steps"]


def to_csv(report: RunReport) -> str:
    """Cells as CSV; a value that does not apply (unlabelled accuracy, no threat) is empty."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_FIELDS + (FMR_FIELDS if report.fmr else []), extrasaction="ignore")
    w.writeheader()
    for row in cell_rows(report):
        w.writerow({"run_id": report.run_id, **row})
    for m in report.fmr.models if report.fmr else []:
        w.writerow({"run_id": report.run_id, "model": m.model, "corruption": "fmr", "severity": 0, "n": m.n,
                    "accuracy": m.pa, "sa": m.sa, "fmr": m.fmr, "validation_rate": m.validation_rate,
                    "mean_steps": m.mean_steps})
    return buf.getvalue()


def to_json(run: RunRecord | None, report: RunReport) -> str:
    doc = {"run": None if run is None else run.model_dump(mode="json"), "report": report.model_dump(mode="json")}
    return json.dumps(doc, indent=2, default=str)

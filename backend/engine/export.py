"""A run's results as files: one CSV row per model × cell, or the run and summary as JSON.

Shared by ``domainbench export`` and the UI's download buttons, so both give the same file.
"""

from __future__ import annotations

import csv
import io
import json
from typing import Any

CELL_FIELDS = ["model", "corruption", "severity", "n", "accuracy", "lfp", "flips", "in_common", "mean_threat", "safe"]
CSV_FIELDS = ["run_id", "model", "corruption", "severity", "n", "accuracy", "lfp", "flips", "mean_threat", "safe"]


def cell_rows(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per model × (corruption, severity), the clean pass first, with the cell's PD threat."""
    threat = {(t["corruption"], t["severity"]): t for t in summary.get("threat") or []}
    rows = []
    for m in summary["classification"]["models"]:
        for c in ([m["clean"]] if m.get("clean") else []) + list(m["cells"]):
            t = threat.get((c["corruption"], c["severity"]), {})
            rows.append(
                {
                    "model": m["model"],
                    "corruption": c["corruption"],
                    "severity": c["severity"],
                    "n": c["n"],
                    "accuracy": c.get("accuracy"),
                    "lfp": c.get("lfp"),
                    "flips": c.get("flips"),
                    "in_common": c.get("in_common", True),
                    "mean_threat": t.get("mean_threat"),
                    "safe": t.get("safe"),
                }
            )
    return rows


def to_csv(summary: dict[str, Any]) -> str:
    """Cells as CSV; a value that does not apply (unlabelled accuracy, no threat) is empty."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_FIELDS, extrasaction="ignore")
    w.writeheader()
    for row in cell_rows(summary):
        w.writerow({"run_id": summary["run_id"], **row})
    return buf.getvalue()


def to_json(run: dict[str, Any] | None, summary: dict[str, Any]) -> str:
    return json.dumps({"run": run, "summary": summary}, indent=2, default=str)

"""A stored VQA or retrieval run printed (``run``, ``show``) and exported (``export``; ``--predictions``).

The numbers are the ones the run stored (``engine.task_kind.load_task_run``): the table reads the export rows, the
verdicts the paired tests; nothing is recomputed here, so what is printed is what is exported.
"""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from rich.console import Console
from rich.table import Table

from domainbench.engine.task_kind import TaskRunResult

#: the issue's prediction columns (VQA); retrieval has one row per query with the rank of its first correct item
VQA_PREDICTION_COLUMNS = ("model", "corruption", "severity", "image", "path", "question", "references", "answer",
                          "answer_normalised", "correct", "clean_answer", "flipped")
RETRIEVAL_PREDICTION_COLUMNS = ("model", "corruption", "severity", "query", "text", "image", "path", "rank", "top1",
                                "top1_changed")

#: the columns of the printed table (the export has every metric)
_SHOWN = {"vqa": ("vqa_accuracy", "yes_no_accuracy", "mc_accuracy", "answer_flip_rate", "unanswered_rate"),
          "retrieval": ("image_retrieval_recall@1", "text_retrieval_recall@1", "image_retrieval_recall@5",
                        "text_retrieval_recall@5", "top1_change_rate")}
_HEADERS = {"vqa_accuracy": "VQA%", "yes_no_accuracy": "y/n%", "mc_accuracy": "MC%",
            "answer_flip_rate": "flip%", "unanswered_rate": "unans%", "top1_change_rate": "top1Δ%",
            "image_retrieval_recall@1": "iR@1%", "text_retrieval_recall@1": "tR@1%",
            "image_retrieval_recall@5": "iR@5%", "text_retrieval_recall@5": "tR@5%"}


def _pct(row: dict[str, Any], metric: str) -> str:
    v, lo, hi = row.get(metric), row.get(f"{metric}_ci_low"), row.get(f"{metric}_ci_high")
    if v is None:
        return "n/a"
    # the interval on its own line: the table stays narrow enough for a terminal
    interval = f"\n[{100 * lo:.0f},{100 * hi:.0f}]" if lo is not None and hi is not None else ""
    return f"{100 * v:.1f}{interval}"


def _cell(row: dict[str, Any]) -> str:
    return "clean" if row["corruption"] == "clean" else f"{row['corruption']}/{row['severity']}"


def verdict_lines(result: TaskRunResult, alpha: float = 0.05) -> list[str]:
    """One sentence per paired test that Holm's correction keeps below ``alpha``; a line saying none otherwise."""
    if len({r["model"] for r in result.rows}) < 2:
        return []
    lines = []
    for p in result.paired:
        if p["p_holm"] is not None and p["p_holm"] < alpha and p["difference"] != 0:
            better, worse = (p["a"], p["b"]) if p["difference"] > 0 else (p["b"], p["a"])
            higher = "higher" if p["metric"] not in ("answer_flip_rate", "unanswered_rate", "top1_change_rate") \
                else "higher (worse)"
            cell = "clean" if p["corruption"] == "clean" else f"{p['corruption']}/{p['severity']}"
            lines.append(f"{cell}: {better} has {higher} {p['metric']} than {worse} by "
                         f"{100 * abs(p['difference']):.1f} points (Holm p = {p['p_holm']:.3g})")
    return lines or [f"no difference between the models is significant at {alpha:g} after Holm's correction "
                     f"({len(result.paired)} paired tests)"]


def print_task_result(console: Console, result: TaskRunResult) -> None:
    run = result.run
    count = "questions" if result.task == "vqa" else "captions"
    table = Table(title=f"{result.task} run {run.run_id} on {run.dataset.path if run.dataset else run.config.dataset} "
                        f"({100 * result.confidence:g}% intervals)")
    for col in ("model", "cell", f"images/{count}"):
        table.add_column(col, overflow="fold")
    for m in _SHOWN[result.task]:
        table.add_column(_HEADERS[m], no_wrap=True)
    for row in result.rows:
        table.add_row(row["model"], _cell(row), f"{row['images']}/{row[count]}",
                      *(_pct(row, m) for m in _SHOWN[result.task]))
    console.print(table)
    console.print("  " + "; ".join(f"{_HEADERS[m]} {m}" for m in _SHOWN[result.task]) + " (all: `domainbench export`)",
                  style="dim", markup=False, highlight=False)
    lines = verdict_lines(result)
    if lines:
        console.print("paired verdicts (McNemar / sign-flip per cell, Holm-corrected):", markup=False, highlight=False)
        for line in lines:
            console.print(f"  {line}", markup=False, highlight=False)


def _csv(rows: list[dict[str, Any]], columns: tuple[str, ...]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(columns), extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for row in rows:
        # a list (the references) is one JSON cell, as the manifest's CSV takes it; None is an empty cell
        w.writerow({c: json.dumps(row.get(c)) if isinstance(row.get(c), list) else row.get(c) for c in columns})
    return buf.getvalue()


def export_text(result: TaskRunResult, fmt: str) -> str:
    """``export``: one row per model x cell with the issue's columns (JSON adds the run, the manifest and the
    paired tests)."""
    if fmt == "csv":
        return _csv(result.rows, result.columns)
    run = result.run
    return json.dumps({"run_id": run.run_id, "task": result.task, "domain": run.domain.domain,
                       "dataset": run.dataset.path if run.dataset else run.config.dataset,
                       "manifest": (run.kind_settings or {}).get("manifest"), "models": run.config.models,
                       "confidence": result.confidence,
                       "rows": [{c: r.get(c) for c in result.columns} for r in result.rows],
                       "paired": result.paired}, indent=2) + "\n"


def predictions_text(result: TaskRunResult, fmt: str) -> tuple[str, int]:
    columns = VQA_PREDICTION_COLUMNS if result.task == "vqa" else RETRIEVAL_PREDICTION_COLUMNS
    rows = result.predictions
    if fmt == "csv":
        return _csv(rows, columns), len(rows)
    return json.dumps([{c: r.get(c) for c in columns} for r in rows], indent=2) + "\n", len(rows)


__all__ = ["RETRIEVAL_PREDICTION_COLUMNS", "VQA_PREDICTION_COLUMNS", "export_text", "predictions_text",
           "print_task_result", "verdict_lines"]

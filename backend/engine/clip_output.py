"""A stored clip run printed (``run``, ``show``) and exported (``export``; ``--predictions``).

The rows are the ones the run stored (``engine.clip_kind.load_clip_run``); the prediction rows are the stored
frame predictions, one per (model, cell, clip, frame), so a metric recomputed from them equals the exported one.
"""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import numpy as np
from rich import box
from rich.console import Console
from rich.table import Table

from domainbench.engine.clip_kind import CLEAN, ClipRunResult
from domainbench.metrics.registry import metrics_of

ROW_KEYS = ("model", "corruption", "severity", "mode", "clips", "frames")
PREDICTION_COLUMNS = ("model", "corruption", "severity", "mode", "clip", "frame_index", "time", "label", "prediction",
                      "clean_prediction", "correct", "flipped", "clip_prediction_vote", "clip_prediction_mean",
                      "clip_prediction_video")
_SHOWN = ("frame_accuracy", "clip_accuracy_mean", "clip_accuracy_vote", "temporal_flip_rate", "flip_rate_added",
          "recovery_time")
#: shown for a model that answers whole clips (video input) only
_VIDEO = ("clip_accuracy_video", "video_answer_flip_rate")
_SHORT = {"independent": "indep", "static": "static"}
_HEADERS = {"frame_accuracy": "frame%", "clip_accuracy_mean": "clip%\nmean", "clip_accuracy_vote": "clip%\nvote",
            "temporal_flip_rate": "flip%", "flip_rate_added": "flip%\nadded", "recovery_time": "recovery\nframes",
            "clip_accuracy_video": "clip%\nvideo", "video_answer_flip_rate": "video\nflips%"}


def columns() -> tuple[str, ...]:
    """The export's columns: the row's keys, then each clip metric of the registry with its interval."""
    out: list[str] = list(ROW_KEYS)
    for m in metrics_of("clip", always=False):
        out.append(m.name)
        if m.interval:
            out += [f"{m.name}_ci_low", f"{m.name}_ci_high"]
    return tuple(out)


def _cell(row: dict[str, Any]) -> str:
    if row["corruption"] == CLEAN:
        return CLEAN
    return f"{row['corruption']}/{row['severity']}" + (f" {_SHORT.get(row['mode'], row['mode'])}" if row.get("mode") else "")


def _value(row: dict[str, Any], metric: str) -> str:
    v, lo, hi = row.get(metric), row.get(f"{metric}_ci_low"), row.get(f"{metric}_ci_high")
    if v is None:
        return "n/a"
    if metric == "recovery_time":
        return f"{v:.2f}" + (f"\n[{lo:.1f},{hi:.1f}]" if lo is not None and hi is not None else "")
    return f"{100 * v:.1f}" + (f"\n[{100 * lo:.0f},{100 * hi:.0f}]" if lo is not None and hi is not None else "")


def verdict_lines(result: ClipRunResult, alpha: float = 0.05) -> list[str]:
    if len({r["model"] for r in result.rows}) < 2:
        return []
    lines = [f"{p['cell']}: {p['verdict']} has the higher {p['metric']} (difference {100 * abs(p['difference']):.1f} "
             f"points, Holm p = {p['p_holm']:.3g})" for p in result.paired if p["verdict"] != "tied"]
    return lines or [f"no difference between the models is significant at {alpha:g} after Holm's correction "
                     f"({len(result.paired)} paired tests)"]


def print_clip_result(console: Console, result: ClipRunResult) -> None:
    run = result.run
    frames = sum(len(c["frame_indices"]) for c in result.clips)
    console.print(f"clip run {run.run_id}: {len(result.clips)} clips, {frames} sampled frames "
                  "(95% intervals, bootstrap over clips)", markup=False, highlight=False)
    # one table per model: a model column would leave the numbers no room in an 80-column terminal
    for model in dict.fromkeys(r["model"] for r in result.rows):
        table = Table(title=model, title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False)
        rows = [r for r in result.rows if r["model"] == model]
        shown = _SHOWN + tuple(m for m in _VIDEO if any(r.get(m) is not None for r in rows))
        cells = [[_value(r, m) for m in shown] for r in rows]
        table.add_column("cell", overflow="fold")
        for k, m in enumerate(shown):
            # as wide as its widest number or interval: the cell name folds instead
            widest = max([len(part) for c in cells for part in c[k].split("\n")] + [6])
            table.add_column(_HEADERS[m], no_wrap=True, min_width=widest)
        for r, values in zip(rows, cells):
            table.add_row(_cell(r), *values)
        console.print(table, markup=False, highlight=False)
    console.print("  frame% per-frame accuracy; clip% mean/vote: clip accuracy by mean embedding / majority vote; "
                  "flip%: temporal flip rate; flip% added: minus the clean clips'; recovery: frames until the clean "
                  "prediction returns; clip% video / video flips%: a video-input model's answer to the whole clip, "
                  "right / changed from the clean clip's (docs/video.md)", style="dim", markup=False, highlight=False)
    skipped = (run.kind_settings or {}).get("unreadable") or []
    if skipped:
        console.print(f"  {len(skipped)} unreadable clip(s) left out: " + ", ".join(s["clip"] for s in skipped),
                      markup=False, highlight=False)
    lines = verdict_lines(result)
    if lines:
        console.print("paired verdicts (sign-flip over clips / McNemar per cell, Holm-corrected):", markup=False,
                      highlight=False)
        for line in lines:
            console.print(f"  {line}", markup=False, highlight=False)


def _csv(rows: list[dict[str, Any]], cols: tuple[str, ...]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(cols), extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for row in rows:
        w.writerow({c: row.get(c) for c in cols})
    return buf.getvalue()


def export_text(result: ClipRunResult, fmt: str) -> str:
    """One row per model × cell (JSON adds the run, the sampling, the clips' frame indices and the paired tests)."""
    cols = columns()
    if fmt == "csv":
        return _csv(result.rows, cols)
    run = result.run
    ks = run.kind_settings or {}
    return json.dumps({"run_id": run.run_id, "kind": "clip", "domain": run.domain.domain,
                       "dataset": run.dataset.path if run.dataset else run.config.dataset,
                       "sampling": ks.get("sampling"), "clips": result.clips, "unreadable": ks.get("unreadable", []),
                       "models": run.config.models, "rows": [{c: r.get(c) for c in cols} for r in result.rows],
                       "paired": result.paired}, indent=2) + "\n"


def prediction_rows(result: ClipRunResult) -> list[dict[str, Any]]:
    """One row per (model, cell, clip, sampled frame), in the run's order."""
    from domainbench.metrics.clips import vote

    classes = result.run.dataset.classes if result.run.dataset is not None else []

    def name(i: int | None) -> str | None:
        return None if i is None else classes[i] if i < len(classes) else str(i)

    out: list[dict[str, Any]] = []
    for r in result.rows:
        key = CLEAN if r["corruption"] == CLEAN else (f"{r['corruption']}:{r['severity']}"
                                                      + (f"/{r['mode']}" if r.get("mode") else ""))
        unit = result.units[f"{r['model']}\t{key}"]
        clean = result.units[f"{r['model']}\t{CLEAN}"]
        for c, clip in enumerate(result.clips):
            preds, cpreds = unit["preds"][c], clean["preds"][c]
            clip_vote = vote(np.asarray(preds))
            clip_mean = None if unit["mean_preds"] is None else unit["mean_preds"][c]
            clip_video = None if unit.get("video_preds") is None else unit["video_preds"][c]
            for t, (frame, time) in enumerate(zip(clip["frame_indices"], clip["times"])):
                label = clip["label"]
                out.append({"model": r["model"], "corruption": r["corruption"], "severity": r["severity"],
                            "mode": r.get("mode"), "clip": clip["clip"], "frame_index": frame, "time": time,
                            "label": name(label), "prediction": name(preds[t]), "clean_prediction": name(cpreds[t]),
                            "correct": None if label is None else int(preds[t] == label),
                            "flipped": None if t == 0 else int(preds[t] != preds[t - 1]),
                            "clip_prediction_vote": name(clip_vote), "clip_prediction_mean": name(clip_mean),
                            "clip_prediction_video": name(clip_video)})
    return out


def predictions_text(result: ClipRunResult, fmt: str) -> tuple[str, int]:
    rows = prediction_rows(result)
    if fmt == "csv":
        return _csv(rows, PREDICTION_COLUMNS), len(rows)
    return json.dumps([{c: r.get(c) for c in PREDICTION_COLUMNS} for r in rows], indent=2) + "\n", len(rows)


__all__ = ["PREDICTION_COLUMNS", "columns", "export_text", "prediction_rows", "predictions_text", "print_clip_result",
           "verdict_lines"]

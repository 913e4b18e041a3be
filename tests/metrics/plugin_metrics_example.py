"""A metric plug-in, as a package outside domainbench ships one (``tests/metrics/test_metric_plugin.py`` installs
it under the entry-point group ``domainbench.metrics``; docs/extending.md shows the same file).

Two metrics: a cell's top-1 error with its Wilson interval, and its mean over the model's common cells."""

from __future__ import annotations

from typing import Any

from domainbench.metrics.registry import Metric, mean_over_cells


def top1_error(cell: Any, threat: Any = None) -> float | None:
    """1 − correct / images of a labelled cell (None: unlabelled)."""
    counts = top1_error_counts(cell)
    return None if counts is None or counts[1] == 0 else counts[0] / counts[1]


def top1_error_counts(cell: Any, threat: Any = None) -> tuple[int, int] | None:
    """(wrong, images): the Wilson interval's counts."""
    if cell.confusion is None:
        return None
    return cell.n - int(cell.confusion.correct().sum()), cell.n


METRICS = (
    Metric("top1_error", "top-1 error", "fraction", "lower", "fraction of images whose top-1 prediction is wrong",
           "cell", ("confusion",), "confusion matrices summed over the cell's shards, then 1 − trace over total",
           interval="wilson", order=95, percent=True, ui_header="top-1 error %", compute=top1_error,
           counts=top1_error_counts),
    Metric("mean_top1_error", "mean top-1 error", "fraction", "lower",
           "top-1 error averaged over the corruption × severity cells every model has", "model", ("confusion",),
           "mean over the common cells of the cells' top-1 error", order=80, cli_header="err%",
           ui_header="mean top-1 error %", percent=True, compute=mean_over_cells("top1_error")),
)

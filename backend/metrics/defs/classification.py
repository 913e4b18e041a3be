"""Zero-shot classification under corruption: per cell, per corruption and per model."""

from __future__ import annotations

from typing import Any

from domainbench.metrics.registry import Metric
from domainbench.records.results import CLEAN


def top1_accuracy(cell: Any, threat: Any = None) -> float | None:
    """Correct over total of the cell's (sparse) confusion matrix; None when unlabelled (no matrix) or empty."""
    if cell.confusion is None:
        return None
    total = cell.confusion.total
    if total == 0:
        return None
    return int(cell.confusion.correct().sum()) / total


def top1_counts(cell: Any, threat: Any = None) -> tuple[int, int] | None:
    """(correct, images) of a labelled cell: what its Wilson interval is of."""
    if cell.confusion is None:
        return None
    return int(cell.confusion.correct().sum()), cell.n


def flip_counts(cell: Any, threat: Any = None) -> tuple[int, int] | None:
    """(flips, images) of a corrupted cell paired with clean images; None for the clean pass (0 by definition)
    and for an unpaired real-shift cell (nothing to flip from)."""
    if cell.corruption == CLEAN or cell.lfp is None:
        return None
    return cell.flips, cell.n


_CELL = "summed over the cell's shards"
_COMMON = "mean over the cells every model has (the common cells)"
#: the CLI footer's note on the clean and corrupted accuracy columns
_ACC_NOTE = "balanced accuracy clean and averaged over corruption cells"
_RELATIVE = "mean over the common corruptions of the per-corruption ratio to the baseline (undefined terms left out)"

METRICS = (
    # -- one model × (corruption, severity) cell: the export's rows
    Metric("n_images", "images", "count", None, "images scored in the cell", "cell", ("n",), _CELL,
           order=10, field="n"),
    Metric("balanced_accuracy", "balanced accuracy", "fraction", "higher",
           "balanced accuracy: the mean of the per-class recalls, so every class counts the same (empty when the "
           "dataset is unlabelled)", "cell", ("confusion",),
           f"confusion matrices {_CELL}, then the mean of the per-class recalls", interval="smoothed",
           order=20, percent=True, field="accuracy", ui_header="accuracy %"),
    Metric("top1_accuracy", "top-1 accuracy", "fraction", "higher",
           "fraction of images whose top-1 prediction is the true class (empty when unlabelled)", "cell",
           ("confusion",), f"confusion matrices {_CELL}, then trace over total", interval="wilson",
           order=30, percent=True, compute=top1_accuracy, counts=top1_counts,
           interval_order=15),  # the exports' interval columns have always begun with top-1's
    Metric("label_flip_probability", "label flip probability", "fraction", "lower",
           "fraction of images whose prediction differs from the clean one (0 for clean)", "cell", ("flips", "n"),
           f"flips and images {_CELL}, then flips over images", interval="wilson", order=40, percent=True,
           field="lfp", ui_header="flip probability %", counts=flip_counts, aliases=("lfp",)),
    Metric("label_flips", "label flips", "count", "lower", "number of images whose prediction differs from the clean one",
           "cell", ("flips",), _CELL, order=50, field="flips"),
    Metric("shared_by_all_models", "shared by all models", "flag", None,
           "whether every model has the cell, so it enters the aggregates", "cell", ("model", "corruption", "severity"),
           "true when every model of the run has the cell", order=60, field="in_common"),
    # -- one model × corruption, over its severities
    Metric("ce_per_corruption", "CE", "ratio", "lower",
           "corruption error: the model's summed error over the severities relative to the baseline's", "corruption",
           ("confusion",), "Σ_s error / Σ_s baseline error over the common severities",
           order=10, field="ce"),
    Metric("rce_per_corruption", "rCE", "ratio", "lower",
           "relative corruption error: the model's error increase over clean relative to the baseline's", "corruption",
           ("confusion",), "Σ_s (error − clean error) / the baseline's, over the common severities",
           order=20, field="rce"),
    Metric("fr_per_corruption", "FR", "ratio", "lower",
           "flip rate: the model's summed label flip probability relative to the baseline's", "corruption",
           ("flips", "n"), "Σ_s LFP / Σ_s baseline LFP over the common severities",
           order=30, field="fr"),
    # -- one model over the run: the summary table
    Metric("clean_accuracy", "clean accuracy", "fraction", "higher", "balanced accuracy on the uncorrupted images",
           "model", ("confusion",), "the clean pass's cell", interval="smoothed", order=10, cli_header="clean%",
           ui_header="clean acc %", percent=True, field="acc", cli_note=_ACC_NOTE, aliases=("acc",)),
    Metric("mean_corrupted_accuracy", "mean corrupted accuracy", "fraction", "higher",
           "balanced accuracy averaged over the corruption × severity cells", "model", ("confusion",), _COMMON,
           interval="smoothed", order=20, cli_header="corr%", ui_header="corrupted acc %", percent=True,
           field="mean_corrupted_acc", cli_note=_ACC_NOTE, aliases=("mean_corrupted_acc",)),
    Metric("mce", "mCE", "ratio", "lower",
           "mean corruption error: the model's errors under corruption relative to the baseline's, averaged over the "
           "corruptions", "model", ("confusion",),
           _RELATIVE, interval="smoothed", order=40, cli_header="mCE", field="mce"),
    Metric("rce", "rCE", "ratio", "lower",
           "mean relative corruption error: the drop from clean, relative to the baseline's drop", "model",
           ("confusion",), _RELATIVE, interval="smoothed", order=50, cli_header="rCE", field="rce"),
    Metric("mfr", "mFR", "ratio", "lower",
           "mean flip rate relative to the baseline: how often predictions change under corruption", "model",
           ("flips", "n"), _RELATIVE, interval="smoothed", order=60, cli_header="mFR", field="mfr"),
    Metric("corr_accuracy_lfp", "corr(acc, LFP)", "correlation", None,
           "Pearson correlation of balanced accuracy and label flip probability across the cells", "model",
           ("confusion", "flips", "n"), "Pearson's r over the common cells (needs 3)", order=70, cli_header="r",
           field="corr", cli_note="Pearson(accuracy, flip probability) across cells", aliases=("corr", "pearson_acc_lfp")),
)

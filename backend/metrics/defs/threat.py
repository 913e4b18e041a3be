"""Projected Displacement threat: is a corruption cell still label-preserving?"""

from __future__ import annotations

from domainbench.metrics.registry import Metric

_POOLED = "threat sums pooled over the cell's shards (model-independent)"

METRICS = (
    Metric("mean_pd_threat", "mean PD threat", "threat", "lower",
           "mean Projected Displacement threat of the corruption cell: how far it moves an image towards images of "
           "other classes (1 = half-way; above 1 the corruption may have changed the true label, so an error there is "
           "not necessarily the model's fault; empty: not computed)", "cell",
           ("threat: sum, n",), f"{_POOLED}, then the mean over images", order=70,
           compute=lambda cell, threat: None if threat is None else threat.mean_threat),
    Metric("pd_safe", "PD-safe", "flag", None,
           "whether the PD threat shows the cell label-preserving: the 95 % interval of the share of its images "
           "above threat 1 lies wholly below 10 % (false: borderline or unsafe; empty: not computed)", "cell",
           ("threat: n_above_1, n",), f"{_POOLED}; Clopper–Pearson interval of n_above_1 / n against the 10 % cut",
           order=80,
           compute=lambda cell, threat: None if threat is None else threat.safe),
    Metric("safe_accuracy", "safe-cell accuracy", "fraction", "higher",
           "balanced accuracy averaged over the cells the PD threat shows label-preserving (PD-safe)", "model",
           ("confusion", "threat: sum, n"), "mean over the PD-safe common cells", interval="smoothed", order=30,
           cli_header="safe%", ui_header="safe-cell acc %", percent=True, field="safe_acc",
           cli_note="averaged over cells whose PD threat is safe", aliases=("safe_acc",)),
)

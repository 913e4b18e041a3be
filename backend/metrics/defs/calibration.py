"""Calibration under corruption: does the model's confidence still mean anything?"""

from __future__ import annotations

from domainbench.metrics.registry import Metric

_SUMS = "per-bin counts, confidence and correct sums (15 equal-width bins of top-1 confidence) summed over the cell's shards"

METRICS = (
    Metric("ece", "ECE", "fraction", "lower",
           "expected calibration error: mean gap between top-1 confidence and accuracy over 15 bins (empty: unlabelled)",
           "cell", ("calibration",), f"{_SUMS}, then Σ_b |correct_b − confidence_b| / n", order=82,
           compute=lambda cell, threat: None if cell.calibration is None else cell.calibration.ece),
    Metric("nll", "NLL", "nats", "lower",
           "mean negative log-likelihood of the true class under the model's softmax (empty: unlabelled, or some "
           "image's true class got no score: a choice-mode letter absent from the returned top log-probabilities, "
           "so the NLL is unbounded)",
           "cell", ("calibration",), "−log p(true class) summed over the cell's shards, over its labelled images",
           order=84, compute=lambda cell, threat: None if cell.calibration is None else cell.calibration.nll),
)

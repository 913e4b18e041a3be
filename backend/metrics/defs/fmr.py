"""Foundation-model-oriented robustness (``domainbench fmr``): per tested model."""

from __future__ import annotations

from domainbench.metrics.registry import Metric

_NEEDS = ("fmr: labels, clean and final predictions, oracle votes",)
_POOLED = "per-image outcomes pooled over the model's shards"

METRICS = (
    Metric("sa", "SA", "fraction", "higher", "standard accuracy: the tested model's accuracy on the clean images",
           "fmr", _NEEDS, _POOLED, interval="wilson", order=10, percent=True, field="sa", cli_header="SA%",
           ui_header="SA %"),
    Metric("pa", "PA", "fraction", "higher",
           "perturbed accuracy: the tested model's accuracy on the hardest perturbation of each image that the oracle "
           "zoo still labels correctly", "fmr", _NEEDS, _POOLED, interval="wilson", order=20, percent=True, field="pa",
           cli_header="PA%", ui_header="PA %"),
    Metric("fmr", "FMR", "percent", "higher",
           "PA / SA × 100: the share of clean accuracy that survives the search (100 = no loss under the search's "
           "perturbations)", "fmr", _NEEDS, f"{_POOLED}, then PA / SA × 100", order=30, field="fmr", cli_header="FMR",
           decimals=1, cli_note="= PA / SA × 100"),
    Metric("validation_rate", "VR", "fraction", None,
           "share of images with at least one accepted perturbation step (a step the oracle zoo still labels "
           "correctly)", "fmr", _NEEDS, _POOLED, order=40, percent=True, field="validation_rate", cli_header="VR%",
           ui_header="validation rate %", cli_note="share of images with at least one accepted perturbation step"),
    Metric("mean_steps", "steps", "steps", None,
           "accepted perturbation steps per image, on average (at most the search's budget)", "fmr", _NEEDS,
           _POOLED, order=50, field="mean_steps", cli_header="steps", ui_header="mean steps", decimals=2),
)

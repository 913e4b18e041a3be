"""Statistics for confident answers: intervals, paired tests, multiplicity, bootstrap, sequential bounds.

Pure numpy/scipy, no knowledge of runs or stores: callers hand in counts or per-image arrays.
docs/reading-the-numbers.md explains each method in plain words.
"""

from __future__ import annotations

from domainbench.stats.bootstrap import (
    DEFAULT_RESAMPLES,
    balanced_accuracy_weighted,
    bootstrap_weights,
    mean_draws,
    paired_balanced_accuracy_difference,
    percentile_interval,
    shared_bootstrap_weights,
    stratified_bootstrap,
)
from domainbench.stats.intervals import check_confidence, normal_quantile, proportion_interval, wilson_interval
from domainbench.stats.paired import holm, mcnemar_exact, paired_sample_size
from domainbench.stats.written import interval_text

__all__ = [
    "DEFAULT_RESAMPLES",
    "balanced_accuracy_weighted",
    "bootstrap_weights",
    "check_confidence",
    "holm",
    "interval_text",
    "mcnemar_exact",
    "mean_draws",
    "normal_quantile",
    "paired_balanced_accuracy_difference",
    "paired_sample_size",
    "percentile_interval",
    "proportion_interval",
    "shared_bootstrap_weights",
    "stratified_bootstrap",
    "wilson_interval",
]

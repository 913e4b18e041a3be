"""Intervals of a stored run, read through the store: what ``show``, ``export`` and the UI call."""

from __future__ import annotations

from domainbench.metrics.confidence import RunIntervals, run_intervals
from domainbench.metrics.outcomes import ImageOutcomes, image_outcomes
from domainbench.report import RunReport
from domainbench.stats.bootstrap import DEFAULT_RESAMPLES
from domainbench.stats.intervals import DEFAULT_CONFIDENCE, check_confidence
from domainbench.store import Store


def load_outcomes(store: Store, run_id: str) -> ImageOutcomes:
    return image_outcomes(store.units(run_id))


def load_intervals(store: Store, report: RunReport, confidence: float = DEFAULT_CONFIDENCE,
                   resamples: int = DEFAULT_RESAMPLES) -> RunIntervals:
    """The report's intervals at ``confidence``; the bootstrap is seeded by the run's seed, so
    the same run gives the same intervals every time."""
    confidence = check_confidence(confidence)
    return run_intervals(report, load_outcomes(store, report.run_id), store.stability(report.run_id),
                         confidence=confidence, resamples=resamples, seed=report.seed)


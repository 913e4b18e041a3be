"""Intervals of a stored run, read through the store: what ``show``, ``export`` and the UI call."""

from __future__ import annotations

from domainbench.engine.adaptive import sequential_intervals
from domainbench.metrics.confidence import RunIntervals, run_intervals
from domainbench.config import SHIFT_PREFIX
from domainbench.metrics.outcomes import ImageOutcomes, image_outcomes, shift_outcomes
from domainbench.report import RunReport
from domainbench.stats.bootstrap import DEFAULT_RESAMPLES
from domainbench.stats.intervals import DEFAULT_CONFIDENCE, check_confidence
from domainbench.store import Store


def load_outcomes(store: Store, run_id: str) -> ImageOutcomes:
    return image_outcomes(store.units(run_id))


def load_intervals(store: Store, report: RunReport, confidence: float = DEFAULT_CONFIDENCE,
                   resamples: int = DEFAULT_RESAMPLES) -> RunIntervals:
    """The report's intervals at ``confidence``; the bootstrap is seeded by the run's seed, so
    the same run gives the same intervals every time. An adaptive run's top-1 and flip intervals
    are its anytime-valid confidence sequences."""
    confidence = check_confidence(confidence)
    units = store.units(report.run_id)
    run = store.get_run(report.run_id)
    sequential = sequential_intervals(units, confidence) if run is not None and run.config.adaptive else None
    unpaired = frozenset(u.corruption for u in units if u.corruption.startswith(SHIFT_PREFIX) and not u.params.get("paired", True))
    return run_intervals(report, image_outcomes(units), store.stability(report.run_id),
                         confidence=confidence, resamples=resamples, seed=report.seed, sequential=sequential,
                         shifts=shift_outcomes(units), unpaired=unpaired)


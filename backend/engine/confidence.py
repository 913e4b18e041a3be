"""Intervals of a stored run, read through the store: what ``show``, ``export`` and the UI call."""

from __future__ import annotations

from domainbench.engine.adaptive import sequential_intervals
from domainbench.metrics.compare_intervals import RunDraws, run_draws
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


def load_draws(store: Store, report: RunReport, resamples: int = DEFAULT_RESAMPLES, seed: int | None = None) -> RunDraws:
    """The report's numbers under each bootstrap resample of its images (``metrics.compare_intervals``): by
    default the same resamples as :func:`load_intervals` (seeded by the run); ``seed`` draws others, e.g. the
    seed of another run on the same images, so that the two are resampled jointly."""
    run = store.get_run(report.run_id)
    dataset = run.config.dataset if run is not None else ""
    return run_draws(report, load_outcomes(store, report.run_id), dataset, resamples,
                     report.seed if seed is None else seed)

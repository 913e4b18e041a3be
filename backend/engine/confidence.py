"""Intervals of a stored run, read through the store: what ``show``, ``export`` and the UI call."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from domainbench.engine.adaptive import sequential_intervals, sequential_model_intervals
from domainbench.metrics.classification import MetricInputError
from domainbench.metrics.compare_intervals import RunDraws, run_draws
from domainbench.metrics.confidence import RunIntervals, run_intervals
from domainbench.config import SHIFT_PREFIX
from domainbench.metrics.outcomes import ImageOutcomes, image_outcomes, shift_outcomes
from domainbench.report import RunReport
from domainbench.stats.bootstrap import DEFAULT_RESAMPLES
from domainbench.stats.intervals import DEFAULT_CONFIDENCE, check_confidence
from domainbench.store import Store
from domainbench.store.records import UnitRecord


@dataclass(frozen=True)
class RunOutcomes:
    """What the statistics read from a run's unit documents, read once (:func:`read_outcomes`): its intervals
    (:func:`load_intervals`), its bootstrap resamples (:func:`load_draws`) and its paired tests
    (``engine.compare``) all start from it, so a caller that keeps it (the UI, per run state) reads the units
    once for all three. Its arrays are read-only: it is shared."""

    run_id: str
    #: the per-image outcomes of the run's images (``image_outcomes``); None where they cannot be aligned
    images: ImageOutcomes | None
    #: why ``images`` is None (``image_outcomes``' refusal)
    problem: str = ""
    #: the units of the real-shift cells, on their own images (``shift_outcomes``)
    shift_units: tuple[UnitRecord, ...] = ()
    #: an adaptive run's units in stored order (its confidence sequences replay them); None for another run
    adaptive_units: tuple[UnitRecord, ...] | None = None

    def outcomes(self) -> ImageOutcomes:
        """The run's per-image outcomes, or the ``MetricInputError`` that says why there are none."""
        if self.images is None:
            raise MetricInputError(self.problem)
        return self.images


#: reads a run's :class:`RunOutcomes`: (store, run id) -> outcomes (:func:`read_outcomes`, or a cached one)
OutcomesReader = Callable[[Store, str], RunOutcomes]


def _read_only(outcomes: ImageOutcomes) -> ImageOutcomes:
    for a in (outcomes.indices, outcomes.labels, *outcomes.preds.values()):
        if a is not None:
            a.flags.writeable = False
    return outcomes


def read_outcomes(store: Store, run_id: str) -> RunOutcomes:
    """Read the run's unit documents once and keep what the statistics use from them."""
    units = store.units(run_id)
    run = store.get_run(run_id)
    try:
        images, problem = _read_only(image_outcomes(units)), ""
    except MetricInputError as e:
        images, problem = None, str(e)
    return RunOutcomes(run_id=run_id, images=images, problem=problem,
                       shift_units=tuple(u for u in units if u.corruption.startswith(SHIFT_PREFIX)),
                       adaptive_units=tuple(units) if run is not None and run.config.adaptive else None)


def load_outcomes(store: Store, run_id: str, read: OutcomesReader = read_outcomes) -> ImageOutcomes:
    return read(store, run_id).outcomes()


def load_intervals(store: Store, report: RunReport, confidence: float = DEFAULT_CONFIDENCE,
                   resamples: int = DEFAULT_RESAMPLES, read: OutcomesReader = read_outcomes) -> RunIntervals:
    """The report's intervals at ``confidence``; the draws are seeded by the run's seed, so
    the same run gives the same intervals every time. An adaptive run's intervals are its anytime-valid
    confidence sequences (``engine.adaptive``), and ``anytime_valid`` says so."""
    confidence = check_confidence(confidence)
    run = read(store, report.run_id)
    adaptive = run.adaptive_units
    sequential = sequential_intervals(adaptive, confidence, report.seed) if adaptive is not None else None
    unpaired = frozenset(u.corruption for u in run.shift_units if not u.params.get("paired", True))
    found = run_intervals(report, run.outcomes(), store.stability(report.run_id),
                          confidence=confidence, resamples=resamples, seed=report.seed, sequential=sequential,
                          shifts=shift_outcomes(run.shift_units), unpaired=unpaired)
    if adaptive is None or sequential is None:
        return found
    # an adaptive run stopped its cells by looking at them: every cell and model interval is an anytime-valid one
    models = sequential_model_intervals(adaptive, report, confidence, report.seed)
    cells = [c.model_copy(update={k: v for k, v in sequential.get((c.model, c.corruption, c.severity), {}).items()})
             for c in found.cells]
    return found.model_copy(update={"cells": cells, "anytime_valid": True,
                                    "models": [m.model_copy(update=models.get(m.model, {})) for m in found.models]})


def load_draws(store: Store, report: RunReport, resamples: int = DEFAULT_RESAMPLES, seed: int | None = None,
               read: OutcomesReader = read_outcomes) -> RunDraws:
    """The report's numbers under each draw of its multipliers (``metrics.compare_intervals``): by
    default the same resamples as :func:`load_intervals` (seeded by the run); ``seed`` draws others, e.g. the
    seed of another run on the same images, so that the two are resampled jointly."""
    run = store.get_run(report.run_id)
    dataset = run.config.dataset if run is not None else ""
    return run_draws(report, load_outcomes(store, report.run_id, read), dataset, resamples,
                     report.seed if seed is None else seed)

"""Intervals of a stored run, read through the store: what ``show``, ``export`` and the UI call."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from domainbench.engine.adaptive import sequential_intervals, sequential_model_intervals
from domainbench.metrics.aggregate import CLEAN
from domainbench.metrics.classification import MetricInputError
from domainbench.metrics.compare_intervals import RunDraws, run_draws
from domainbench.metrics.confidence import RunIntervals, run_intervals
from domainbench.records.config import SHIFT_PREFIX
from domainbench.metrics.outcomes import ImageOutcomes, UnitPredictions, image_outcomes, shift_outcomes
from domainbench.records.report import RunReport
from domainbench.stats.bootstrap import DEFAULT_RESAMPLES
from domainbench.stats.intervals import DEFAULT_CONFIDENCE, check_confidence
from domainbench.store import Store
from domainbench.store.records import UnitRecord


@dataclass(frozen=True)
class RunOutcomes:
    """What the statistics read from a run's unit documents, read once (:func:`read_outcomes`): its intervals
    (:func:`load_intervals`), its bootstrap resamples (:func:`load_draws`) and its paired tests
    (``query.compare``) all start from it, so a caller that keeps it (the UI, per run state) reads the units
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
    """Read the run's unit documents once and keep what the statistics use from them.

    The per-image arrays come from ``Store.unit_predictions`` (every unit was validated when it was written; a
    validated read of thousands of small units took seconds per run); the few units kept whole are read
    validated: the real-shift cells' and, for an adaptive run (its confidence sequences replay them), all."""
    run = store.get_run(run_id)
    adaptive: tuple[UnitRecord, ...] | None = None
    if run is not None and run.config.adaptive:
        adaptive = tuple(store.units(run_id))
        stored: list[UnitRecord] | list[UnitPredictions] = list(adaptive)
        shifts = [u for u in adaptive if u.corruption.startswith(SHIFT_PREFIX)]
    else:
        stored = [UnitPredictions.from_stored(d) for d in store.unit_predictions(run_id)]
        names = dict.fromkeys(u.corruption for u in stored if u.corruption.startswith(SHIFT_PREFIX))
        shifts = [u for name in names for u in store.units(run_id, corruption=name)]
    try:
        images, problem = _read_only(image_outcomes(stored)), ""
    except MetricInputError as e:
        images, problem = None, str(e)
    return RunOutcomes(run_id=run_id, images=images, problem=problem, shift_units=tuple(shifts),
                       adaptive_units=adaptive)


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
    seed of another run on the same images, so that the two are resampled jointly.

    An adaptive run stopped its cells by looking at them, so resampling its images is not valid: its draws are
    instead spread along its anytime-valid intervals (:func:`anytime_valid_draws`), and ``anytime_valid`` says so."""
    run = store.get_run(report.run_id)
    dataset = run.config.dataset if run is not None else ""
    found = read(store, report.run_id)
    drawn = run_draws(report, found.outcomes(), dataset, resamples, report.seed if seed is None else seed)
    if found.adaptive_units is None:
        return drawn
    return anytime_valid_draws(drawn, found.adaptive_units, report)


#: the levels whose anytime-valid intervals place an adaptive run's draws (each level c puts its interval's ends
#: at the (1 - c)/2 and (1 + c)/2 quantiles of the draws); 0.95 is one, so Compare's 95 % intervals are exact there
DRAW_LEVELS = (0.2, 0.5, 0.8, 0.9, 0.95, 0.98, 0.99, 0.995, 0.999)


def anytime_valid_draws(drawn: RunDraws, units: tuple[UnitRecord, ...], report: RunReport,
                        levels: tuple[float, ...] = DRAW_LEVELS) -> RunDraws:
    """An adaptive run's numbers as draws whose percentile interval at each of ``levels`` is the number's
    anytime-valid interval at that level (between the levels, interpolated): the quantile function those intervals
    trace, taken at (i + 1/2)/resamples in one seeded order shared by all the run's numbers.

    So Compare's aggregate over this run alone is its anytime-valid interval (``load_intervals``' own), and a mean
    over several runs combines this run's anytime-valid spread with the others' draws as independent. Numbers that
    have no anytime-valid interval (mCE, rCE, mFR and the per-corruption CE, rCE, FR: ratios to the baseline's
    errors, which no sequence bounds) are nan: no interval, rather than one the stopping has invalidated. A
    corruption's accuracy (the mean over its severities) is the mean of the severities' sequences at level
    1 - alpha / k each (Bonferroni), as ``sequential_model_intervals`` makes the corrupted mean."""
    seed = report.seed
    per_level_models = {c: sequential_model_intervals(units, report, c, seed) for c in levels}
    severities: dict[str, set[int]] = {}
    for _, cell in report.all_cells():
        if cell.corruption != CLEAN and not cell.corruption.startswith(SHIFT_PREFIX):
            severities.setdefault(cell.corruption, set()).add(cell.severity)
    ks = {len(v) for v in severities.values()}
    per_level_cells = {(c, k): sequential_intervals(units, 1 - (1 - c) / k, seed) for c in levels for k in ks}
    u = (np.arange(drawn.resamples) + 0.5) / drawn.resamples
    u = u[np.random.default_rng([seed, 34]).permutation(drawn.resamples)]
    nan = np.full(drawn.resamples, np.nan)

    def spread(ends: list[tuple[float, float] | None]) -> np.ndarray:
        if any(e is None for e in ends):
            return nan
        low = np.minimum.accumulate([e[0] for e in ends])  # type: ignore[index]  # nested: wider at higher levels
        high = np.maximum.accumulate([e[1] for e in ends])  # type: ignore[index]
        middle = (low[0] + high[0]) / 2
        at = np.concatenate([(1 - np.asarray(levels))[::-1] / 2, [0.5], (1 + np.asarray(levels)) / 2])
        return np.interp(u, at, np.concatenate([low[::-1], [middle], high]))

    models = {m: {k: spread([per_level_models[c].get(m, {}).get(k) for c in levels]) for k in d}
              for m, d in drawn.models.items()}

    def corruption_mean(model: str, corruption: str, c: float) -> tuple[float, float] | None:
        sev = sorted(severities.get(corruption, ()))
        ends = [per_level_cells[(c, len(sev))].get((model, corruption, s), {}).get("balanced_accuracy") for s in sev]
        if not sev or any(e is None for e in ends):
            return None
        return float(np.mean([e[0] for e in ends])), float(np.mean([e[1] for e in ends]))  # type: ignore[index]

    corruptions = {m: {corr: {k: spread([corruption_mean(m, corr, c) for c in levels]) if k == "accuracy" else nan
                              for k in d} for corr, d in per.items()}
                   for m, per in drawn.corruptions.items()}
    return replace(drawn, models=models, corruptions=corruptions, anytime_valid=True)

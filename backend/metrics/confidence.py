"""Intervals on every number of a run's report, at a chosen confidence level.

Proportions (top-1 accuracy, label flip probability, FMR's SA and PA) get Wilson score
intervals with continuity correction (``stats.proportion_interval``) from their counts. Balanced accuracy and everything built on per-class recalls or flip
rates (mean corrupted accuracy, safe-cell accuracy, mCE, rCE, mFR, the per-corruption values) get
the smoothed per-class normal interval of ``stats.smoothed``, drawn as a Gaussian multiplier
bootstrap: one matrix of multipliers (one per image and draw) is shared by every model and cell,
so the relative metrics, which divide one model's errors by the baseline's on the same images, are
drawn as pairs, and a mean over cells as one. With all multipliers 0 the functions here give
exactly the report's point values (tested), which is what ties the intervals to the numbers they
sit beside. The stability means keep a percentile bootstrap over images (stratified by class):
they are means of continuous per-image values, not of per-class recalls.

Which numbers get an interval, and which method, is each metric's ``interval`` in the metric registry
(``metrics.registry.interval_metrics``): a cell metric declaring ``"wilson"`` gets the (continuity-corrected) Wilson interval of its
``counts`` (a plug-in's too: its interval rides on ``CellIntervals`` under its name), ``"smoothed"`` the
drawn balanced accuracy; a model metric declaring ``"smoothed"`` gets the interval of its draws here
(``metric_draws`` draws the stored model metrics, the fields of ``ModelIntervals``; a declaration on any
other model metric is refused); FMR metrics ``"wilson"`` of their rate over the tested images; stability
means ``"bootstrap"``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
from pydantic import BaseModel, ConfigDict

from domainbench.records.config import SHIFT_PREFIX
from domainbench.metrics.aggregate import CLEAN, CellKey
from domainbench.metrics.classification import DEGRADATION_EPS
from domainbench.metrics.outcomes import ImageOutcomes
from domainbench.metrics.registry import Metric, MetricRegistryError, interval_metrics, metric
from domainbench.metrics.run_report import STABILITY_METRICS
from domainbench.stats import bootstrap_weights, interval_text, mean_draws, percentile_interval, proportion_interval
from domainbench.stats.bootstrap import DEFAULT_RESAMPLES
from domainbench.stats.smoothed import (
    FEW_IMAGES_NOTE,
    FEW_IMAGES_PER_CLASS,
    Linear,
    balanced_accuracy_linear,
    multipliers,
    rate_linear,
    shared_multipliers,
)

if TYPE_CHECKING:
    from domainbench.records.report import RunReport
    from domainbench.store.records import StabilityRecord

Interval = tuple[float, float] | None
#: an rCE interval wider than this carries a caution: the baseline's drop from clean is too small to divide by
RCE_WIDE = 1.0


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _Open(BaseModel):
    """Intervals of the built-in cell metrics as fields; a plug-in cell metric's interval rides along under its name."""

    model_config = ConfigDict(extra="allow", frozen=True)


class CellIntervals(_Open):
    model: str
    corruption: str
    severity: int
    top1_accuracy: Interval = None
    balanced_accuracy: Interval = None
    label_flip_probability: Interval = None
    #: the cell's median class has fewer than ``FEW_IMAGES_PER_CLASS`` images: its balanced-accuracy interval is approximate
    approximate: bool = False


class ModelIntervals(_Frozen):
    model: str
    clean_accuracy: Interval = None
    mean_corrupted_accuracy: Interval = None
    mce: Interval = None
    rce: Interval = None
    mfr: Interval = None
    #: the mean balanced accuracy over the PD-safe cells (the report's ``safe_accuracy``)
    safe_accuracy: Interval = None
    #: the model's cells have a median class of fewer than ``FEW_IMAGES_PER_CLASS`` images: the intervals above are approximate
    approximate: bool = False


class StabilityIntervals(_Frozen):
    model: str
    corruption: str
    divergence_radius: Interval = None
    cosine: Interval = None
    euclidean: Interval = None


class FmrIntervals(_Frozen):
    model: str
    sa: Interval = None
    pa: Interval = None


class RunIntervals(_Frozen):
    """The intervals of one report at one confidence level (``None``: the number does not apply)."""

    confidence: float
    resamples: int
    seed: int
    cells: list[CellIntervals]
    models: list[ModelIntervals]
    stability: list[StabilityIntervals] = []
    fmr: list[FmrIntervals] = []
    #: the median number of images per class over the run's labelled cells (None: unlabelled)
    median_images_per_class: float | None = None
    #: cautions to print beside the intervals (few images per class, an unresolved rCE)
    notes: list[str] = []
    #: True for an adaptive run: its cells' intervals are anytime-valid confidence sequences, its model-level ones
    #: built from them, and a number no sequence bounds (mCE, rCE, mFR) has none (``engine.adaptive``)
    anytime_valid: bool = False

    def cell(self, model: str, corruption: str, severity: int) -> CellIntervals | None:
        return next((c for c in self.cells if (c.model, c.corruption, c.severity) == (model, corruption, severity)), None)

    def model(self, name: str) -> ModelIntervals | None:
        return next((m for m in self.models if m.model == name), None)


def cell_interval_metrics() -> tuple[str, ...]:
    """The cell metrics that carry an interval (the registry's declarations), as named in exports
    (``NAME_ci_low`` / ``NAME_ci_high``), in the registry's order."""
    return tuple(m.name for m in interval_metrics("cell"))


#: the model metrics ``metric_draws`` can draw: the fields of ``ModelIntervals``
DRAWABLE_MODEL_METRICS = frozenset(ModelIntervals.model_fields) - {"model", "approximate"}


def model_interval_metrics() -> tuple[str, ...]:
    """The model metrics that carry an interval (the registry's declarations), in the registry's order; a
    declaration on a model metric the draws do not cover is refused, naming it."""
    declared = interval_metrics("model")
    for m in declared:
        if m.name not in DRAWABLE_MODEL_METRICS or m.interval != "smoothed":
            raise MetricRegistryError(
                f"metric {m.name!r} declares interval {m.interval!r}, but the model-level intervals are the smoothed "
                f"draws of {', '.join(sorted(DRAWABLE_MODEL_METRICS))}; declare interval=None")
    return tuple(m.name for m in declared)


def __getattr__(name: str) -> tuple[str, ...]:
    # the names these lists had when they were written out here: now read from the registry's declarations
    if name == "CELL_INTERVAL_METRICS":
        return cell_interval_metrics()
    if name == "MODEL_METRICS":
        return model_interval_metrics()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

#: the export column that flags a cell's balanced-accuracy interval as approximate (few images per class)
APPROXIMATE_COLUMN = "balanced_accuracy_ci_approximate"


def interval_columns(cell: CellIntervals | None) -> dict[str, float | bool | None]:
    """``{metric}_ci_low`` / ``{metric}_ci_high`` of a cell (None where it has no interval), and whether its
    balanced-accuracy interval is approximate (None without one)."""
    out: dict[str, float | bool | None] = {}
    for k in cell_interval_metrics():
        iv = None if cell is None else getattr(cell, k, None)
        out[f"{k}_ci_low"], out[f"{k}_ci_high"] = (None, None) if iv is None else iv
    out[APPROXIMATE_COLUMN] = None if cell is None or cell.balanced_accuracy is None else cell.approximate
    return out


# --------------------------------------------------------------------------- per-resample values


def cells_linear(outcomes: ImageOutcomes, cells: Sequence[CellKey]) -> Linear:
    """The balanced accuracies of ``cells`` as point + multipliers @ loadings (``stats.smoothed``)."""
    assert outcomes.labels is not None
    correct = np.stack([outcomes.correct(*k) for k in cells], axis=1)
    present = np.stack([outcomes.present(*k) for k in cells], axis=1)
    return balanced_accuracy_linear(correct, present, outcomes.labels)


def cell_balanced_accuracy(outcomes: ImageOutcomes, model: str, corruption: str, severity: int,
                           e: np.ndarray) -> np.ndarray:
    """Balanced accuracy of one cell under each row of multipliers ``e`` (resamples, n images)."""
    return cells_balanced_accuracy(outcomes, [(model, corruption, severity)], e)[(model, corruption, severity)]


def cells_balanced_accuracy(outcomes: ImageOutcomes, cells: Sequence[CellKey], e: np.ndarray
                            ) -> dict[CellKey, np.ndarray]:
    """:func:`cell_balanced_accuracy` of many cells at once (one matrix product, whatever their number)."""
    if not cells:
        return {}
    values = cells_linear(outcomes, cells).draws(e)
    return {k: values[:, i] for i, k in enumerate(cells)}


def cells_flip_rate(outcomes: ImageOutcomes, cells: Sequence[CellKey], e: np.ndarray) -> dict[CellKey, np.ndarray]:
    """The label flip rate of each cell under each row of multipliers ``e`` (its smoothed normal draws)."""
    if not cells:
        return {}
    present = np.stack([outcomes.present(*k) for k in cells], axis=1)
    flipped = np.stack([outcomes.flipped(*k) for k in cells], axis=1)
    values = rate_linear(flipped, present).draws(e)
    return {k: values[:, i] for i, k in enumerate(cells)}


def _ratio_terms(num: dict[str, np.ndarray], den: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Per corruption, num_c / den_c under each resample; nan where the denominator does not exceed
    DEGRADATION_EPS (the point estimate leaves such a term out)."""
    return {c: np.where(den[c] > DEGRADATION_EPS, num[c] / np.where(den[c] > DEGRADATION_EPS, den[c], 1.0), np.nan)
            for c in num}


#: the per-corruption numbers that get per-resample values: what mCE / rCE / mFR average, and the accuracy
#: (mean balanced accuracy over the corruption's severities), as ``data.per_corruption_frame`` names them
CORRUPTION_METRICS = ("accuracy", "ce", "rce", "fr")


def metric_draws(report: RunReport, outcomes: ImageOutcomes, weights: np.ndarray
                 ) -> tuple[dict[str, dict[str, np.ndarray]], dict[str, dict[str, dict[str, np.ndarray]]]]:
    """Under each row of multipliers ``weights`` (resamples, n images; ``stats.smoothed.multipliers``): per model, each
    model metric declaring an interval (``model_interval_metrics``); per model and corruption, each of
    CORRUPTION_METRICS (nan: not applicable). Real-shift cells (their own images) have no per-corruption values.

    The safe-cell accuracy averages, resample by resample, the balanced accuracies of the model's PD-safe cells
    (as ``run_report.build_report`` averages their point values): the cells share the images, so it is resampled
    jointly over them. The safety flags are the report's (the PD threat's own uncertainty is not resampled)."""
    summary = report.classification
    safety = {(t.corruption, t.severity): t.safe for t in report.threat}
    common = [tuple(c) for c in summary.common_cells]
    by_corruption: dict[str, list[int]] = {}
    for corr, sev in common:
        by_corruption.setdefault(corr, []).append(sev)
    declared = model_interval_metrics()
    b = weights.shape[0]
    nan = np.full(b, np.nan)
    labelled = outcomes.labels is not None
    acc: dict[str, dict[tuple[str, int], np.ndarray]] = {}
    lfp: dict[str, dict[tuple[str, int], np.ndarray]] = {}
    clean: dict[str, np.ndarray] = {}
    flips = cells_flip_rate(outcomes, [(m.model, *k) for m in report.models for k in common], weights)
    wanted: list[CellKey] = []
    for m in report.models:
        lfp[m.model] = {k: flips[(m.model, *k)] for k in common}
        if labelled:
            # every cell with an accuracy (the per-corruption means take the model's own cells, common or not)
            cells = {*common, *((c.corruption, c.severity) for c in m.cells if c.accuracy is not None
                                and not c.corruption.startswith(SHIFT_PREFIX))}
            wanted += [(m.model, *k) for k in sorted(cells)] + ([(m.model, CLEAN, 0)] if m.clean is not None else [])
    accuracies = cells_balanced_accuracy(outcomes, wanted, weights) if labelled else {}
    for (model, corr, sev), v in accuracies.items():
        if corr == CLEAN:
            clean[model] = v
        else:
            acc.setdefault(model, {})[(corr, sev)] = v
    base = report.baseline

    def summed(values: dict[tuple[str, int], np.ndarray], corr: str, shift: np.ndarray | float = 0.0) -> np.ndarray:
        return np.sum([values[(corr, s)] - shift for s in by_corruption[corr]], axis=0)

    models: dict[str, dict[str, np.ndarray]] = {}
    corruptions: dict[str, dict[str, dict[str, np.ndarray]]] = {}
    for m in report.models:
        name = m.model
        d = {k: nan for k in DRAWABLE_MODEL_METRICS}
        terms: dict[str, dict[str, np.ndarray]] = {k: {} for k in CORRUPTION_METRICS}
        if by_corruption:
            terms["fr"] = _ratio_terms({c: summed(lfp[name], c) for c in by_corruption},
                                       {c: summed(lfp[base], c) for c in by_corruption})
        if labelled:
            own = acc.get(name, {})  # empty for a run with no corruption cell (an FMR run: clean images only)
            terms["accuracy"] = {c: mean_draws([v for (corr, _), v in own.items() if corr == c])
                                 for c in {corr for corr, _ in own}}
            if name in clean:
                d["clean_accuracy"] = clean[name]
            safe = [v for k, v in own.items() if safety.get(k)]
            if safe:
                d["safe_accuracy"] = np.mean(safe, axis=0)
            if common:
                d["mean_corrupted_accuracy"] = np.mean([acc[name][k] for k in common], axis=0)
                err = {c: summed({k: 1 - v for k, v in acc[name].items()}, c) for c in by_corruption}
                base_err = {c: summed({k: 1 - v for k, v in acc[base].items()}, c) for c in by_corruption}
                terms["ce"] = _ratio_terms(err, base_err)
                if name in clean and base in clean:
                    terms["rce"] = _ratio_terms(
                        {c: summed({k: 1 - v for k, v in acc[name].items()}, c, 1 - clean[name]) for c in by_corruption},
                        {c: summed({k: 1 - v for k, v in acc[base].items()}, c, 1 - clean[base]) for c in by_corruption},
                    )
        for ratio, mean in (("ce", "mce"), ("rce", "rce"), ("fr", "mfr")):
            if terms[ratio]:
                d[mean] = mean_draws(list(terms[ratio].values()))
        models[name] = {k: d[k] for k in declared}
        corruptions[name] = {c: {k: terms[k].get(c, nan) for k in CORRUPTION_METRICS}
                             for c in sorted({c for t in terms.values() for c in t})}
    return models, corruptions


def model_metric_draws(report: RunReport, outcomes: ImageOutcomes, weights: np.ndarray) -> dict[str, dict[str, np.ndarray]]:
    """Per model, each model metric declaring an interval under each row of multipliers ``weights`` (nan: not
    applicable)."""
    return metric_draws(report, outcomes, weights)[0]


# --------------------------------------------------------------------------- the intervals


def _wilson_of_counts(declared: Metric, cell: object, threat: object, confidence: float) -> Interval:
    counts = declared.counts(cell, threat) if declared.counts is not None else None
    return None if counts is None else proportion_interval(*counts, confidence)


def _wilson_of_rate(rate: float | None, n: int, confidence: float) -> Interval:
    if rate is None or n <= 0:
        return None
    return proportion_interval(int(round(rate * n)), n, confidence)


def run_intervals(report: RunReport, outcomes: ImageOutcomes, stability: Sequence[StabilityRecord] = (),
                  confidence: float = 0.95, resamples: int = DEFAULT_RESAMPLES, seed: int = 0,
                  sequential: Mapping[tuple[str, str, int], dict[str, Interval]] | None = None,
                  shifts: Mapping[str, ImageOutcomes] | None = None, unpaired: frozenset[str] = frozenset()) -> RunIntervals:
    """Every interval of ``report`` at level ``confidence`` (the draws seeded by ``seed``).

    ``shifts``: each real-shift cell's own outcomes; ``unpaired``: shift cells without paired clean
    images (no flip rate, so no interval for it: their cells' ``lfp`` is None, which the flip counts read).

    ``sequential``: per cell, anytime-valid intervals that replace the Wilson ones (an adaptive
    run stopped its cells by looking at the data, and only those keep their coverage then).
    """
    e = shared_multipliers(outcomes.n, resamples, seed)  # Compare's draws use the same rows
    # a real-shift cell's images are its own: drawn on their own (``shift_outcomes``)
    own = {cell: (o, multipliers(o.n, resamples, seed)) for cell, o in (shifts or {}).items()}
    keys = [(m.model, c.corruption, c.severity) for m, c in report.all_cells()
            if c.corruption not in own and c.confusion is not None] if outcomes.labels is not None else []
    # the balanced accuracy of every cell on the run's images, at once
    linear = cells_linear(outcomes, keys) if keys else None
    drawn_all = linear.draws(e) if linear is not None else None
    column = {k: i for i, k in enumerate(keys)}
    sizes: list[float] = []
    cells = []
    declared = interval_metrics("cell")
    wilson = [d for d in declared if d.interval == "wilson"]
    smoothed = [d.name for d in declared if d.interval == "smoothed"]  # balanced accuracy's (``Metric.check``)
    for m, c in report.all_cells():
        ba = None
        approximate = False
        o, w = own.get(c.corruption, (outcomes, e))
        t = report.threat_of(c.corruption, c.severity)
        # an adaptive run's anytime-valid sequences replace the Wilson intervals (their cells stopped on the data)
        override = (sequential or {}).get((m.model, c.corruption, c.severity), {})
        values = {d.name: override.get(d.name, _wilson_of_counts(d, c, t, confidence)) for d in wilson}
        if smoothed and o.labels is not None and c.confusion is not None:
            key = (m.model, c.corruption, c.severity)
            if key in column:
                assert linear is not None and drawn_all is not None
                drawn, median = drawn_all[:, column[key]], float(linear.median_per_class[column[key]])
            else:  # a real-shift cell, on its own images
                one = cells_linear(o, [key])
                drawn, median = one.draws(w)[:, 0], float(one.median_per_class[0])
            ba = percentile_interval(drawn, confidence)
            if median == median:
                sizes.append(median)
                approximate = median < FEW_IMAGES_PER_CLASS
        values |= dict.fromkeys(smoothed, ba)
        cells.append(CellIntervals(model=m.model, corruption=c.corruption, severity=c.severity, approximate=approximate,
                                   **values))
    draws = model_metric_draws(report, outcomes, e)
    few = {c.model for c in cells if c.approximate and not c.corruption.startswith(SHIFT_PREFIX)}
    models = [ModelIntervals(model=name, approximate=name in few,
                             **{k: percentile_interval(v, confidence) for k, v in d.items()})
              for name, d in draws.items()]
    median = float(np.median(sizes)) if sizes else None
    notes = []
    if any(c.approximate for c in cells):
        notes.append(f"{FEW_IMAGES_NOTE} (median {median:g} images per class; fewer than {FEW_IMAGES_PER_CLASS} "
                     "makes any interval on balanced accuracy rest on the smoothing)")
    rce_of = {m.model: m.rce for m in report.models}
    for mi in models:
        if mi.rce is not None and mi.rce[1] - mi.rce[0] > RCE_WIDE:
            written = interval_text(rce_of.get(mi.model), mi.rce, digits=2, missing="n/a")
            notes.append(f"rCE of {mi.model}: {written}, an interval wider than {RCE_WIDE:g}: "
                         "the baseline loses too little from clean to divide by on these images, so rCE is not resolved")
    return RunIntervals(confidence=confidence, resamples=resamples, seed=seed, cells=cells, models=models,
                        stability=stability_intervals(stability, outcomes, confidence, resamples, seed),
                        fmr=[FmrIntervals(model=f.model, **{d.name: _wilson_of_rate(d.read(f), f.n, confidence)
                                                            for d in interval_metrics("fmr") if d.interval == "wilson"})
                             for f in (report.fmr.models if report.fmr else [])],
                        median_images_per_class=median, notes=notes)


def stability_intervals(records: Sequence[StabilityRecord], outcomes: ImageOutcomes | None, confidence: float,
                        resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> list[StabilityIntervals]:
    """Bootstrap intervals of the stability means, over the stability subset's images (by class when labelled)."""
    groups: dict[tuple[str, str], dict[str, list[float]]] = {}
    index: dict[tuple[str, str], list[int]] = {}
    for r in records:
        g = groups.setdefault((r.model, r.corruption), {k: [] for k in STABILITY_METRICS})
        for k in STABILITY_METRICS:
            g[k] += getattr(r, k)
        index.setdefault((r.model, r.corruption), []).extend(r.indices)
    out = []
    for (model, corruption), g in sorted(groups.items()):
        n = len(index[(model, corruption)])
        strata = None
        if outcomes is not None and outcomes.labels is not None and n:
            pos = np.searchsorted(outcomes.indices, index[(model, corruption)])
            if np.all(pos < outcomes.n) and np.array_equal(outcomes.indices[np.minimum(pos, outcomes.n - 1)],
                                                           index[(model, corruption)]):
                strata = outcomes.labels[pos]
        w = bootstrap_weights(n, strata, resamples, seed) if n else None
        values = {}
        for k in (k for k in STABILITY_METRICS if metric(k).interval == "bootstrap"):
            v = np.asarray(g[k], dtype=float)
            values[k] = None if w is None or v.size == 0 else percentile_interval(w @ v / n, confidence)
        out.append(StabilityIntervals(model=model, corruption=corruption, **values))
    return out

"""The real-shift result of a run: how each model does on the user's own images (``shift:NAME`` cells).

Per real-shift cell, per model: the balanced accuracy on the real images with its interval (the same
smoothed multiplier bootstrap every cell accuracy gets, drawn over the shift's own images, seeded by the
run: ``metrics.confidence.run_intervals``' real-shift branch), the flip rate against the paired clean image
with its Wilson interval where the files pair, SSIM against it, and the synthetic cell that behaves most
like the real images. Between models, the verdicts' paired test on the same real images
(``metrics.comparison``: the sign-flip test of the balanced-accuracy difference, Holm-adjusted over the
model pairs); an unlabelled shift is compared by flips instead (``compare_flips``).

"Behaves most like" has one definition (``metrics.shift_match``'s per-model match): for each model, the
plan's single-corruption cell whose value is closest to the model's value on the real images, the value
being the accuracy drop from clean (so: the cell whose balanced accuracy is closest to the model's on the
real images) for a labelled shift, and the flip rate for an unlabelled one. The sentence and the run page's
table both read it from here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from domainbench.metrics.aggregate import CLEAN
from domainbench.metrics.classification import MetricInputError
from domainbench.metrics.comparison import compare_flips, compare_models
from domainbench.metrics.confidence import cells_linear
from domainbench.metrics.outcomes import MISSING, ImageOutcomes, shift_outcomes
from domainbench.metrics.shift_match import ShiftMatch, shift_matches
from domainbench.query.confidence import OutcomesReader, read_outcomes
from domainbench.records.config import SHIFT_PREFIX
from domainbench.records.report import RunReport
from domainbench.stats import interval_text, percentile_interval, proportion_interval
from domainbench.stats.bootstrap import DEFAULT_RESAMPLES
from domainbench.stats.intervals import DEFAULT_CONFIDENCE, check_confidence
from domainbench.stats.smoothed import multipliers
from domainbench.store import Store

Interval = tuple[float, float] | None


@dataclass(frozen=True)
class ModelOnShift:
    """One model on one real shift."""

    model: str
    #: real images the model was evaluated on
    n: int
    #: balanced accuracy on the real images and its interval (None: unlabelled)
    accuracy: float | None
    accuracy_ci: Interval
    #: clean balanced accuracy minus the real images', in points (None: unlabelled)
    drop: float | None
    #: share of real images whose prediction differs from the paired clean image's, and its Wilson interval
    #: (None: the files do not pair with the dataset's)
    flip_rate: float | None
    flip_ci: Interval
    #: mean SSIM of the real images against their paired clean images (None: not paired)
    ssim: float | None
    #: the synthetic cell that behaves most like the real images for this model, and the measure there and on
    #: the real images (points of accuracy drop, or % flips)
    closest: tuple[str, int] | None
    closest_value: float | None
    real_value: float | None


@dataclass(frozen=True)
class ShiftTest:
    """Two models on the same real images: the verdicts' paired test."""

    model_a: str
    model_b: str
    #: "balanced accuracy" (labelled) or "flip rate" (unlabelled)
    measure: str
    value_a: float
    value_b: float
    #: A - B, and its interval (the test inverted)
    difference: float
    ci_low: float
    ci_high: float
    p_value: float
    #: Holm-adjusted over the model pairs (equal to p_value with two models)
    p_holm: float
    pairs_compared: int
    n_images: int
    #: the better model (higher accuracy; fewer flips), None for a tie at this sample size
    better: str | None


@dataclass(frozen=True)
class RealShiftResult:
    """One real-shift cell's result: per model, the tests between them, and the sentence that says it."""

    shift: str
    n_images: int
    labelled: bool
    paired: bool
    confidence: float
    models: list[ModelOnShift]
    tests: list[ShiftTest]
    #: why there is no test (one model, no per-image predictions stored); empty when there are tests
    why_no_test: str
    #: the ranking part (Spearman's ρ; 3 or more models): ``metrics.shift_match``
    match: ShiftMatch
    sentence: str

    @property
    def name(self) -> str:
        return self.shift[len(SHIFT_PREFIX):]

    @property
    def measure(self) -> str:
        return "balanced accuracy" if self.labelled else "flip rate"

    def as_json(self) -> dict[str, object]:
        out = asdict(self)
        out.pop("match")
        out["name"] = self.name
        out["measure"] = self.measure
        for m in out["models"]:  # type: ignore[union-attr]
            closest = m.pop("closest")
            m["closest"] = None if closest is None else {"corruption": closest[0], "severity": closest[1]}
        return out


def shift_cells(report: RunReport) -> list[str]:
    """The report's real-shift cells, sorted by name."""
    return sorted({c.corruption for _, c in report.all_cells() if c.corruption.startswith(SHIFT_PREFIX)})


def real_shift_results(store: Store, report: RunReport, confidence: float = DEFAULT_CONFIDENCE,
                       read: OutcomesReader = read_outcomes, resamples: int = DEFAULT_RESAMPLES) -> list[RealShiftResult]:
    """Per real-shift cell of ``report`` (none: an empty list), its :class:`RealShiftResult`."""
    cells = shift_cells(report)
    if not cells:
        return []
    confidence = check_confidence(confidence)
    found = read(store, report.run_id)
    own = shift_outcomes(found.shift_units)
    matches = {m.shift: m for m in shift_matches(report.classification)}
    return [_result(report, cell, own.get(cell), found.images, matches[cell], confidence, resamples) for cell in cells]


def _result(report: RunReport, cell: str, outcomes: ImageOutcomes | None, clean: ImageOutcomes | None,
            match: ShiftMatch, confidence: float, resamples: int) -> RealShiftResult:
    per_model = {p.model: p for p in match.per_model}
    rows = []
    # the run's own seed draws the shift's multipliers, as its cell intervals do (``run_intervals``)
    e = None if outcomes is None else multipliers(outcomes.n, resamples, report.seed)
    for m in report.models:
        c = next((x for x in m.cells if x.corruption == cell), None)
        if c is None:
            continue
        accuracy_ci = None
        if c.accuracy is not None and outcomes is not None and outcomes.labels is not None and e is not None:
            drawn = cells_linear(outcomes, [(m.model, cell, c.severity)]).draws(e)[:, 0]
            accuracy_ci = percentile_interval(drawn, confidence)
        p = per_model.get(m.model)
        rows.append(ModelOnShift(
            model=m.model, n=c.n, accuracy=c.accuracy, accuracy_ci=accuracy_ci,
            drop=None if c.accuracy is None or m.clean_accuracy is None else 100 * (m.clean_accuracy - c.accuracy),
            flip_rate=c.lfp, flip_ci=None if c.lfp is None else proportion_interval(c.flips, c.n, confidence),
            ssim=None if c.damage is None else c.damage.ssim,
            closest=None if p is None else p.cell, closest_value=None if p is None else p.synthetic,
            real_value=None if p is None else p.real))
    labelled = bool(rows) and all(r.accuracy is not None for r in rows)
    paired = bool(rows) and all(r.flip_rate is not None for r in rows)
    tests, why = _tests(cell, [r.model for r in rows], outcomes, clean, labelled, paired, confidence)
    n_images = 0 if outcomes is None else outcomes.n
    result = RealShiftResult(shift=cell, n_images=n_images, labelled=labelled, paired=paired, confidence=confidence,
                             models=rows, tests=tests, why_no_test=why, match=match, sentence="")
    return RealShiftResult(**{**result.__dict__, "sentence": sentence(result)})


def _tests(cell: str, models: Sequence[str], outcomes: ImageOutcomes | None, clean: ImageOutcomes | None,
           labelled: bool, paired: bool, confidence: float) -> tuple[list[ShiftTest], str]:
    if len(models) < 2:
        return [], "one model: nothing to compare it with"
    if outcomes is None:
        return [], "no per-image predictions stored for the real images"
    try:
        if labelled:
            c = compare_models(outcomes, list(models), confidence)
            return [ShiftTest(v.model_a, v.model_b, "balanced accuracy", v.accuracy_a, v.accuracy_b, v.difference,
                              v.ci_low, v.ci_high, v.p_value, v.p_holm, v.pairs_compared, v.n_images,
                              None if v.winner is None else v.model_a if v.winner == "a" else v.model_b)
                    for v in c.verdicts], ""
        if not paired or clean is None:
            return [], "the real images are neither labelled nor paired with clean ones: nothing to compare on"
        return [ShiftTest(v.model_a, v.model_b, "flip rate", v.flips_a, v.flips_b, v.difference, v.ci_low,
                          v.ci_high, v.p_value, v.p_holm, v.pairs_compared, v.n_images,
                          None if v.steadier is None else v.model_a if v.steadier == "a" else v.model_b)
                for v in compare_flips(with_clean(outcomes, clean, models), list(models), confidence)], ""
    except MetricInputError as e:
        return [], str(e)


def with_clean(outcomes: ImageOutcomes, clean: ImageOutcomes, models: Sequence[str]) -> ImageOutcomes:
    """A paired shift's outcomes with each model's clean prediction of the paired clean image beside them (a paired
    shift's images are indexed by their clean partners' dataset indices): what its flips are counted against."""
    pos = np.searchsorted(clean.indices, outcomes.indices)
    found = (pos < clean.n) & (clean.indices[np.minimum(pos, clean.n - 1)] == outcomes.indices)
    preds = dict(outcomes.preds)
    for m in models:
        row = clean.cell(m, CLEAN, 0)[np.minimum(pos, clean.n - 1)]
        preds[(m, CLEAN, 0)] = np.where(found, row, MISSING)
    return ImageOutcomes(indices=outcomes.indices, labels=outcomes.labels, preds=preds)


# --------------------------------------------------------------------------- the sentence


def _p(p: float) -> str:
    return "p < 0.001" if p < 0.001 else f"p = {p:.2g}" if p < 0.995 else "p = 1"


def cell_text(cell: tuple[str, int] | None) -> str:
    """A synthetic cell as the sentence and the table write it: ``perspective s3``."""
    return "—" if cell is None else f"{cell[0]} s{cell[1]}"


def closest_text(models: Sequence[ModelOnShift]) -> str:
    """Which synthetic cell behaves most like the real images: one cell when every model's is the same, else per model."""
    known = [m for m in models if m.closest is not None]
    if not known:
        return ""
    cells = {m.closest for m in known}
    if len(cells) == 1 and len(known) == len(models):
        return f"`{cell_text(known[0].closest)}`" + (" for every model" if len(models) > 1 else "")
    return ", ".join(f"`{cell_text(m.closest)}` for {m.model}" for m in known)


def _test_text(t: ShiftTest, level: str, many: bool) -> str:
    points = 100 * t.difference
    numbers = (f"{points:+.1f} points, {level} CI {100 * t.ci_low:.1f} to {100 * t.ci_high:.1f}, {_p(t.p_holm)}"
               if not many else _p(t.p_holm))
    if t.better is None:
        word = "tie on them" if t.measure == "balanced accuracy" else "are equally steady on them"
        return f"{t.model_a} and {t.model_b} {word} ({numbers})"
    other = t.model_b if t.better == t.model_a else t.model_a
    if t.measure == "balanced accuracy":
        return f"{t.better} better than {other} ({numbers})"
    return f"{t.better} steadier than {other} ({numbers})"


def sentence(r: RealShiftResult) -> str:
    """The plain result, e.g. "On your 40 real `night` images (labelled), balanced accuracy: A 78.1 % (70.0–85.2), B
    65.2 % (56.1–73.4); A better than B (+12.9 points, 95 % CI 3.0 to 22.8, p = 0.01); the synthetic cell that behaves
    most like them (closest accuracy): `perspective s3` for every model"."""
    level = f"{100 * r.confidence:g} %"
    if not r.models:
        return f"Your `{r.name}` images: no model was evaluated on them yet."
    if r.labelled:
        head = f"On your {r.n_images:,} real `{r.name}` images, balanced accuracy ({level} CI): "
        values = ", ".join(f"{m.model} {interval_text(m.accuracy, m.accuracy_ci, True)}" for m in r.models)
        measure = "closest accuracy"
    elif r.paired:
        head = (f"Your {r.n_images:,} real `{r.name}` images are unlabelled, so there is no accuracy on them: flips only "
                f"(share of images whose prediction differs from the paired clean image's, {level} CI): ")
        values = ", ".join(f"{m.model} {interval_text(m.flip_rate, m.flip_ci, True)}" for m in r.models)
        measure = "closest flip rate"
    else:
        return f"Your {r.n_images:,} real `{r.name}` images are neither labelled nor paired: no number applies to them."
    parts = [head + values]
    if r.tests:
        many = len(r.tests) > 1
        tests = "; ".join(_test_text(t, level, many) for t in r.tests)
        how = "paired sign-flip test over images" + (f", Holm-adjusted over {len(r.tests)} model pairs" if many else "")
        parts.append(f"{tests} ({how})" if many else f"{tests}")
    elif len(r.models) > 1 and r.why_no_test:
        parts.append(f"no paired test: {r.why_no_test}")
    closest = closest_text(r.models)
    if closest:
        parts.append(f"the synthetic cell that behaves most like them ({measure}): {closest}")
    text = "; ".join(parts) + "."
    ranking = ranking_text(r.match)
    return f"{text} {ranking}" if ranking else text


def ranking_text(match: ShiftMatch) -> str:
    """The ranking part of ``metrics.shift_match``'s sentence (3 or more models), or empty."""
    return match.sentence

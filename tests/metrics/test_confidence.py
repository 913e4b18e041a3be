from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import norm
from sklearn.metrics import balanced_accuracy_score

from domainbench.metrics.confidence import MODEL_METRICS, model_metric_draws, run_intervals
from domainbench.metrics.outcomes import image_outcomes
from tests.metrics.confidence_fixtures import SAFE, synthetic_report, synthetic_units, textbook_loadings
from tests.oracles.score_interval import wilson_cc_by_root


def point(report, m, k: str) -> float | None:  # noqa: ANN001 - a RunReport and its ModelSummary
    """The report's value of model metric ``k`` (the safe-cell accuracy is the report's, the others the model's)."""
    return report.safe_accuracy.get(m.model) if k == "safe_accuracy" else getattr(m, k)


def test_outcomes_rebuild_every_stored_confusion_matrix() -> None:
    units = synthetic_units()
    out = image_outcomes(reversed(units))  # order of units does not matter
    report = synthetic_report(units)
    assert out.n == 90 and np.all(np.diff(out.indices) > 0)
    for m, c in report.all_cells():
        p = out.cell(m.model, c.corruption, c.severity)
        cm = np.zeros((3, 3), dtype=int)
        np.add.at(cm, (out.labels, p), 1)
        assert cm.tolist() == c.confusion
        if c.corruption != "clean":
            assert out.flipped(m.model, c.corruption, c.severity).sum() == c.flips


def test_zero_multipliers_reproduce_the_report_exactly() -> None:
    """With every multiplier 0, the vectorised metrics are the report's own numbers."""
    units = synthetic_units(skill={"m1": 0.85, "m2": 0.7, "m3": 0.6})
    report = synthetic_report(units)
    draws = model_metric_draws(report, image_outcomes(units), np.zeros((2, 90)))
    for m in report.models:
        for k in MODEL_METRICS:
            assert draws[m.model][k] == pytest.approx([point(report, m, k)] * 2, abs=1e-12), (m.model, k)


def test_intervals_continuity_corrected_wilson_and_smoothed() -> None:
    units = synthetic_units()
    report = synthetic_report(units)
    out = image_outcomes(units)
    iv = run_intervals(report, out, confidence=0.9, resamples=1000, seed=3)
    for m, c in report.all_cells():
        ci = iv.cell(m.model, c.corruption, c.severity)
        assert ci is not None
        hits = int(np.trace(np.asarray(c.confusion)))
        assert ci.top1_accuracy == pytest.approx(wilson_cc_by_root(hits, c.n, 0.9), abs=1e-9)
        if c.corruption == "clean":
            assert ci.label_flip_probability is None
        else:
            assert ci.label_flip_probability == pytest.approx(wilson_cc_by_root(c.flips, c.n, 0.9), abs=1e-9)
        lo, hi = ci.balanced_accuracy
        assert lo <= c.accuracy <= hi and hi - lo > 0.05
    # each cell's interval is the closed-form smoothed one, written out here from the counts (MC error of 1,000 draws)
    for m, c in report.all_cells():
        correct = out.correct(m.model, c.corruption, c.severity)
        k = np.bincount(out.labels, weights=correct, minlength=3)
        n = np.bincount(out.labels, minlength=3).astype(float)
        smoothed = (k + 2) / (n + 4)
        half = norm.ppf(0.95) * np.sqrt(np.sum(smoothed * (1 - smoothed) / n)) / 3 + 0.5 * np.mean(1 / n) / 3 * norm.ppf(0.95) / norm.ppf(0.975)
        assert iv.cell(m.model, c.corruption, c.severity).balanced_accuracy == pytest.approx(
            (max(0, c.accuracy - half), min(1, c.accuracy + half)), abs=0.012)
        assert not iv.cell(m.model, c.corruption, c.severity).approximate  # about 30 images per class
    assert iv.median_images_per_class == np.median(np.bincount(out.labels))
    # a caution for each rCE interval wider than 1, and none for the few-images case
    wide = [m.model for m in iv.models if m.rce is not None and m.rce[1] - m.rce[0] > 1.0]
    assert [n.split(":")[0] for n in iv.notes] == [f"rCE of {m}" for m in wide]
    # each written by interval_text: the point, then the ends, joined by " to " where one is negative
    for name, note in zip(wide, iv.notes, strict=True):
        low, high = iv.model(name).rce
        rce_point = next(m.rce for m in report.models if m.model == name)
        sep = " to " if f"{low:.2f}".startswith("-") else "–"
        assert note.startswith(f"rCE of {name}: {rce_point:.2f} ({low:.2f}{sep}{high:.2f}), an interval wider than 1: ")
    # model-level: every interval holds its point value; the baseline's own mCE is exactly 1
    for m in report.models:
        mi = iv.model(m.model)
        for k in MODEL_METRICS:
            lo, hi = getattr(mi, k)
            assert lo - 1e-12 <= point(report, m, k) <= hi + 1e-12, (m.model, k)
    assert iv.model("m2").mce == pytest.approx((1.0, 1.0))
    # reproducible under the seed, different under another, narrower at a lower level
    assert run_intervals(report, out, confidence=0.9, resamples=1000, seed=3) == iv
    other = run_intervals(report, out, confidence=0.9, resamples=1000, seed=4)
    assert other.model("m1").mce != iv.model("m1").mce
    wide = run_intervals(report, out, confidence=0.99, resamples=1000, seed=3)
    a, b = iv.model("m1").mce, wide.model("m1").mce
    assert b[0] < a[0] and a[1] < b[1]


def test_safe_cell_accuracy_interval_is_the_normal_interval_of_the_mean_over_safe_cells() -> None:
    from domainbench.stats.smoothed import multipliers

    units = synthetic_units(skill={"m1": 0.85, "m2": 0.7})
    report = synthetic_report(units)
    out = image_outcomes(units)
    iv = run_intervals(report, out, confidence=0.95, resamples=1000, seed=5)
    assert report.safe_accuracy["m1"] is not None
    e = multipliers(out.n, 1000, 5)
    many = run_intervals(report, out, confidence=0.95, resamples=20000, seed=5)
    for model in ("m1", "m2"):
        # the same multipliers through the slow loadings: the same draws, so the same interval
        g = np.mean([textbook_loadings(out, model, *cell) for cell in sorted(SAFE)], axis=0)
        slow = np.mean([np.clip(acc + e @ textbook_loadings(out, model, *cell), 0, 1) for cell, acc in
                        ((cell, report.cell(model, *cell).accuracy) for cell in sorted(SAFE))], axis=0)
        assert iv.model(model).safe_accuracy == pytest.approx(tuple(np.quantile(slow, [0.025, 0.975])), abs=1e-12)
        # and the closed form: the mean of normal draws is normal, with the norm of the mean loadings as its sd
        # (20,000 draws keep the percentile's Monte Carlo error near 0.01 sd)
        half = norm.ppf(0.975) * np.sqrt(np.sum(g * g))
        point_value = report.safe_accuracy[model]
        assert many.model(model).safe_accuracy == pytest.approx((point_value - half, point_value + half), abs=0.002)
    # no safe cell: no interval (the report has no value either)
    none_safe = report.model_copy(update={"threat": [t.model_copy(update={"safe": False}) for t in report.threat],
                                          "safe_accuracy": {"m1": None, "m2": None}})
    assert run_intervals(none_safe, out, resamples=1000).model("m1").safe_accuracy is None


def test_every_metric_the_registry_gives_an_interval_gets_one() -> None:
    """The registry's ``interval`` declarations and the interval records name the same metrics."""
    from domainbench.metrics.confidence import (
        CELL_INTERVAL_METRICS,
        CellIntervals,
        FmrIntervals,
        ModelIntervals,
        StabilityIntervals,
    )
    from domainbench.metrics.registry import metrics_of

    def declared(level: str, kind: str | None = None) -> set[str]:
        return {m.name for m in metrics_of(level) if m.interval and (kind is None or m.interval == kind)}  # type: ignore[arg-type]

    def fields(model: type) -> set[str]:
        return set(model.model_fields) - {"model", "corruption", "severity", "approximate"}

    assert declared("cell") == set(CELL_INTERVAL_METRICS) == fields(CellIntervals)
    assert declared("cell", "wilson") == {"top1_accuracy", "label_flip_probability"}
    assert declared("cell", "smoothed") == {"balanced_accuracy"}
    assert declared("model") == set(MODEL_METRICS) == fields(ModelIntervals)
    assert declared("image") == fields(StabilityIntervals)
    assert declared("fmr") == fields(FmrIntervals)

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binomtest
from sklearn.metrics import balanced_accuracy_score

from domainbench.metrics.confidence import MODEL_METRICS, model_metric_draws, run_intervals
from domainbench.metrics.outcomes import image_outcomes
from tests.metrics.confidence_fixtures import SAFE, synthetic_report, synthetic_units


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


def test_unit_weights_reproduce_the_report_exactly() -> None:
    """With every image drawn once, the vectorised metrics are the report's own numbers."""
    units = synthetic_units(skill={"m1": 0.85, "m2": 0.7, "m3": 0.6})
    report = synthetic_report(units)
    draws = model_metric_draws(report, image_outcomes(units), np.ones((2, 90)))
    for m in report.models:
        for k in MODEL_METRICS:
            assert draws[m.model][k] == pytest.approx([point(report, m, k)] * 2, abs=1e-12), (m.model, k)


def test_intervals_wilson_and_bootstrap() -> None:
    units = synthetic_units()
    report = synthetic_report(units)
    out = image_outcomes(units)
    iv = run_intervals(report, out, confidence=0.9, resamples=1000, seed=3)
    for m, c in report.all_cells():
        ci = iv.cell(m.model, c.corruption, c.severity)
        assert ci is not None
        hits = int(np.trace(np.asarray(c.confusion)))
        ref = binomtest(hits, c.n).proportion_ci(0.9, method="wilson")
        assert ci.top1_accuracy == pytest.approx((ref.low, ref.high), abs=1e-9)
        if c.corruption == "clean":
            assert ci.label_flip_probability is None
        else:
            ref = binomtest(c.flips, c.n).proportion_ci(0.9, method="wilson")
            assert ci.label_flip_probability == pytest.approx((ref.low, ref.high), abs=1e-9)
        lo, hi = ci.balanced_accuracy
        assert lo <= c.accuracy <= hi and hi - lo > 0.05
    # check one cell's bootstrap against a brute-force loop over resampled image lists (same law, other draws)
    correct = out.correct("m1", "blur", 3)
    rng = np.random.default_rng(0)
    members = [np.flatnonzero(out.labels == k) for k in range(3)]
    slow = []
    for _ in range(2000):
        idx = np.concatenate([rng.choice(mm, size=mm.size) for mm in members])
        slow.append(balanced_accuracy_score(out.labels[idx], np.where(correct[idx], out.labels[idx], (out.labels[idx] + 1) % 3)))
    ref_lo, ref_hi = np.quantile(slow, [0.05, 0.95])
    lo, hi = iv.cell("m1", "blur", 3).balanced_accuracy
    assert lo == pytest.approx(ref_lo, abs=0.03) and hi == pytest.approx(ref_hi, abs=0.03)
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


def _textbook_safe_accuracy(out, model: str, resampled: list[np.ndarray]) -> list[float]:  # noqa: ANN001
    """Per resampled image list: recompute each PD-safe cell's balanced accuracy (scikit-learn) on those images,
    then their mean: the safe-cell accuracy of that resample, the slow way."""
    values = []
    for idx in resampled:
        y = out.labels[idx]
        accs = [balanced_accuracy_score(y, np.where(out.correct(model, *cell)[idx], y, (y + 1) % 3)) for cell in sorted(SAFE)]
        values.append(float(np.mean(accs)))
    return values


def test_safe_cell_accuracy_interval_is_the_textbook_bootstrap_of_the_mean_over_safe_cells() -> None:
    from domainbench.stats import bootstrap_weights

    units = synthetic_units(skill={"m1": 0.85, "m2": 0.7})
    report = synthetic_report(units)
    out = image_outcomes(units)
    iv = run_intervals(report, out, confidence=0.95, resamples=1000, seed=5)
    assert report.safe_accuracy["m1"] is not None
    # the same resamples, expanded into image lists (each image repeated as often as it was drawn): exact
    weights = bootstrap_weights(out.n, out.labels, 1000, 5)
    lists = [np.repeat(np.arange(out.n), row.astype(int)) for row in weights]
    for model in ("m1", "m2"):
        slow = _textbook_safe_accuracy(out, model, lists)
        assert iv.model(model).safe_accuracy == pytest.approx(tuple(np.quantile(slow, [0.025, 0.975])), abs=1e-12)
        lo, hi = iv.model(model).safe_accuracy
        assert lo < report.safe_accuracy[model] < hi and hi - lo > 0.03
    # independent draws (choice with replacement within each class): the same law, so close intervals
    rng = np.random.default_rng(0)
    members = [np.flatnonzero(out.labels == k) for k in range(3)]
    lists = [np.concatenate([rng.choice(mm, size=mm.size) for mm in members]) for _ in range(2000)]
    ref = np.quantile(_textbook_safe_accuracy(out, "m1", lists), [0.025, 0.975])
    assert iv.model("m1").safe_accuracy == pytest.approx(tuple(ref), abs=0.02)
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
        return set(model.model_fields) - {"model", "corruption", "severity"}

    assert declared("cell") == set(CELL_INTERVAL_METRICS) == fields(CellIntervals)
    assert declared("cell", "wilson") == {"top1_accuracy", "label_flip_probability"}
    assert declared("model") == set(MODEL_METRICS) == fields(ModelIntervals)
    assert declared("image") == fields(StabilityIntervals)
    assert declared("fmr") == fields(FmrIntervals)

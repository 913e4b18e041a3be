"""Intervals of means over a run's cells and over runs (Compare's aggregates), checked against textbook loops
that resample per-image correctness and recompute the means, and on hand-checkable cases."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import balanced_accuracy_score

from domainbench.metrics.compare_intervals import RunDraws, aligned, run_draws
from domainbench.metrics.confidence import CORRUPTION_METRICS, metric_draws, run_intervals
from domainbench.metrics.outcomes import ImageOutcomes, image_outcomes
from domainbench.stats import bootstrap_weights, mean_draws, percentile_interval
from tests.metrics.confidence_fixtures import CELLS, synthetic_report, synthetic_units

B = 2000


def _run(run_id: str, seed: int = 0, skill: dict[str, float] | None = None, units=None):
    units = units or synthetic_units(skill=skill, seed=seed, run_id=run_id)
    return synthetic_report(units, run_id=run_id), image_outcomes(units)


def _ba(out: ImageOutcomes, model: str, corruption: str, severity: int, idx: np.ndarray) -> float:
    """Textbook balanced accuracy of one cell on the image positions ``idx`` (repeats count): the mean over
    the classes of the share of their drawn images predicted right."""
    assert out.labels is not None
    y, p = out.labels[idx], out.cell(model, corruption, severity)[idx]
    return float(np.mean([np.mean(p[y == k] == k) for k in np.unique(y)]))


def _family(out: ImageOutcomes, model: str, idx: np.ndarray) -> float:
    """Mean over the corruptions of the mean over their severities (what a family of blur and noise shows)."""
    per = {}
    for corr, sev in CELLS[1:]:
        per.setdefault(corr, []).append(_ba(out, model, corr, sev, idx))
    return float(np.mean([np.mean(v) for v in per.values()]))


def _stratified(rng: np.random.Generator, labels: np.ndarray) -> np.ndarray:
    """One textbook stratified resample: each class's images drawn with replacement, as many as it has."""
    return np.concatenate([rng.choice(m, size=m.size) for m in (np.flatnonzero(labels == k) for k in np.unique(labels))])


def test_every_draw_is_the_textbook_mean_over_the_resampled_images_of_every_cell() -> None:
    """One run: a family's mean and the corrupted average under each resample, recomputed by a loop that
    resamples the images once per resample for all cells (they are the same images) and uses sklearn."""
    report, out = _run("r")
    d = run_draws(report, out, "sample", 300, seed=7)
    w = bootstrap_weights(out.n, out.labels, 300, 7)
    family, corrupted = [], []
    for row in w:
        idx = np.repeat(np.arange(out.n), row.astype(int))
        assert _ba(out, "m1", "blur", 1, idx) == pytest.approx(  # the textbook function is sklearn's
            balanced_accuracy_score(out.labels[idx], out.cell("m1", "blur", 1)[idx]), abs=1e-12)
        family.append(_family(out, "m1", idx))
        corrupted.append(np.mean([_ba(out, "m1", c, s, idx) for c, s in CELLS[1:]]))
    fam = mean_draws([d.corruptions["m1"][c]["accuracy"] for c in ("blur", "noise")])
    assert fam == pytest.approx(family, abs=1e-12)
    assert d.models["m1"]["mean_corrupted_accuracy"] == pytest.approx(corrupted, abs=1e-12)


def test_unit_weights_give_the_reports_per_corruption_values() -> None:
    units = synthetic_units(skill={"m1": 0.85, "m2": 0.7, "m3": 0.6})
    report = synthetic_report(units)
    _, per = metric_draws(report, image_outcomes(units), np.ones((2, 90)))
    for m in report.models:
        for corr in ("blur", "noise"):
            accs = [c.accuracy for c in m.cells if c.corruption == corr]
            expected = {"accuracy": np.mean(accs), "ce": m.ce_per_corruption[corr], "rce": m.rce_per_corruption[corr],
                        "fr": m.fr_per_corruption[corr]}
            for k in CORRUPTION_METRICS:
                assert per[m.model][corr][k] == pytest.approx([expected[k]] * 2, abs=1e-12), (m.model, corr, k)


def test_a_family_mean_matches_an_independent_textbook_bootstrap() -> None:
    report, out = _run("r")
    d = run_draws(report, out, "sample", 4000, seed=0)
    lo, hi = percentile_interval(mean_draws([d.corruptions["m1"][c]["accuracy"] for c in ("blur", "noise")]))
    rng = np.random.default_rng(123)  # other draws of the same law
    assert out.labels is not None
    slow = [_family(out, "m1", _stratified(rng, out.labels)) for _ in range(4000)]
    ref_lo, ref_hi = np.quantile(slow, [0.025, 0.975])
    assert lo == pytest.approx(ref_lo, abs=0.01) and hi == pytest.approx(ref_hi, abs=0.01)


def test_identical_cells_give_the_single_cells_interval() -> None:
    """Every corrupted cell of m1 holds the same predictions: their mean is that cell in every resample."""
    units = synthetic_units()
    same = {(u.shard): u for u in units if (u.model, u.corruption, u.severity) == ("m1", "blur", 1)}
    units = [u.model_copy(update={"preds": same[u.shard].preds, "confusion": same[u.shard].confusion,
                                  "flips": same[u.shard].flips})
             if u.model == "m1" and u.corruption != "clean" else u for u in units]
    report, out = _run("r", units=units)
    d = run_draws(report, out, "sample", 1000, seed=0)
    cell = run_intervals(report, out, resamples=1000, seed=0).cell("m1", "blur", 1)
    assert cell is not None
    family = mean_draws([d.corruptions["m1"][c]["accuracy"] for c in ("blur", "noise")])
    assert percentile_interval(family) == pytest.approx(cell.balanced_accuracy, abs=1e-12)
    assert percentile_interval(d.models["m1"]["mean_corrupted_accuracy"]) == pytest.approx(cell.balanced_accuracy,
                                                                                          abs=1e-12)


def test_an_average_of_runs_with_deterministic_results_has_zero_width() -> None:
    """m1 is right on every image of one run and wrong on every image of the other: 50 % in every resample."""
    right = _run("a", seed=0, skill={"m1": 2.0, "m2": 0.7})
    wrong = _run("b", seed=1, skill={"m1": -1.0, "m2": 0.7})
    da, db = aligned([run_draws(*right, "sample", 500, 0), run_draws(*wrong, "sample", 500, 0)])
    mean = mean_draws([da.models["m1"]["mean_corrupted_accuracy"], db.models["m1"]["mean_corrupted_accuracy"]])
    assert percentile_interval(mean) == pytest.approx((0.5, 0.5), abs=1e-12)


def test_runs_average_jointly_on_the_same_images_and_independently_on_others() -> None:
    """A mean over three runs, two on the same images (a, c) and one on others (b), against a textbook loop that
    draws a's images once for a and c and b's images on their own."""
    a, c = _run("a", seed=0, skill={"m1": 0.85, "m2": 0.7}), _run("c", seed=0, skill={"m1": 0.65, "m2": 0.7})
    b = _run("b", seed=1, skill={"m1": 0.75, "m2": 0.7})
    outs = {"a": a[1], "b": b[1], "c": c[1]}
    assert np.array_equal(a[1].labels, c[1].labels) and not np.array_equal(a[1].labels, b[1].labels)
    draws = aligned([run_draws(*r, "sample", 4000, 0) for r in (a, b, c)])
    assert draws[0].images == draws[2].images != draws[1].images
    lo, hi = percentile_interval(mean_draws([d.models["m1"]["clean_accuracy"] for d in draws]))

    def textbook(joint: bool) -> tuple[float, float]:
        rng = np.random.default_rng(99)
        vals = []
        for _ in range(4000):
            ia = _stratified(rng, outs["a"].labels)
            ib = _stratified(rng, outs["b"].labels)
            ic = ia if joint else _stratified(rng, outs["c"].labels)
            vals.append(np.mean([_ba(outs[k], "m1", "clean", 0, i) for k, i in (("a", ia), ("b", ib), ("c", ic))]))
        q = np.quantile(vals, [0.025, 0.975])
        return float(q[0]), float(q[1])

    ref_lo, ref_hi = textbook(joint=True)
    assert lo == pytest.approx(ref_lo, abs=0.01) and hi == pytest.approx(ref_hi, abs=0.01)
    wrong_lo, wrong_hi = textbook(joint=False)  # a and c resampled as if they were other images: too narrow
    assert (hi - lo) - (wrong_hi - wrong_lo) > 0.01
    # b's rows are shuffled (paired independently), which leaves b's own interval the run page's
    own = run_intervals(*b, resamples=4000, seed=0).model("m1")
    assert own is not None and percentile_interval(draws[1].models["m1"]["clean_accuracy"]) == own.clean_accuracy
    assert not np.array_equal(draws[1].models["m1"]["clean_accuracy"],
                              run_draws(*b, "sample", 4000, 0).models["m1"]["clean_accuracy"])


def test_runs_on_the_same_images_must_share_their_resamples() -> None:
    a, c = _run("a", seed=0), _run("c", seed=0, skill={"m1": 0.6, "m2": 0.7})
    with pytest.raises(ValueError, match="resampled alike"):
        aligned([run_draws(*a, "sample", 100, 0), run_draws(*c, "sample", 100, 1)])
    # another dataset name is other images, even with the same indices and labels
    assert run_draws(*a, "sample", 100, 0).images != run_draws(*a, "other", 100, 0).images
    assert aligned([]) == []


def test_a_run_without_per_image_outcomes_has_no_draws() -> None:
    from domainbench.metrics.classification import MetricInputError

    report, _ = _run("r")
    empty = ImageOutcomes(indices=np.zeros(0, dtype=np.int64), labels=np.zeros(0, dtype=np.int64))
    with pytest.raises(MetricInputError, match="no per-image outcomes"):
        run_draws(report, empty, "sample", 10, 0)
    assert isinstance(run_draws(report, _run("r")[1], "sample", 10, 0), RunDraws)


def test_query_draws_resamples_runs_on_the_same_images_with_the_first_ones_seed() -> None:
    """Runs made with other --seed values on the same images are drawn again with the first one's seed (their
    rows must be the same images); a run without draws passes its reason through."""
    from domainbench import query

    runs = {"a": (_run("a"), 0), "c": (_run("c", skill={"m1": 0.6, "m2": 0.7}), 5), "b": (_run("b", seed=1), 5)}
    calls = []

    def load(store, report, resamples, seed):
        calls.append((report.run_id, seed))
        if report.run_id == "x":
            return "no per-image outcomes"
        run, own = runs[report.run_id]
        return run_draws(*run, "sample", resamples, own if seed is None else seed)

    none = _run("x")[0].model_copy(update={"run_id": "x"})
    out = query.draws(None, [runs["a"][0][0], runs["c"][0][0], runs["b"][0][0], none], resamples=50, load=load)
    assert calls == [("a", None), ("c", None), ("c", 0), ("b", None), ("x", None)]
    assert (out["a"].seed, out["c"].seed, out["b"].seed) == (0, 0, 5) and out["x"] == "no per-image outcomes"

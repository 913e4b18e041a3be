"""Intervals of means over a run's cells and over runs (Compare's aggregates), checked against textbook loops
that move each cell by the same per-image multipliers and recompute the means, against the closed-form normal
interval of the means, and on hand-checkable cases."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import norm

from domainbench.metrics.compare_intervals import RunDraws, aligned, run_draws
from domainbench.metrics.confidence import CORRUPTION_METRICS, metric_draws, run_intervals
from domainbench.metrics.outcomes import ImageOutcomes, image_outcomes
from domainbench.stats import mean_draws, percentile_interval
from domainbench.stats.smoothed import multipliers
from tests.metrics.confidence_fixtures import CELLS, synthetic_report, synthetic_units, textbook_loadings

B = 2000


def _run(run_id: str, seed: int = 0, skill: dict[str, float] | None = None, units=None):
    units = units or synthetic_units(skill=skill, seed=seed, run_id=run_id)
    return synthetic_report(units, run_id=run_id), image_outcomes(units)


def _cell(report, out: ImageOutcomes, model: str, corruption: str, severity: int, e: np.ndarray) -> np.ndarray:  # noqa: ANN001
    """The cell's balanced accuracy under each row of multipliers ``e``, the textbook way (kept in [0, 1])."""
    return np.clip(report.cell(model, corruption, severity).accuracy + e @ textbook_loadings(out, model, corruption, severity),
                   0, 1)


def test_every_draw_is_the_textbook_mean_over_the_same_multipliers_of_every_cell() -> None:
    """One run: a family's mean and the corrupted average under each row of multipliers, recomputed by a loop that
    moves every cell by the same row (they are the same images)."""
    report, out = _run("r")
    d = run_draws(report, out, "sample", 300, seed=7)
    e = multipliers(out.n, 300, 7)
    per = {}
    for corr, sev in CELLS[1:]:
        per.setdefault(corr, []).append(_cell(report, out, "m1", corr, sev, e))
    family = np.mean([np.mean(v, axis=0) for v in per.values()], axis=0)
    corrupted = np.mean([_cell(report, out, "m1", c, s, e) for c, s in CELLS[1:]], axis=0)
    fam = mean_draws([d.corruptions["m1"][c]["accuracy"] for c in ("blur", "noise")])
    assert fam == pytest.approx(family, abs=1e-12)
    assert d.models["m1"]["mean_corrupted_accuracy"] == pytest.approx(corrupted, abs=1e-12)


def test_zero_multipliers_give_the_reports_per_corruption_values() -> None:
    units = synthetic_units(skill={"m1": 0.85, "m2": 0.7, "m3": 0.6})
    report = synthetic_report(units)
    _, per = metric_draws(report, image_outcomes(units), np.zeros((2, 90)))
    for m in report.models:
        for corr in ("blur", "noise"):
            accs = [c.accuracy for c in m.cells if c.corruption == corr]
            expected = {"accuracy": np.mean(accs), "ce": m.ce_per_corruption[corr], "rce": m.rce_per_corruption[corr],
                        "fr": m.fr_per_corruption[corr]}
            for k in CORRUPTION_METRICS:
                assert per[m.model][corr][k] == pytest.approx([expected[k]] * 2, abs=1e-12), (m.model, corr, k)


def _normal(point: float, loadings: np.ndarray) -> tuple[float, float]:
    half = norm.ppf(0.975) * float(np.sqrt(np.sum(loadings * loadings)))
    return point - half, point + half


def test_a_family_mean_is_the_closed_form_normal_interval_of_the_mean() -> None:
    """A mean of normal draws is normal: its sd is the norm of the mean of the cells' loadings."""
    report, out = _run("r")
    d = run_draws(report, out, "sample", 20000, seed=0)
    lo, hi = percentile_interval(mean_draws([d.corruptions["m1"][c]["accuracy"] for c in ("blur", "noise")]))
    per: dict[str, list] = {}
    for corr, sev in CELLS[1:]:
        per.setdefault(corr, []).append((report.cell("m1", corr, sev).accuracy, textbook_loadings(out, "m1", corr, sev)))
    point = np.mean([np.mean([a for a, _ in v]) for v in per.values()])
    g = np.mean([np.mean([x for _, x in v], axis=0) for v in per.values()], axis=0)
    assert (lo, hi) == pytest.approx(_normal(point, g), abs=0.003)


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


def test_a_model_right_on_every_image_still_gets_an_interval() -> None:
    """The smoothing: all right in every class is p̃ = (n_c + 2)/(n_c + 4), not 1 with zero spread (which is what
    made the percentile bootstrap's interval zero-wide); the upper end is clipped at 1."""
    report, out = _run("a", seed=0, skill={"m1": 2.0, "m2": 0.7})
    iv = run_intervals(report, out, resamples=20000, seed=0).cell("m1", "clean", 0)
    assert iv is not None and report.cell("m1", "clean", 0).accuracy == 1.0
    assert iv.balanced_accuracy[1] == 1.0
    assert iv.balanced_accuracy[0] == pytest.approx(_normal(1.0, textbook_loadings(out, "m1", "clean", 0))[0], abs=0.003)
    assert iv.balanced_accuracy[0] < 0.97


def test_runs_average_jointly_on_the_same_images_and_independently_on_others() -> None:
    """A mean over three runs, two on the same images (a, c) and one on others (b): the closed form adds a's and
    c's loadings image by image (the same multipliers move both) and b's independently."""
    a, c = _run("a", seed=0, skill={"m1": 0.85, "m2": 0.7}), _run("c", seed=0, skill={"m1": 0.65, "m2": 0.7})
    b = _run("b", seed=1, skill={"m1": 0.75, "m2": 0.7})
    assert np.array_equal(a[1].labels, c[1].labels) and not np.array_equal(a[1].labels, b[1].labels)
    draws = aligned([run_draws(*r, "sample", 20000, 0) for r in (a, b, c)])
    assert draws[0].images == draws[2].images != draws[1].images
    lo, hi = percentile_interval(mean_draws([d.models["m1"]["clean_accuracy"] for d in draws]))
    point = np.mean([r[0].cell("m1", "clean", 0).accuracy for r in (a, b, c)])
    ga, gb, gc = (textbook_loadings(r[1], "m1", "clean", 0) / 3 for r in (a, b, c))
    joint = _normal(point, np.concatenate([ga + gc, gb]))
    assert (lo, hi) == pytest.approx(joint, abs=0.003)
    separate = _normal(point, np.concatenate([ga, gb, gc]))  # a and c drawn as if they were other images: too narrow
    assert (hi - lo) - (separate[1] - separate[0]) > 0.01
    # b's rows are shuffled (paired independently), which leaves b's own interval the run page's
    own = run_intervals(*b, resamples=20000, seed=0).model("m1")
    assert own is not None and percentile_interval(draws[1].models["m1"]["clean_accuracy"]) == own.clean_accuracy
    assert not np.array_equal(draws[1].models["m1"]["clean_accuracy"],
                              run_draws(*b, "sample", 20000, 0).models["m1"]["clean_accuracy"])


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

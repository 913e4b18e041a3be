"""Cost beside robustness: throughput from stage timings, the Pareto front, the fastest model tied with the best."""

from __future__ import annotations

import numpy as np
import pytest

from domainbench.metrics.comparison import compare_models
from domainbench.metrics.cost import fastest_not_worse, model_costs, pareto_front, throughput
from domainbench.metrics.outcomes import ImageOutcomes


def test_throughput_counts_preprocess_and_forward_only() -> None:
    timings = {"m": {"preprocess": 0.5, "forward": 1.5, "scoring": 7.0, "store": 3.0, "images": 400}}
    assert throughput(timings, "m") == (400, 2.0, 200.0)
    assert throughput(timings, "other") == (0, 0.0, None)


def _skyline(points: dict[str, tuple[float, float]]) -> set[str]:
    """The front by a sweep: fastest first (ties: most accurate first), keep a model more accurate than every
    faster one; equal points are all kept."""
    out, best = set(), -np.inf
    order = sorted(points, key=lambda m: (-points[m][1], -points[m][0]))
    for k, m in enumerate(order):
        a, s = points[m]
        same = [o for o in order[:k] if points[o] == (a, s)]
        if a > best or (same and same[0] in out):
            out.add(m)
        best = max(best, a)
    return out


@pytest.mark.parametrize("seed", range(40))
def test_the_pareto_front_is_the_skyline(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 9))
    # few distinct values, so ties on one axis (and equal points) are common
    points = {f"m{k}": (float(rng.integers(0, 4)) / 4, float(rng.integers(1, 5)) * 100) for k in range(n)}
    assert pareto_front(points) == _skyline(points)


def test_a_model_without_timings_is_on_no_front() -> None:
    assert pareto_front({"a": (0.9, None), "b": (0.5, 10.0)}) == {"b"}


def _comparison() -> object:
    rng = np.random.default_rng(3)
    n = 400
    labels = rng.integers(0, 4, n)
    preds = {}
    for m, p in {"good": 0.9, "also": 0.88, "bad": 0.5}.items():
        for cell in (("clean", 0), ("fog", 3)):
            right = rng.random(n) < p
            preds[(m, *cell)] = np.where(right, labels, (labels + 1) % 4)
    return compare_models(ImageOutcomes(indices=np.arange(n), labels=labels, preds=preds))


def test_the_fastest_model_the_data_cannot_tell_from_the_best() -> None:
    c = _comparison()
    acc = c.groups.accuracy
    verdict = next(v for v in c.verdicts if {v.model_a, v.model_b} == {"good", "also"})
    assert verdict.winner is None  # "also" ties with "good" at this sample size
    # "bad" is fastest but significantly worse: "also" is the answer, with the pair's Holm-adjusted p
    timings = {"good": {"forward": 1.0, "images": 100}, "also": {"forward": 1.0, "images": 300},
               "bad": {"forward": 1.0, "images": 900}}
    costs = model_costs(timings, ["good", "also", "bad"], acc)
    assert {c_.model for c_ in costs if c_.pareto} == {"good", "also", "bad"}
    sentence = fastest_not_worse(costs, c)
    assert sentence == (f"the fastest model not significantly worse than the best on this domain is also (300 images/s, "
                        f"3.0× the best's speed; p = {verdict.p_holm:.2g} against good, Holm-adjusted)")
    # the best is also the fastest: it is the answer
    timings["good"]["images"] = 1000
    costs = model_costs(timings, ["good", "also", "bad"], acc)
    assert [c_.model for c_ in costs if c_.pareto] == ["good"]
    assert fastest_not_worse(costs, c).endswith("good (1,000 images/s): it is also the fastest")
    assert fastest_not_worse(costs, None) is None


def test_the_resources_a_run_stored_are_read_and_shown_and_absent_ones_left_out() -> None:
    timings = {"gpu": {"images": 10.0, "preprocess": 1.0, "forward": 1.0, "parameters": 151_277_313.0,
                       "weight_bytes": 605_109_252.0, "peak_gpu_bytes": 3 * 2**30 + 2**29},
               "api": {"images": 10.0, "forward": 4.0, "requests": 12.0, "prompt_tokens": 9_876.0,
                       "completion_tokens": 24.0},
               "old": {"images": 10.0, "forward": 2.0}}
    costs = {c.model: c for c in model_costs(timings, ["gpu", "api", "old"], {"gpu": 0.5, "api": 0.6, "old": 0.4})}
    assert (costs["gpu"].parameters, costs["gpu"].peak_memory_bytes, costs["gpu"].memory) == (151_277_313, 3.5 * 2**30, "gpu")
    assert costs["gpu"].resource_columns() == {"parameters": "151 M", "peak memory": "3,584.0 MiB (gpu)"}
    assert costs["api"].resource_columns() == {"requests": "12", "tokens (prompt + completion)": "9,876 + 24"}
    assert costs["old"].resource_columns() == {} and costs["old"].parameters is None
    # the resources change nothing of the throughput or the front
    assert [c.images_per_second for c in costs.values()] == [5.0, 2.5, 5.0]

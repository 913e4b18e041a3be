"""Cost beside robustness: how fast each model scored on the run's device, which models no other beats on both
robustness and speed (Pareto-efficient), and the fastest model the data cannot tell from the best.

Throughput is read from the run's stage timings (``engine.timings``): the images a model scored over its seconds of
``preprocess`` + ``forward`` (what the model costs per image; scoring against the classifier and the store writes
are the harness's). It is a measurement on the run's machine, shared with whatever else ran there, so it ranks
models of one run; it is not a benchmark of the models across machines.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

COST_STAGES = ("preprocess", "forward")


class ModelCost(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str
    #: images the model scored, and its preprocess + forward seconds (from the run's timings)
    images: int
    seconds: float
    #: images per second over those stages; None without timings
    images_per_second: float | None
    #: mean balanced accuracy over the corrupted cells (the verdicts' measure)
    corrupted_accuracy: float | None
    #: no other model is at least as accurate and at least as fast, and better in one
    pareto: bool
    #: what the run measured besides time (``engine.resources``; None where it did not): the parameters the model
    #: holds, its peak memory while scoring and where ("gpu" or "host"), an endpoint's requests and reported tokens
    parameters: int | None = None
    peak_memory_bytes: int | None = None
    memory: str | None = None
    requests: int | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None

    def resource_columns(self) -> dict[str, str]:
        """The measured resources as display text, one column each; a column the run did not measure is absent."""
        out = {}
        if self.parameters is not None:
            out["parameters"] = _count(self.parameters)
        if self.peak_memory_bytes is not None:
            out["peak memory"] = f"{self.peak_memory_bytes / 2**20:,.1f} MiB ({self.memory})"
        if self.requests is not None:
            out["requests"] = f"{self.requests:,}"
        if self.prompt_tokens is not None or self.completion_tokens is not None:
            out["tokens (prompt + completion)"] = f"{self.prompt_tokens or 0:,} + {self.completion_tokens or 0:,}"
        return out


def _count(n: int) -> str:
    """1234567 -> "1.23 M" (parameters are read in millions or billions)."""
    for div, unit in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if n >= div:
            return f"{n / div:.3g} {unit}"
    return str(n)


def resources(timings: Mapping[str, Mapping[str, float]], model: str) -> dict[str, Any]:
    """The ``ModelCost`` resource fields of ``model`` from a run's timings row (``engine.resources``' keys)."""
    row = timings.get(model, {})
    out: dict[str, Any] = {k: int(row[k]) for k in ("parameters", "requests", "prompt_tokens", "completion_tokens")
                           if k in row}
    for where in ("gpu", "host"):
        if f"peak_{where}_bytes" in row:
            out |= {"peak_memory_bytes": int(row[f"peak_{where}_bytes"]), "memory": where}
    return out


def throughput(timings: Mapping[str, Mapping[str, float]], model: str) -> tuple[int, float, float | None]:
    """(images scored, preprocess + forward seconds, images per second) of ``model`` in a run's ``timings``."""
    row = timings.get(model, {})
    images = int(row.get("images", 0))
    seconds = float(sum(row.get(s, 0.0) for s in COST_STAGES))
    return images, seconds, (images / seconds if images and seconds > 0 else None)


def pooled_timings(runs: Sequence[Mapping[str, Mapping[str, float]]]) -> dict[str, dict[str, float]]:
    """Several runs' timings as one: per model its images and stage seconds summed over the runs, so its images/s
    is its images over all its seconds (a run with more images weighs more, as it took longer)."""
    out: dict[str, dict[str, float]] = {}
    for timings in runs:
        for model, row in timings.items():
            pooled = out.setdefault(model, {})
            for key, value in row.items():
                pooled[key] = pooled.get(key, 0.0) + float(value)
    return out


def pareto_front(points: Mapping[str, tuple[float | None, float | None]]) -> set[str]:
    """The models no other dominates: (accuracy, speed) both at least as high and one higher. A model missing a
    coordinate is on no front."""
    known = {m: p for m, p in points.items() if p[0] is not None and p[1] is not None}
    front = set()
    for m, (a, s) in known.items():
        if not any(a2 >= a and s2 >= s and (a2 > a or s2 > s) for o, (a2, s2) in known.items() if o != m):  # type: ignore[operator]
            front.add(m)
    return front


def model_costs(timings: Mapping[str, Mapping[str, float]], models: Sequence[str],
                accuracy: Mapping[str, float | None]) -> list[ModelCost]:
    """Per model its throughput and mean corrupted accuracy, and whether it is Pareto-efficient."""
    rows = {m: throughput(timings, m) for m in models}
    front = pareto_front({m: (accuracy.get(m), rows[m][2]) for m in models})
    return [ModelCost(model=m, images=rows[m][0], seconds=rows[m][1], images_per_second=rows[m][2],
                      corrupted_accuracy=accuracy.get(m), pareto=m in front, **resources(timings, m)) for m in models]


def fastest_not_worse(costs: Sequence[ModelCost], comparison: Any) -> str | None:
    """"the fastest model not significantly worse than the best on this domain is X (p = …)": the best by mean
    corrupted balanced accuracy; among the models whose verdict against it is a tie (and itself), the fastest;
    p is the pair's Holm-adjusted p-value. None without throughputs or a comparison."""
    timed = {c.model: c for c in costs if c.images_per_second is not None and c.corrupted_accuracy is not None}
    if comparison is None or len(timed) < 2:
        return None
    best = max(timed.values(), key=lambda c: (c.corrupted_accuracy, c.images_per_second)).model
    p_of = {}
    for v in comparison.verdicts:
        if best in (v.model_a, v.model_b):
            other = v.model_b if v.model_a == best else v.model_a
            p_of[other] = (v.p_holm, v.winner is None)
    tied = [best] + [m for m, (_, tie) in p_of.items() if tie and m in timed]
    fastest = max(tied, key=lambda m: (timed[m].images_per_second, m == best))
    speed = f"{timed[fastest].images_per_second:,.0f} images/s"
    if fastest == best:
        faster = any(c.images_per_second > timed[best].images_per_second for c in timed.values())  # type: ignore[operator]
        why = "every faster model is significantly worse" if faster else "it is also the fastest"
        return (f"the fastest model not significantly worse than the best on this domain is the best itself, {best} "
                f"({speed}): {why}")
    p = p_of[fastest][0]
    ratio = timed[fastest].images_per_second / timed[best].images_per_second  # type: ignore[operator]
    return (f"the fastest model not significantly worse than the best on this domain is {fastest} ({speed}, "
            f"{ratio:.1f}× the best's speed; p = {p:.2g} against {best}, Holm-adjusted)")

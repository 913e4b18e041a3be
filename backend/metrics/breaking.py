"""The breaking point of a model under a corruption: where on the corruption's continuous
severity scale its balanced accuracy falls below a threshold, found by bisection.

The scale is the corruption's continuous parameter range (``CorruptionSpec.ranges``): 0 is its
weakest end, 1 its strongest, every parameter moved linearly between them (other parameters at
their severity-3 values), as the stability metrics sample it. Bisection assumes accuracy falls
as the corruption gets stronger. The interval is made from the points evaluated on the way: its
low end is the strongest point whose accuracy interval lies wholly above the threshold (the model
still clearly works there), its high end the weakest point whose interval lies wholly below it
(clearly broken there); between them the sample cannot say, to within the bisection's step.
Each point's accuracy interval is the smoothed per-class normal interval every other balanced
accuracy gets (``stats.smoothed``): the stratified bootstrap used before gave zero width wherever
classes had one image, so a 500-image sample of a many-class dataset drew its "clearly above /
below" from nothing.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from domainbench.records.results import BreakingPoint  # the record, below the store
from domainbench.stats.smoothed import balanced_accuracy_interval

BISECTION_STEPS = 6  # resolution 1/64 of the scale


def default_threshold(clean_accuracy: float, n_classes: int) -> float:
    """Halfway from ``clean_accuracy`` (the run's baseline's) to chance, 1 / ``n_classes``."""
    return (clean_accuracy + 1.0 / n_classes) / 2


def bisect_breaking_point(model: str, corruption: str, correct_at: Callable[[float], np.ndarray], labels: np.ndarray,
                          threshold: float, confidence: float = 0.95, steps: int = BISECTION_STEPS,
                          threshold_model: str | None = None) -> BreakingPoint:
    """Bisect t in [0, 1] for balanced accuracy < ``threshold``; ``correct_at(t)`` is the per-image
    correctness of the model at scale position t (same images, same seeds at every t)."""
    seen: dict[float, tuple[float, tuple[float, float]]] = {}

    def accuracy(t: float) -> float:
        if t not in seen:
            c = np.asarray(correct_at(t), dtype=bool)
            point = float(np.mean([c[labels == k].mean() for k in np.unique(labels)]))
            seen[t] = (point, balanced_accuracy_interval(c, labels, confidence))
        return seen[t][0]

    if accuracy(1.0) >= threshold:
        estimate: float | None = None  # never breaks on this scale
    elif accuracy(0.0) < threshold:
        estimate = 0.0
    else:
        lo, hi = 0.0, 1.0
        for _ in range(steps):
            mid = (lo + hi) / 2
            if accuracy(mid) < threshold:
                hi = mid
            else:
                lo = mid
        estimate = (lo + hi) / 2
    def clearly_above(t: float) -> bool:
        accuracy(t)
        return seen[t][1][0] > threshold

    def clearly_below(t: float) -> bool:
        accuracy(t)
        return seen[t][1][1] < threshold

    above = [t for t in seen if clearly_above(t)]
    below = [t for t in seen if clearly_below(t)]
    ci_low = max(above, default=0.0)
    ci_high = min([t for t in below if t >= ci_low], default=None)
    if estimate is not None:
        # refine each end by bisecting its own predicate between it and the estimate
        ci_low = _bisect(ci_low, estimate, clearly_above, steps)[0]
        if ci_high is not None:
            ci_high = _bisect(estimate, ci_high, lambda t: not clearly_below(t), steps)[1]
    return BreakingPoint(
        model=model, corruption=corruption, threshold=threshold, breaking_point=estimate,
        breaking_point_ci_low=ci_low if estimate is not None or ci_high is not None else None,
        breaking_point_ci_high=ci_high, evaluated=sorted((t, v[0]) for t, v in seen.items()), n_images=int(labels.size),
        confidence=confidence, threshold_model=threshold_model, n_classes=int(np.unique(labels).size))


def _bisect(lo: float, hi: float, low_side: Callable[[float], bool], steps: int) -> tuple[float, float]:
    """``[lo, hi]`` narrowed to where ``low_side`` turns false, to 2^-steps or ``steps - 2`` halvings."""
    for _ in range(steps - 2):
        if hi - lo <= 1 / 2**steps:
            break
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if low_side(mid) else (lo, mid)
    return lo, hi

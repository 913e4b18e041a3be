"""Intervals of means over cells and over runs: Compare's heatmaps, ranking and families.

A mean over a run's cells (the corrupted average, a family's corruptions) is drawn as one: the cells
are the same images, so one row of multipliers (``stats.smoothed.multipliers``, the run page's own draws)
moves every cell of the run at once. A mean over runs averages, resample by resample, each run's value under
its own resamples, after :func:`aligned` has paired the runs' rows:

- runs on the same images (same dataset, image indices and labels) keep their rows as they are, so row i
  draws the same images in each of them (jointly);
- runs on other images are independent samples: each further image set's rows are shuffled by a seeded
  permutation, so its row i is paired with an unrelated row of the others.

A percentile interval does not depend on the order of the rows (the rows are called resamples below), so each run's own interval is the run page's.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from domainbench.metrics.classification import MetricInputError
from domainbench.metrics.confidence import metric_draws
from domainbench.metrics.outcomes import ImageOutcomes
from domainbench.stats.smoothed import shared_multipliers

if TYPE_CHECKING:
    from domainbench.records.report import RunReport


@dataclass(frozen=True)
class RunDraws:
    """One run's numbers under each of its ``resamples`` rows of draw counts (nan: not applicable there)."""

    run_id: str
    #: a digest of the images (dataset, indices, labels): runs with the same one are resampled jointly
    images: str
    seed: int
    resamples: int
    #: model -> ``confidence.MODEL_METRICS`` name -> (resamples,)
    models: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)
    #: model -> corruption -> ``confidence.CORRUPTION_METRICS`` name -> (resamples,)
    corruptions: dict[str, dict[str, dict[str, np.ndarray]]] = field(default_factory=dict)
    #: an adaptive run's: spread along its anytime-valid intervals, not resampled (``query.confidence.load_draws``)
    anytime_valid: bool = False

    def permuted(self, order: np.ndarray) -> RunDraws:
        return replace(self, models={m: {k: v[order] for k, v in d.items()} for m, d in self.models.items()},
                       corruptions={m: {c: {k: v[order] for k, v in d.items()} for c, d in per.items()}
                                    for m, per in self.corruptions.items()})


def image_set(dataset: str, outcomes: ImageOutcomes) -> str:
    """Which images a run evaluated: its dataset as named, the dataset indices and their labels."""
    h = hashlib.sha1(dataset.encode())
    h.update(np.ascontiguousarray(outcomes.indices, dtype=np.int64).tobytes())
    if outcomes.labels is not None:
        h.update(b"labels")
        h.update(np.ascontiguousarray(outcomes.labels, dtype=np.int64).tobytes())
    return h.hexdigest()[:16]


def run_draws(report: RunReport, outcomes: ImageOutcomes, dataset: str, resamples: int, seed: int) -> RunDraws:
    """Every model's MODEL_METRICS and per-corruption CORRUPTION_METRICS under the run's resamples: the
    multiplier draws of ``confidence.run_intervals`` with the same ``seed``, so the same rows."""
    if outcomes.n == 0:
        raise MetricInputError("its units store no per-image outcomes (written by an older domainbench)")
    # the multipliers of the run page's intervals, made once for all (Compare's runs often share them)
    models, corruptions = metric_draws(report, outcomes, shared_multipliers(outcomes.n, resamples, seed))
    return RunDraws(run_id=report.run_id, images=image_set(dataset, outcomes), seed=seed, resamples=resamples,
                    models=models, corruptions=corruptions)


def aligned(draws: Sequence[RunDraws]) -> list[RunDraws]:
    """The runs' draws with their rows paired for averaging across runs (see the module's docstring): the
    first image set's rows as they are, the k-th other image set's rows in the k-th seeded permutation.

    Runs on the same images must have been drawn with the same seed and number of resamples (the same rows).
    """
    if not draws:
        return []
    resamples = draws[0].resamples
    first: dict[str, RunDraws] = {}
    for d in draws:
        ref = first.setdefault(d.images, d)
        if d.resamples != resamples or d.seed != ref.seed:
            raise ValueError(f"runs {ref.run_id} and {d.run_id} must be resampled alike (seed {ref.seed} vs {d.seed}, "
                             f"{ref.resamples} vs {d.resamples} resamples) to be averaged")
    order = {images: k for k, images in enumerate(first)}
    return [d if order[d.images] == 0 else d.permuted(np.random.default_rng([order[d.images], d.seed]).permutation(resamples))
            for d in draws]

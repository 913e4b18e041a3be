"""``run --breaking-point``: per model and corruption, bisect the corruption's continuous scale for
where balanced accuracy falls below a threshold (``domainbench.metrics.breaking``).

Every point of the scale corrupts the same images with the same per-image seeds, so accuracy
moves with the corruption's strength, not with fresh noise; corrupted images of a point are
shared by every model. At most ``MAX_IMAGES`` of the run's images are used: a seeded sample
stratified by class (as equal a share of every class as its images allow), never the first images
in storage order, which on a class-folder dataset are the first classes only.

One threshold serves every model of the run (halfway from the baseline's clean balanced accuracy
on the sample to chance, or the one given), so "breaks at" compares the models at one accuracy.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from domainbench import corruptions
from domainbench.data import class_rounds
from domainbench.engine.jobs import image_seeds
from domainbench.engine.scoring import classify
from domainbench.engine.tasks import RunContext
from domainbench.metrics.breaking import BreakingPoint, bisect_breaking_point, default_threshold
from domainbench.stats import balanced_accuracy_weighted

MAX_IMAGES = 500
#: seed tag of the breaking-point images: disjoint from severities (1..5) and stability grid points (100+)
BREAK_SEED_TAG = 200


def scale_params(name: str, t: float) -> dict[str, Any]:
    """The corruption's parameters at position t of its continuous range (0 weakest, 1 strongest)."""
    spec = corruptions.get(name)
    point = dict(spec.ladder[3])
    for key, (a, b) in spec.ranges.items():
        point[key] = spec._cast(key, a + float(t) * (b - a))
    return spec.validate(point)


def stratified_sample(labels: np.ndarray, size: int, seed: int) -> np.ndarray:
    """Sorted indices of ``size`` images (all when there are fewer), as equally many of every class as the
    classes' sizes allow; which images of a class, and which classes take the one left over, drawn with ``seed``."""
    labels = np.asarray(labels)
    if size >= labels.size:
        return np.arange(labels.size)
    return np.sort(class_rounds(labels, np.random.default_rng([seed, BREAK_SEED_TAG]))[:size])


def measure_breaking_points(ctx: RunContext, threshold: float | None, confidence: float = 0.95) -> list[BreakingPoint]:
    ds = ctx.dataset
    if ds.labels is None:
        ctx.events.message("breaking points skipped: they need labelled images (balanced accuracy)")
        return []
    batch = ds.load(stratified_sample(ds.labels, MAX_IMAGES, ctx.cfg.seed))
    assert batch.labels is not None
    labels = batch.labels
    ones = np.ones((1, labels.size))
    baseline = next(ms for ms in ctx.models if ms.name == ctx.cfg.baseline_model)
    if threshold is None:
        # the baseline's clean accuracy on these images sets the one threshold every model is bisected for
        clean = float(balanced_accuracy_weighted(classify(baseline, batch.images).preds == labels, labels, ones)[0])
        threshold, threshold_model = default_threshold(clean, len(ds.classes)), baseline.name
    else:
        threshold_model = None
    seeds_of = {}
    out = []
    for choice in ctx.domain.corruptions:
        spec = corruptions.get(choice.name)
        if not spec.ranges or not spec.ordinal:
            continue  # no strength scale to bisect (e.g. flips)
        seeds_of[choice.name] = image_seeds(ctx.cfg.seed, choice.name, BREAK_SEED_TAG, batch.indices)
        images: dict[float, np.ndarray] = {}

        def images_at(t: float, name: str = choice.name) -> np.ndarray:
            if t not in images:
                images[t] = corruptions.corrupt_batch(batch.images, name, params=scale_params(name, t), seeds=seeds_of[name])
            return images[t]

        for ms in ctx.models:
            out.append(bisect_breaking_point(ms.name, choice.name, lambda t, ms=ms: classify(ms, images_at(t)).preds == labels,
                                             labels, threshold, confidence,
                                             threshold_model=threshold_model))
        ctx.events.message(f"breaking points of {choice.name} measured")
    return out

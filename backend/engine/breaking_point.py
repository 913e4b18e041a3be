"""``run --breaking-point``: per model and corruption, bisect the corruption's continuous scale for
where balanced accuracy falls below a threshold (``domainbench.metrics.breaking``).

Every point of the scale corrupts the same images with the same per-image seeds, so accuracy
moves with the corruption's strength, not with fresh noise; corrupted images of a point are
shared by every model. At most ``MAX_IMAGES`` of the run's images are used.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from domainbench import corruptions
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


def measure_breaking_points(ctx: RunContext, threshold: float | None, confidence: float = 0.95) -> list[BreakingPoint]:
    ds = ctx.dataset
    batch = ds.load(np.arange(min(len(ds), MAX_IMAGES)))
    if batch.labels is None:
        ctx.events.message("breaking points skipped: they need labelled images (balanced accuracy)")
        return []
    labels = batch.labels
    ones = np.ones((1, labels.size))
    clean = {ms.name: float(balanced_accuracy_weighted(classify(ms, batch.images).preds == labels, labels, ones)[0])
             for ms in ctx.models}
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
            limit = threshold if threshold is not None else default_threshold(clean[ms.name], len(ds.classes))
            out.append(bisect_breaking_point(ms.name, choice.name, lambda t, ms=ms: classify(ms, images_at(t)).preds == labels,
                                             labels, limit, confidence, seed=ctx.cfg.seed))
        ctx.events.message(f"breaking points of {choice.name} measured")
    return out

"""A plan fitted to the images it will run on: a corruption that leaves these images unchanged (a colour
corruption on grayscale images) measures nothing, so the planner, when it is given the dataset, does not
propose it, and says so in the plan's notes.

"Unchanged" is the plan preview's and the run page's measure (:mod:`domainbench.metrics.ladder`): mean
absolute pixel difference below ``NO_EFFECT_PIXELS`` (0-255 scale) and mean SSIM at least ``NO_EFFECT_SSIM``,
here over a few of the dataset's images at each chosen severity: a severity that changes nothing is left out, and a corruption none of whose
severities changes anything. A plan given by hand is never changed: this runs
only where the planner proposes (``plan --dataset``, the New domain page's dataset field).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from domainbench.records.config import DomainConfig
from domainbench.planner.audit import digest_pixels, stamp
from domainbench.metrics.ladder import NO_EFFECT_PIXELS, NO_EFFECT_SSIM, no_effect, pixel_change

#: images of the dataset a corruption is tried on (the first of each class first: ``Dataset.subset``)
PROBE_IMAGES = 6


def probe_images(spec: str, classes: list[str] | None = None, n: int = PROBE_IMAGES) -> tuple[np.ndarray, str]:
    """Up to ``n`` decoded images of dataset ``spec`` (as a run opens it) and the dataset's name."""
    from domainbench.data import open_dataset
    from domainbench.records.label_sets import resolve_classes

    ds = open_dataset(spec, classes=resolve_classes(classes)).subset(n)
    batch = ds.load(np.arange(len(ds)))
    return batch.images, ds.name


def _corrupted(cfg: DomainConfig, clean: np.ndarray, seed: int) -> Iterator[tuple[tuple[str, int], np.ndarray]]:
    from domainbench import corruptions

    for c in cfg.corruptions:
        if corruptions.is_temporal(c.name):
            continue  # a clip corruption has no effect to measure on still probe images; it stays as planned
        for s in c.severities:
            yield (c.name, s), np.stack([np.asarray(corruptions.corrupt(x, c.name, severity=s, seed=seed)) for x in clean])


def pixel_changes(cfg: DomainConfig, images: Sequence[np.ndarray] | np.ndarray, seed: int = 0) -> dict[tuple[str, int], float]:
    """Per chosen (corruption, severity), the mean absolute pixel change of ``images`` (0-255 scale)."""
    clean = np.asarray(images)
    return {cell: pixel_change(clean, corrupted) for cell, corrupted in _corrupted(cfg, clean, seed)}


def unchanged_cells(cfg: DomainConfig, images: Sequence[np.ndarray] | np.ndarray, seed: int = 0) -> set[tuple[str, int]]:
    """The chosen (corruption, severity) pairs that leave ``images`` as they were (``ladder.no_effect``)."""
    clean = np.asarray(images)
    return {cell for cell, corrupted in _corrupted(cfg, clean, seed) if no_effect(clean, corrupted)}


def fit_to_images(cfg: DomainConfig, images: Sequence[np.ndarray] | np.ndarray, dataset: str, seed: int = 0) -> DomainConfig:
    """``cfg`` without the severities that do not change ``images``, and without a corruption none of whose
    severities does; each left out is named in the plan's notes (``planner.violations``). The selection
    frequencies keep the planner's vote as it was. When nothing would be left, the plan is kept and the note
    says so (an empty plan cannot run)."""
    if len(images) == 0:
        return cfg
    cfg = stamp(cfg, dataset=digest_pixels(np.asarray(images)))
    flat = unchanged_cells(cfg, images, seed)
    if not flat:
        return cfg
    why = (f"no effect on {len(images)} images of {dataset} (mean absolute pixel change below {NO_EFFECT_PIXELS} of "
           f"255 and SSIM at least {NO_EFFECT_SSIM}; e.g. a colour corruption on grayscale images)")
    keep, notes = [], []
    for c in cfg.corruptions:
        gone = [s for s in c.severities if (c.name, s) in flat]
        if len(gone) == len(c.severities):
            notes.append(f"left out {c.name}: {why}")
            continue
        if gone:
            notes.append(f"left out {c.name} severit{'y' if len(gone) == 1 else 'ies'} {', '.join(map(str, gone))}: {why}")
        keep.append(c.model_copy(update={"severities": [s for s in c.severities if s not in gone]}))
    if not keep:
        notes = [f"every chosen corruption has {why}; the plan is kept as planned"]
        keep = list(cfg.corruptions)
    planner = cfg.planner.model_copy(update={"violations": [*cfg.planner.violations, *notes]})
    return cfg.model_copy(update={"corruptions": keep, "planner": planner})

"""Where models break, per class: each class's accuracy (recall) under every corruption and severity, and the severity
at which it first falls below its threshold, "breaks", so the classes that break first can be named.

A class's recall in a cell is its diagonal count over its row of the cell's confusion matrix (the images of that
class the model got right). Its threshold is halfway from its clean recall to chance (1 / classes), as
``metrics.breaking.default_threshold`` sets a model's: a class that is already poor clean breaks only when it falls
further. A class breaks under a corruption at the lowest severity whose recall is below the threshold (a recall
that rises again later does not undo it); it never breaks when no severity goes below. The ranking orders classes
by their mean breaking severity over every (model, corruption) pair, a pair where the class never breaks counting
as one above the highest severity the run used, so the classes that break at the mildest severities come first.
A class without images in a cell has no recall there (None) and cannot break in it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict

from domainbench.metrics.breaking import default_threshold

CLEAN = "clean"


class ClassCell(BaseModel):
    """One class under one model × corruption: its recall per severity, its threshold and where it breaks."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str
    corruption: str
    label: str
    clean: float | None
    threshold: float | None
    #: severity -> recall (None: no image of the class in that cell)
    recall: dict[int, float | None]
    #: the lowest severity whose recall is below the threshold; None: it never breaks
    breaks_at: int | None


class ClassRank(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    label: str
    #: mean breaking severity over the (model, corruption) pairs, never-breaking counted as the top severity + 1
    mean_breaking_severity: float
    #: in how many of those pairs it breaks, and of how many
    broken: int
    pairs: int


def _recalls(confusion: Any) -> np.ndarray:
    m = np.asarray(confusion, dtype=float)
    support = m.sum(axis=1)
    return np.divide(np.diag(m), support, out=np.full(len(m), np.nan), where=support > 0)


def class_cells(report: Any, classes: Sequence[str]) -> list[ClassCell]:
    """Per model × corruption × class, its recall per severity and where it breaks (labelled runs; empty else)."""
    out = []
    for m in report.models:
        if not m.labeled:
            continue
        if m.clean is None or m.clean.confusion is None:
            continue
        clean = _recalls(m.clean.confusion)
        # a real-shift cell (``shift:NAME``) is other images at no severity: nothing breaks along it
        by_cell = {(c.corruption, c.severity): _recalls(c.confusion) for c in m.cells
                   if c.confusion is not None and c.corruption != CLEAN and not c.corruption.startswith("shift:")}
        corruptions = sorted({c for c, _ in by_cell})
        for corruption in corruptions:
            severities = sorted(s for c, s in by_cell if c == corruption)
            for k, label in enumerate(classes):
                base = None if np.isnan(clean[k]) else float(clean[k])
                threshold = None if base is None else default_threshold(base, len(classes))
                recall = {s: (None if np.isnan(by_cell[(corruption, s)][k]) else float(by_cell[(corruption, s)][k]))
                          for s in severities}
                breaks = next((s for s in severities if threshold is not None and recall[s] is not None
                               and recall[s] < threshold), None)  # type: ignore[operator]
                out.append(ClassCell(model=m.model, corruption=corruption, label=label, clean=base,
                                     threshold=threshold, recall=recall, breaks_at=breaks))
    return out


def breaks_first(cells: Sequence[ClassCell]) -> list[ClassRank]:
    """The classes, those that break at the mildest severities first (see the module)."""
    top = max((s for c in cells for s in c.recall), default=0)
    per: dict[str, list[int | None]] = {}
    for c in cells:
        if c.threshold is not None:
            per.setdefault(c.label, []).append(c.breaks_at)
    ranks = [ClassRank(label=label, mean_breaking_severity=float(np.mean([top + 1 if b is None else b for b in v])),
                       broken=sum(b is not None for b in v), pairs=len(v)) for label, v in per.items()]
    return sorted(ranks, key=lambda r: (r.mean_breaking_severity, -r.broken, r.label))


#: failure clusters: the most clusters tried (at most one fewer than the images)
MAX_CLUSTERS = 8


def failure_clusters(embeddings: np.ndarray, seed: int = 0) -> tuple[np.ndarray, float | None]:
    """The hard images grouped by their clean embeddings: k-means (scikit-learn, ``n_init=10``, seeded) for every k from
    2 to ``MAX_CLUSTERS`` (and below the number of images), the k with the largest mean silhouette kept. Returns each
    image's cluster (numbered by size, largest 0) and that silhouette; fewer than three images are one cluster
    (silhouette None): a silhouette needs two clusters and an image beside another in one."""
    from sklearn.cluster import KMeans
    from sklearn.metrics import silhouette_score

    x = np.asarray(embeddings, dtype=np.float64)
    n = len(x)
    if n < 3:
        return np.zeros(n, dtype=int), None
    best: tuple[float, np.ndarray] | None = None
    for k in range(2, min(MAX_CLUSTERS, n - 1) + 1):
        labels = KMeans(n_clusters=k, n_init=10, random_state=seed).fit_predict(x)
        if len(set(labels)) < 2:
            continue
        score = float(silhouette_score(x, labels))
        if best is None or score > best[0]:
            best = (score, labels)
    if best is None:  # every image in one place: one cluster
        return np.zeros(n, dtype=int), None
    score, labels = best
    sizes = np.bincount(labels)
    order = sorted(range(len(sizes)), key=lambda c: (-sizes[c], c))
    rename = {c: k for k, c in enumerate(order)}
    return np.array([rename[c] for c in labels], dtype=int), score

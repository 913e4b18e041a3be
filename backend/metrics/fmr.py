"""SA, PA, FMR, validation rate and steps from per-image outcomes: pure functions, no models.

Per Algorithm 1 every labelled image contributes to PA: with its last accepted image, or with
the clean image where no step was accepted or the oracle rejects even the clean image. SA
and PA are therefore accuracies over the same images, and FMR = PA / SA × 100.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from domainbench.records.report import FmrModelReport, FmrOracleReport, FmrReport

if TYPE_CHECKING:
    from domainbench.records.config import FmrSettings
    from domainbench.store.records import FmrUnitRecord

#: the label ``majority`` gives when the top vote count is shared: no agreement, a rejection
TIE = -1


def majority(votes: np.ndarray, n_classes: int) -> np.ndarray:
    """Per row of (N, M) member votes: the most voted class, or TIE when several share the top count."""
    votes = np.asarray(votes, dtype=np.int64)
    if votes.ndim != 2 or votes.shape[1] == 0:
        raise ValueError(f"votes must be (images, members) with at least one member, got {votes.shape}")
    counts = np.zeros((votes.shape[0], n_classes), dtype=np.int64)
    for m in range(votes.shape[1]):
        cast = votes[:, m] >= 0  # a generative member whose answer named no class abstains
        np.add.at(counts, (np.arange(votes.shape[0])[cast], votes[cast, m]), 1)
    top = counts.max(axis=1)
    winners = (counts == top[:, None]).sum(axis=1)
    return np.where(winners == 1, counts.argmax(axis=1), TIE)


def fmr(pa: float, sa: float) -> float | None:
    """PA / SA × 100; undefined (None) when the model gets no clean image right."""
    return None if sa <= 0 else 100.0 * pa / sa


def model_report(model: str, labels: np.ndarray, clean_preds: np.ndarray, final_preds: np.ndarray,
                 steps: np.ndarray, validated: np.ndarray) -> FmrModelReport:
    labels, clean_preds, final_preds = (np.asarray(a, dtype=np.int64) for a in (labels, clean_preds, final_preds))
    n = len(labels)
    if n == 0:
        return FmrModelReport(model=model, n=0, sa=None, pa=None, fmr=None, validation_rate=None, mean_steps=None,
                              n_validated=0, n_perturbed=0)
    sa = float((clean_preds == labels).mean())
    pa = float((final_preds == labels).mean())
    steps = np.asarray(steps)
    return FmrModelReport(
        model=model, n=n, sa=sa, pa=pa, fmr=fmr(pa, sa),
        validation_rate=float((steps > 0).mean()), mean_steps=float(steps.mean()),
        n_validated=int(np.asarray(validated).sum()), n_perturbed=int((steps > 0).sum()),
    )


def fmr_report(settings: FmrSettings, classes: Sequence[str], records: Sequence[FmrUnitRecord]) -> FmrReport:
    """The run's FMR section: per tested model, and the oracle's own agreement on clean images."""
    by_model: dict[str, list[FmrUnitRecord]] = {}
    for r in sorted(records, key=lambda r: (r.model, r.shard)):
        by_model.setdefault(r.model, []).append(r)
    models = []
    for name, recs in by_model.items():
        cat = lambda f: np.concatenate([np.asarray(getattr(r, f), dtype=np.int64) for r in recs])  # noqa: E731
        models.append(model_report(name, cat("labels"), cat("clean_preds"), cat("final_preds"), cat("steps"),
                                   np.concatenate([np.asarray(r.validated, dtype=bool) for r in recs])))
    # the clean votes do not depend on the tested model: take one model's shards
    first = next(iter(by_model.values()), [])
    votes = np.concatenate([np.asarray(r.oracle_clean, dtype=np.int64).reshape(len(r.indices), -1) for r in first]) if first else None
    labels = np.concatenate([np.asarray(r.labels, dtype=np.int64) for r in first]) if first else None
    oracle = FmrOracleReport(
        members=list(settings.oracle),
        clean_agreement=None if votes is None or len(votes) == 0 else float((majority(votes, len(classes)) == labels).mean()),
        member_accuracy={m: (None if votes is None or len(votes) == 0 else float((votes[:, j] == labels).mean()))
                         for j, m in enumerate(settings.oracle)},
    )
    return FmrReport(search=settings.search, budget=settings.budget, candidates=settings.candidates,
                     step_size=settings.step_size, oracle=oracle, models=models)

"""Export rows of VQA and retrieval cells (the issue's column names), their intervals, and paired tests.

One row per model x cell. Every number comes with ``_ci_low``/``_ci_high``, chosen by the shape of its
outcomes: a rate with one binary outcome per image (text retrieval: one query per image) gets the Wilson
interval; a number averaging several outcomes of one image (questions, captions) or fractional ones (VQA
accuracy with ten references) gets the image-clustered percentile bootstrap (``stats.clustered``), so an
image's questions move together. Paired tests between two models use the same rule
(``stats.clustered.paired_p_value``), and Holm's correction runs over every cell and pair of one metric.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import combinations
from typing import Any

import numpy as np

from domainbench.metrics.retrieval import RECALL_KS, RetrievalScores
from domainbench.metrics.vqa import VQAScores
from domainbench.stats.bootstrap import DEFAULT_RESAMPLES, DEFAULT_SEED
from domainbench.stats.clustered import clustered_interval, paired_p_value, rate_interval
from domainbench.stats.intervals import DEFAULT_CONFIDENCE
from domainbench.stats.paired import holm

VQA_METRICS = ("vqa_accuracy", "yes_no_accuracy", "mc_accuracy", "answer_flip_rate", "unanswered_rate")
RETRIEVAL_METRICS = (*(f"image_retrieval_recall@{k}" for k in RECALL_KS),
                     *(f"text_retrieval_recall@{k}" for k in RECALL_KS), "top1_change_rate")


def _columns(metrics: Sequence[str]) -> tuple[str, ...]:
    return tuple(c for m in metrics for c in (m, f"{m}_ci_low", f"{m}_ci_high"))


VQA_COLUMNS = ("model", "corruption", "severity", "images", "questions", *_columns(VQA_METRICS))
RETRIEVAL_COLUMNS = ("model", "corruption", "severity", "images", "captions", *_columns(RETRIEVAL_METRICS))


def vqa_outcomes(scores: VQAScores, clusters: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per metric: (per-outcome values, their images) - what its estimate, interval and paired tests read."""
    clusters = np.asarray(clusters)
    has_ref = ~np.isnan(scores.accuracy)
    out = {
        "vqa_accuracy": (scores.accuracy[has_ref], clusters[has_ref]),
        "yes_no_accuracy": (scores.accuracy[has_ref & scores.yes_no], clusters[has_ref & scores.yes_no]),
        "mc_accuracy": (scores.accuracy[has_ref & scores.multiple_choice], clusters[has_ref & scores.multiple_choice]),
        "unanswered_rate": (scores.unanswered.astype(float), clusters),
    }
    if scores.flipped is not None:
        out["answer_flip_rate"] = (scores.flipped.astype(float), clusters)
    return out


def retrieval_outcomes(scores: RetrievalScores, clean: RetrievalScores | None) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    images = np.arange(len(scores.image_ranks))
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for k in RECALL_KS:
        captions_hit, images_hit = scores.hits(k)
        out[f"image_retrieval_recall@{k}"] = (captions_hit.astype(float), scores.caption_image)
        out[f"text_retrieval_recall@{k}"] = (images_hit.astype(float), images)
    if clean is not None:
        by_caption, by_image = scores.top1_changes(clean)
        out["top1_change_rate"] = (np.concatenate([by_caption, by_image]).astype(float),
                                   np.concatenate([scores.caption_image, images]))
    return out


def estimate(values: np.ndarray, clusters: np.ndarray, confidence: float = DEFAULT_CONFIDENCE,
             resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED) -> tuple[float | None, float | None, float | None]:
    """(mean, ci_low, ci_high) of outcomes by the module's rule; all None without outcomes."""
    v = np.asarray(values, dtype=float)
    if v.size == 0:
        return None, None, None
    binary = bool(np.all(np.isin(v, (0.0, 1.0))))
    if binary and np.unique(clusters).size == v.size:
        ci = rate_interval(v.astype(bool), confidence)
    else:
        ci = clustered_interval(v, clusters, confidence, resamples, seed)
    return float(v.mean()), *(ci if ci is not None else (None, None))


def task_row(head: dict[str, Any], outcomes: Mapping[str, tuple[np.ndarray, np.ndarray]], metrics: Sequence[str],
         confidence: float, resamples: int, seed: int) -> dict[str, Any]:
    row = dict(head)
    for m in metrics:
        values, clusters = outcomes.get(m, (np.zeros(0), np.zeros(0)))
        row[m], row[f"{m}_ci_low"], row[f"{m}_ci_high"] = estimate(values, clusters, confidence, resamples, seed)
    return row


def vqa_row(model: str, corruption: str, severity: int, scores: VQAScores, clusters: np.ndarray,
            confidence: float = DEFAULT_CONFIDENCE, resamples: int = DEFAULT_RESAMPLES,
            seed: int = DEFAULT_SEED) -> dict[str, Any]:
    """One export row (``VQA_COLUMNS``); a number that does not apply (no references, the clean cell's flips)
    is None, never 0."""
    head = {"model": model, "corruption": corruption, "severity": severity,
            "images": int(np.unique(clusters).size), "questions": int(scores.accuracy.size)}
    return task_row(head, vqa_outcomes(scores, clusters), VQA_METRICS, confidence, resamples, seed)


def retrieval_row(model: str, corruption: str, severity: int, scores: RetrievalScores,
                  clean: RetrievalScores | None, confidence: float = DEFAULT_CONFIDENCE,
                  resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED) -> dict[str, Any]:
    head = {"model": model, "corruption": corruption, "severity": severity,
            "images": int(scores.image_ranks.size), "captions": int(scores.caption_ranks.size)}
    return task_row(head, retrieval_outcomes(scores, clean), RETRIEVAL_METRICS, confidence, resamples, seed)


def paired_tests(outcomes: Mapping[tuple[str, str, int], Mapping[str, tuple[np.ndarray, np.ndarray]]],
                 metric: str) -> list[dict[str, Any]]:
    """Every pair of models on every cell for ``metric``: the difference, its p-value and Holm's p.

    ``outcomes[(model, corruption, severity)]`` is a ``vqa_outcomes``/``retrieval_outcomes`` mapping; two models
    of one cell answered the same questions in the same order (the same manifest), so outcomes pair by position.
    """
    cells = sorted({(c, s) for _, c, s in outcomes})
    models = sorted({m for m, _, _ in outcomes})
    rows: list[dict[str, Any]] = []
    for corruption, severity in cells:
        for a, b in combinations(models, 2):
            ka, kb = (a, corruption, severity), (b, corruption, severity)
            if ka not in outcomes or kb not in outcomes or metric not in outcomes[ka] or metric not in outcomes[kb]:
                continue
            (va, ca), (vb, cb) = outcomes[ka][metric], outcomes[kb][metric]
            if va.shape != vb.shape or not np.array_equal(ca, cb):
                raise ValueError(f"{a} and {b} were not scored on the same outcomes of {corruption}/{severity}")
            if va.size == 0:
                continue
            rows.append({"metric": metric, "corruption": corruption, "severity": severity, "a": a, "b": b,
                         "difference": float(va.mean() - vb.mean()), "p": paired_p_value(va, vb, ca)})
    for row, adjusted in zip(rows, holm([r["p"] for r in rows])):
        row["p_holm"] = adjusted
    return rows


__all__ = [
    "RETRIEVAL_COLUMNS",
    "RETRIEVAL_METRICS",
    "VQA_COLUMNS",
    "VQA_METRICS",
    "estimate",
    "paired_tests",
    "retrieval_outcomes",
    "retrieval_row",
    "task_row",
    "vqa_outcomes",
    "vqa_row",
]

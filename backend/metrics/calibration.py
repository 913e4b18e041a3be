"""Calibration under corruption: expected calibration error and negative log-likelihood.

A model can keep its top-1 accuracy while its confidence stops meaning anything; users who reject
predictions below a confidence threshold need to know that. Per cell and model:

- ECE: the softmax over the label set at the model's own logit scale; each labelled image falls in
  one of 15 equal-width bins of its top-1 confidence (bin b holds [b/15, (b+1)/15), a confidence of
  exactly 1 the last bin: torchmetrics' ``MulticlassCalibrationError(n_bins=15, norm="l1")``
  binning); ECE = Σ_b (n_b / N) |accuracy_b − mean confidence_b|.
- NLL: the mean over labelled images of −log softmax(logits)[true class].

Both are kept as fixed-point integer sums (:class:`CalibrationCounts`): shards and resumed units
merge by exact addition, whatever the shard size.
Unlabelled images (label < 0) are left out: without a label there is no correctness to calibrate.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.special import logsumexp

from domainbench.records.unit_sums import CONFIDENCE_SCALE, N_BINS, NLL_SCALE, CalibrationCounts, fixed_point

def bin_of(confidence: np.ndarray) -> np.ndarray:
    """The bin of each top-1 confidence (torch.bucketize(right=True) over 16 equal edges, 1.0 in the last)."""
    edges = np.linspace(0.0, 1.0, N_BINS + 1)
    return np.clip(np.searchsorted(edges, confidence, side="right") - 1, 0, N_BINS - 1)


def calibration_counts(logits: Any, labels: np.ndarray, preds: np.ndarray | None = None) -> CalibrationCounts:
    """The sums of one batch: ``logits`` (N, K) at the model's logit scale (an array or a tensor),
    ``labels`` (N,) with -1 = unlabelled; ``preds``, where given, are the predictions correctness
    is judged by (the engine's argmax of the unscaled similarities, which can break an exact tie
    in the scaled logits differently)."""
    z = np.asarray(logits.detach().cpu() if hasattr(logits, "detach") else logits, dtype=np.float64)
    y = np.asarray(labels, dtype=np.int64)
    keep = y >= 0
    if not keep.any():
        return CalibrationCounts()
    z, y = z[keep], y[keep]
    logp = z - logsumexp(z, axis=1, keepdims=True)
    pred = logp.argmax(axis=1) if preds is None else np.asarray(preds, dtype=np.int64)[keep]
    confidence = np.exp(logp.max(axis=1))
    correct = pred == y
    bins = bin_of(confidence)
    nll = -logp[np.arange(len(y)), y]
    # a true class scored -inf (a choice-mode letter missing from the top log-probabilities) has an unknown,
    # unbounded NLL: counted apart, never cast to int64 (inf would wrap to a huge negative sum)
    finite = np.isfinite(nll)

    def per_bin(values: np.ndarray) -> list[int]:
        acc = np.zeros(N_BINS, dtype=np.int64)
        np.add.at(acc, bins, values)
        return acc.tolist()

    return CalibrationCounts(
        count=per_bin(np.ones(len(y), dtype=np.int64)),
        confidence_sum=per_bin(fixed_point(confidence, CONFIDENCE_SCALE)),
        correct=per_bin(correct.astype(np.int64)),
        nll_sum=int(fixed_point(nll[finite], NLL_SCALE).sum()),
        nll_unbounded=int((~finite).sum()),
    )

"""Calibration under corruption: expected calibration error and negative log-likelihood.

A model can keep its top-1 accuracy while its confidence stops meaning anything; users who reject
predictions below a confidence threshold need to know that. Per cell and model:

- ECE: the softmax over the label set at the model's own logit scale; each labelled image falls in
  one of 15 equal-width bins of its top-1 confidence (bin b holds [b/15, (b+1)/15), a confidence of
  exactly 1 the last bin: torchmetrics' ``MulticlassCalibrationError(n_bins=15, norm="l1")``
  binning); ECE = Σ_b (n_b / N) |accuracy_b − mean confidence_b|.
- NLL: the mean over labelled images of −log softmax(logits)[true class].

Both are kept as sums (:class:`CalibrationCounts`): shards and resumed units merge by addition.
Unlabelled images (label < 0) are left out: without a label there is no correctness to calibrate.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

N_BINS = 15


def _zeros() -> np.ndarray:
    return np.zeros(N_BINS, dtype=np.float64)


@dataclass(frozen=True)
class CalibrationCounts:
    """Per-bin image counts, confidence sums and correct counts, plus the NLL sum, over labelled images."""

    count: np.ndarray = field(default_factory=_zeros)
    confidence_sum: np.ndarray = field(default_factory=_zeros)
    correct: np.ndarray = field(default_factory=_zeros)
    nll_sum: float = 0.0

    def __add__(self, other: CalibrationCounts) -> CalibrationCounts:
        return CalibrationCounts(self.count + other.count, self.confidence_sum + other.confidence_sum,
                                 self.correct + other.correct, self.nll_sum + other.nll_sum)

    @property
    def n(self) -> int:
        return int(self.count.sum())

    @property
    def ece(self) -> float | None:
        n = self.count.sum()
        if n == 0:
            return None
        return float(np.abs(self.correct - self.confidence_sum).sum() / n)

    @property
    def nll(self) -> float | None:
        n = self.count.sum()
        return float(self.nll_sum / n) if n else None

    def to_dict(self) -> dict[str, list[float] | float]:
        return {"count": self.count.tolist(), "confidence_sum": self.confidence_sum.tolist(),
                "correct": self.correct.tolist(), "nll_sum": self.nll_sum}

    @classmethod
    def from_dict(cls, d: dict | None) -> CalibrationCounts:
        if not d:
            return cls()
        return cls(np.asarray(d["count"], dtype=np.float64), np.asarray(d["confidence_sum"], dtype=np.float64),
                   np.asarray(d["correct"], dtype=np.float64), float(d["nll_sum"]))


def bin_of(confidence: np.ndarray) -> np.ndarray:
    """The bin of each top-1 confidence (torch.bucketize(right=True) over 16 equal edges, 1.0 in the last)."""
    edges = np.linspace(0.0, 1.0, N_BINS + 1)
    return np.clip(np.searchsorted(edges, confidence, side="right") - 1, 0, N_BINS - 1)


def calibration_counts(logits: np.ndarray | torch.Tensor, labels: np.ndarray) -> CalibrationCounts:
    """The sums of one batch: ``logits`` (N, K) at the model's logit scale, ``labels`` (N,) with -1 = unlabelled."""
    z = torch.as_tensor(logits).detach().to("cpu", torch.float64)
    y = np.asarray(labels, dtype=np.int64)
    keep = y >= 0
    if not keep.any():
        return CalibrationCounts()
    z, y = z[torch.from_numpy(keep)], y[keep]
    logp = torch.log_softmax(z, dim=1)
    top_logp, pred = logp.max(dim=1)
    confidence = top_logp.exp().numpy()
    correct = (pred.numpy() == y).astype(np.float64)
    bins = bin_of(confidence)
    nll = -logp[torch.arange(len(y)), torch.from_numpy(y)]
    return CalibrationCounts(
        np.bincount(bins, minlength=N_BINS).astype(np.float64),
        np.bincount(bins, weights=confidence, minlength=N_BINS),
        np.bincount(bins, weights=correct, minlength=N_BINS),
        float(nll.sum()),
    )

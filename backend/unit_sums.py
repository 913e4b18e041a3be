"""Mergeable per-unit sums beside the confusion counts: calibration bins and damage (SSIM, MSE).

Plain typed data on the records floor (a stored unit and a cell summary hold them); the metrics
that measure them are :mod:`domainbench.metrics.calibration` and :mod:`domainbench.metrics.damage`.
Every field is a sum, so shards, resumed units and cells merge by addition.
"""

from __future__ import annotations

import math

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

N_BINS = 15


def _zeros() -> list[float]:
    return [0.0] * N_BINS


class CalibrationCounts(BaseModel):
    """Per-bin image counts, confidence sums and correct counts, plus the NLL sum, over labelled images.

    Stored with each unit (plain lists of 15 numbers); shards and cells merge by addition.
    """

    model_config = ConfigDict(frozen=True)

    count: list[float] = Field(default_factory=_zeros)
    confidence_sum: list[float] = Field(default_factory=_zeros)
    correct: list[float] = Field(default_factory=_zeros)
    nll_sum: float = 0.0

    def __add__(self, other: CalibrationCounts) -> CalibrationCounts:
        add = lambda a, b: (np.asarray(a) + np.asarray(b)).tolist()  # noqa: E731
        return CalibrationCounts(count=add(self.count, other.count),
                                 confidence_sum=add(self.confidence_sum, other.confidence_sum),
                                 correct=add(self.correct, other.correct), nll_sum=self.nll_sum + other.nll_sum)

    @property
    def n(self) -> int:
        return int(sum(self.count))

    @property
    def ece(self) -> float | None:
        n = sum(self.count)
        if n == 0:
            return None
        return float(np.abs(np.asarray(self.correct) - np.asarray(self.confidence_sum)).sum() / n)

    @property
    def nll(self) -> float | None:
        n = sum(self.count)
        return float(self.nll_sum / n) if n else None

    def bins(self) -> list[tuple[float, float | None, float | None, int]]:
        """Per bin: its centre, accuracy and mean confidence (None when empty), and count (a reliability diagram)."""
        return [((b + 0.5) / N_BINS, self.correct[b] / c if c else None, self.confidence_sum[b] / c if c else None,
                 int(c)) for b, c in enumerate(self.count)]


#: uint8 pixels
DATA_RANGE = 255.0


class DamageSums(BaseModel):
    """Mergeable sums over a cell's images: ΣSSIM, Σ(per-image MSE) and the image count."""

    model_config = ConfigDict(frozen=True)

    ssim_sum: float = 0.0
    mse_sum: float = 0.0
    n: int = 0

    def __add__(self, other: DamageSums) -> DamageSums:
        return DamageSums(ssim_sum=self.ssim_sum + other.ssim_sum, mse_sum=self.mse_sum + other.mse_sum,
                          n=self.n + other.n)

    @property
    def ssim(self) -> float | None:
        return self.ssim_sum / self.n if self.n else None

    @property
    def psnr_db(self) -> float | None:
        """PSNR of the pooled MSE; ``None`` when undefined (no images, or identical pixels: +inf)."""
        if not self.n or self.mse_sum <= 0.0:
            return None
        return 10.0 * math.log10(DATA_RANGE**2 / (self.mse_sum / self.n))

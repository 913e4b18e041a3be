"""Mergeable per-unit sums beside the confusion counts: calibration bins and damage (SSIM, MSE).

Plain typed data on the records floor (a stored unit and a cell summary hold them); the metrics
that measure them are :mod:`domainbench.metrics.calibration` and :mod:`domainbench.metrics.damage`.

Every sum is an integer in fixed point (a float sum depends on the order of its terms, so a run
split into other shards, or resumed, would report other last digits): each image's value is
rounded once to a multiple of its field's resolution, and shards and cells merge by exact integer
addition. The resolutions (2⁻³² for confidences and SSIM, 2⁻²⁴ nats for NLL, 2⁻¹⁶ for squared
pixel errors) are far below what any reported digit shows, and int64 holds the sums of billions
of images.
"""

from __future__ import annotations

import math

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

N_BINS = 15
#: fixed-point scales: stored integer = round(value × scale)
CONFIDENCE_SCALE = 2**32
NLL_SCALE = 2**24
SSIM_SCALE = 2**32
MSE_SCALE = 2**16
#: uint8 pixels
DATA_RANGE = 255.0


def fixed_point(values: np.ndarray, scale: int) -> np.ndarray:
    """Each value rounded to the nearest multiple of 1/scale, as int64 multiples."""
    return np.rint(np.asarray(values, dtype=np.float64) * scale).astype(np.int64)


def _zeros() -> list[int]:
    return [0] * N_BINS


def _add(a: list[int], b: list[int]) -> list[int]:
    return [x + y for x, y in zip(a, b)]


class CalibrationCounts(BaseModel):
    """Per bin of top-1 confidence: labelled images, their confidence sum and how many were right;
    and the sum of the true class's negative log-likelihood. Merges by addition."""

    model_config = ConfigDict(frozen=True)

    count: list[int] = Field(default_factory=_zeros)
    #: in units of 1 / CONFIDENCE_SCALE
    confidence_sum: list[int] = Field(default_factory=_zeros)
    correct: list[int] = Field(default_factory=_zeros)
    #: in units of 1 / NLL_SCALE nats, over the images whose true class has a finite score
    nll_sum: int = 0
    #: labelled images whose true class scored −inf (a generative model's choice-mode letter absent from the
    #: returned top log-probabilities): their likelihood is unknown, so the cell's NLL is unbounded and not reported;
    #: left out of a dump while 0
    nll_unbounded: int = Field(default=0, ge=0, exclude_if=lambda v: not v)

    def __add__(self, other: CalibrationCounts) -> CalibrationCounts:
        return CalibrationCounts(count=_add(self.count, other.count),
                                 confidence_sum=_add(self.confidence_sum, other.confidence_sum),
                                 correct=_add(self.correct, other.correct), nll_sum=self.nll_sum + other.nll_sum,
                                 nll_unbounded=self.nll_unbounded + other.nll_unbounded)

    @property
    def n(self) -> int:
        return sum(self.count)

    @property
    def ece(self) -> float | None:
        """Σ_b |correct_b − confidence_b| / n over the 15 bins; None without labelled images."""
        if not self.n:
            return None
        gap = sum(abs(c * CONFIDENCE_SCALE - s) for c, s in zip(self.correct, self.confidence_sum))
        return gap / CONFIDENCE_SCALE / self.n

    @property
    def nll(self) -> float | None:
        """The mean NLL; None without labelled images, or when some image's true class had no score (unbounded)."""
        if not self.n or self.nll_unbounded:
            return None
        return self.nll_sum / NLL_SCALE / self.n

    def bins(self) -> list[tuple[float, float | None, float | None, int]]:
        """Per bin: its centre, accuracy and mean confidence (None when empty), and count (a reliability diagram)."""
        return [((b + 0.5) / N_BINS, self.correct[b] / c if c else None,
                 self.confidence_sum[b] / CONFIDENCE_SCALE / c if c else None, c) for b, c in enumerate(self.count)]


class DamageSums(BaseModel):
    """A cell's corrupted images against their clean ones: ΣSSIM and Σ(per-image MSE), and the count."""

    model_config = ConfigDict(frozen=True)

    #: in units of 1 / SSIM_SCALE
    ssim_sum: int = 0
    #: in units of 1 / MSE_SCALE (squared uint8 levels)
    mse_sum: int = 0
    n: int = 0

    def __add__(self, other: DamageSums) -> DamageSums:
        return DamageSums(ssim_sum=self.ssim_sum + other.ssim_sum, mse_sum=self.mse_sum + other.mse_sum,
                          n=self.n + other.n)

    @property
    def ssim(self) -> float | None:
        return self.ssim_sum / SSIM_SCALE / self.n if self.n else None

    @property
    def psnr_db(self) -> float | None:
        """PSNR of the pooled MSE; ``None`` when undefined (no images, or identical pixels: +inf)."""
        if not self.n or self.mse_sum <= 0:
            return None
        return 10.0 * math.log10(DATA_RANGE**2 / (self.mse_sum / MSE_SCALE / self.n))

"""The per-cell damage sums (SSIM, MSE, images) as stored with each unit; light to import (no torch).

See :mod:`domainbench.metrics.damage` for how they are measured.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict

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

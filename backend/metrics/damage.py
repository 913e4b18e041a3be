"""Damage on a common scale: SSIM and PSNR between the clean and the corrupted pixels a cell evaluated.

Severity numbers are not comparable across corruptions (at severity 3 gaussian_noise keeps a mean
SSIM of 0.30 on photos, jpeg_compression 0.86), so every cell also says how much it damaged the
images it evaluated, measured on the same pixels the models saw.

- SSIM (Wang et al. 2004) on luminance, exactly as scikit-image's
  ``structural_similarity(clean_y, corrupted_y, gaussian_weights=True, sigma=1.5,
  use_sample_covariance=False, data_range=255)``: an 11-tap Gaussian window (σ = 1.5, truncated at
  3.5 σ as ``scipy.ndimage.gaussian_filter``), borders reflected half-sample (ndimage's "reflect"),
  the SSIM map averaged after cropping 5 pixels at each side. Luminance is ITU-R BT.601
  (0.299 R + 0.587 G + 0.114 B) in float64, unrounded; a greyscale image is its own luminance.
- PSNR in dB over all pixels and channels of the cell: 10 log10(255² / MSE), MSE pooled over the
  cell's images (so an identity cell has PSNR +inf, reported as undefined/"∞").

The per-image work is batched torch in float64 on whatever device holds the pixels (the device
corruption path keeps them on the GPU). Results are sums (:class:`DamageSums`) so shards merge by
addition, like the other per-unit counts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

SSIM_SIGMA = 1.5
#: scipy.ndimage.gaussian_filter's default truncation, which scikit-image uses
SSIM_TRUNCATE = 3.5
SSIM_RADIUS = int(SSIM_TRUNCATE * SSIM_SIGMA + 0.5)
DATA_RANGE = 255.0
_K1, _K2 = 0.01, 0.03
#: BT.601 luma weights (PIL's "L" conversion, unrounded)
LUMA = (0.299, 0.587, 0.114)
#: images per SSIM batch: a few float64 maps of this many images stay within tens of MB at 224 px
_CHUNK = 32


@dataclass(frozen=True)
class DamageSums:
    """Mergeable sums over a cell's images: ΣSSIM, Σ(per-image MSE) and the image count."""

    ssim_sum: float = 0.0
    mse_sum: float = 0.0
    n: int = 0

    def __add__(self, other: DamageSums) -> DamageSums:
        return DamageSums(self.ssim_sum + other.ssim_sum, self.mse_sum + other.mse_sum, self.n + other.n)

    @property
    def ssim(self) -> float | None:
        return self.ssim_sum / self.n if self.n else None

    @property
    def psnr_db(self) -> float | None:
        """PSNR of the pooled MSE; ``None`` when undefined (no images, or identical pixels: +inf)."""
        if not self.n or self.mse_sum <= 0.0:
            return None
        return 10.0 * math.log10(DATA_RANGE**2 / (self.mse_sum / self.n))

    def to_dict(self) -> dict[str, float | int]:
        return {"ssim_sum": self.ssim_sum, "mse_sum": self.mse_sum, "n": self.n}

    @classmethod
    def from_dict(cls, d: dict | None) -> DamageSums:
        if not d:
            return cls()
        return cls(float(d["ssim_sum"]), float(d["mse_sum"]), int(d["n"]))


def _as_nhwc(images: np.ndarray | torch.Tensor) -> torch.Tensor:
    t = torch.from_numpy(np.ascontiguousarray(images)) if isinstance(images, np.ndarray) else images
    if t.dtype != torch.uint8:
        raise TypeError(f"damage expects uint8 pixels, got {t.dtype}")
    if t.ndim == 3:  # (N, H, W) greyscale
        t = t[..., None]
    if t.ndim != 4:
        raise ValueError(f"damage expects (N, H, W[, C]) images, got shape {tuple(t.shape)}")
    return t


def luminance(images: torch.Tensor) -> torch.Tensor:
    """(N, H, W) float64 luminance of (N, H, W, C) uint8 images (C = 1 or 3)."""
    x = images.to(torch.float64)
    if x.shape[-1] == 1:
        return x[..., 0]
    w = torch.tensor(LUMA, dtype=torch.float64, device=x.device)
    return (x[..., :3] * w).sum(-1)


def _gaussian_taps(device: torch.device) -> torch.Tensor:
    x = torch.arange(-SSIM_RADIUS, SSIM_RADIUS + 1, dtype=torch.float64, device=device)
    k = torch.exp(-0.5 * (x / SSIM_SIGMA) ** 2)
    return k / k.sum()


def _reflect_index(n: int, r: int, device: torch.device) -> torch.Tensor:
    """Indices of a length-n axis padded by r on each side, reflected half-sample (d c b a | a b c d)."""
    i = torch.arange(-r, n + r, device=device)
    period = 2 * n
    i = torch.remainder(i, period)
    return torch.where(i >= n, period - 1 - i, i)


def _blur(x: torch.Tensor, taps: torch.Tensor) -> torch.Tensor:
    """Separable Gaussian filter of (M, H, W) maps with ndimage's "reflect" borders, same size out."""
    _, h, w = x.shape
    r = SSIM_RADIUS
    k = len(taps)
    xp = x.index_select(1, _reflect_index(h, r, x.device))
    x = sum(taps[j] * xp[:, j : j + h, :] for j in range(k))
    xp = x.index_select(2, _reflect_index(w, r, x.device))
    return sum(taps[j] * xp[:, :, j : j + w] for j in range(k))


def ssim_per_image(clean: np.ndarray | torch.Tensor, corrupted: np.ndarray | torch.Tensor) -> torch.Tensor:
    """(N,) float64 mean SSIM of each corrupted image against its clean image, on luminance."""
    a, b = _as_nhwc(clean), _as_nhwc(corrupted)
    if a.shape != b.shape:
        raise ValueError(f"clean {tuple(a.shape)} and corrupted {tuple(b.shape)} images differ in shape")
    n, h, w, _ = a.shape
    if min(h, w) < 2 * SSIM_RADIUS + 1:
        raise ValueError(f"SSIM needs images of at least {2 * SSIM_RADIUS + 1} px a side, got {h} x {w}")
    taps = _gaussian_taps(a.device)
    c1, c2 = (_K1 * DATA_RANGE) ** 2, (_K2 * DATA_RANGE) ** 2
    out = []
    for i in range(0, n, _CHUNK):
        x, y = luminance(a[i : i + _CHUNK]), luminance(b[i : i + _CHUNK])
        m = len(x)
        # one blur over the five maps: ux, uy, uxx, uyy, uxy
        blurred = _blur(torch.cat([x, y, x * x, y * y, x * y]), taps)
        ux, uy, uxx, uyy, uxy = blurred.split(m)
        vx, vy, vxy = uxx - ux * ux, uyy - uy * uy, uxy - ux * uy
        s = ((2 * ux * uy + c1) * (2 * vxy + c2)) / ((ux * ux + uy * uy + c1) * (vx + vy + c2))
        r = SSIM_RADIUS
        out.append(s[:, r : h - r, r : w - r].mean(dim=(1, 2)))
    return torch.cat(out) if out else torch.zeros(0, dtype=torch.float64)


def mse_per_image(clean: np.ndarray | torch.Tensor, corrupted: np.ndarray | torch.Tensor) -> torch.Tensor:
    """(N,) float64 mean squared pixel error over all pixels and channels of each image."""
    a, b = _as_nhwc(clean), _as_nhwc(corrupted)
    d = a.to(torch.float64) - b.to(torch.float64)
    return (d * d).mean(dim=(1, 2, 3))


def damage_sums(clean: np.ndarray | torch.Tensor, corrupted: np.ndarray | torch.Tensor) -> DamageSums:
    """The mergeable SSIM/MSE sums of one batch of (clean, corrupted) uint8 images."""
    ssim = ssim_per_image(clean, corrupted)
    mse = mse_per_image(clean, corrupted)
    return DamageSums(float(ssim.sum()), float(mse.sum()), int(len(ssim)))

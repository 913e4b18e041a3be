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

The work is batched, in float64, where the pixels are: scipy's Gaussian filter on the CPU, torch
convolutions on the device the device-corruption path left them on. The clean side of a shard is
filtered once (:class:`SsimReference`) for all its cells. Results are fixed-point integer sums
(:class:`DamageSums`)
so shards merge by addition, like the other per-unit counts.
"""

from __future__ import annotations

import numpy as np
import torch
from scipy import ndimage

from domainbench.records.unit_sums import DATA_RANGE, MSE_SCALE, SSIM_SCALE, DamageSums, fixed_point

SSIM_SIGMA = 1.5
#: scipy.ndimage.gaussian_filter's default truncation, which scikit-image uses
SSIM_TRUNCATE = 3.5
SSIM_RADIUS = int(SSIM_TRUNCATE * SSIM_SIGMA + 0.5)
_K1, _K2 = 0.01, 0.03
#: BT.601 luma weights (PIL's "L" conversion, unrounded)
LUMA = (0.299, 0.587, 0.114)
#: images per SSIM batch: a few float64 maps of this many images stay within tens of MB at 224 px
_CHUNK = 32


def _as_nhwc(images: np.ndarray | torch.Tensor) -> torch.Tensor:
    t = torch.from_numpy(np.ascontiguousarray(images)) if isinstance(images, np.ndarray) else images
    if t.dtype != torch.uint8:
        raise TypeError(f"damage expects uint8 pixels, got {t.dtype}")
    if t.ndim == 3:  # (N, H, W) greyscale
        t = t[..., None]
    if t.ndim != 4:
        raise ValueError(f"damage expects (N, H, W[, C]) images, got shape {tuple(t.shape)}")
    return t


def luminance(images: np.ndarray | torch.Tensor) -> torch.Tensor:
    """(N, H, W) float64 luminance of (N, H, W[, C]) uint8 images (C = 1 or 3)."""
    x = _as_nhwc(images).to(torch.float64)
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


def _blur(x: torch.Tensor) -> torch.Tensor:
    """Gaussian filter of (M, H, W) float64 maps with ndimage's "reflect" borders, same size out.

    On the CPU this is ``scipy.ndimage.gaussian_filter`` itself (what scikit-image calls, and
    several times faster than a float64 convolution in torch); elsewhere a separable float64
    convolution over the reflected borders.
    """
    if x.device.type == "cpu":
        return torch.from_numpy(ndimage.gaussian_filter(x.numpy(), sigma=(0, SSIM_SIGMA, SSIM_SIGMA),
                                                        truncate=SSIM_TRUNCATE, mode="reflect"))
    return _blur_torch(x)


def _blur_torch(x: torch.Tensor) -> torch.Tensor:
    _, h, w = x.shape
    r, taps = SSIM_RADIUS, _gaussian_taps(x.device)
    xp = x.index_select(1, _reflect_index(h, r, x.device)).index_select(2, _reflect_index(w, r, x.device))
    xp = torch.nn.functional.conv2d(xp[:, None], taps.view(1, 1, -1, 1))
    return torch.nn.functional.conv2d(xp, taps.view(1, 1, 1, -1))[:, 0]


class SsimReference:
    """A clean batch's luminance and its local means and second moments, computed once.

    Every corrupted version of the batch (one per cell) is compared with the same clean maps, so
    a cell costs three filtered maps instead of five.
    """

    def __init__(self, clean: np.ndarray | torch.Tensor) -> None:
        a = _as_nhwc(clean)
        _, h, w, _ = a.shape
        if min(h, w) < 2 * SSIM_RADIUS + 1:
            raise ValueError(f"SSIM needs images of at least {2 * SSIM_RADIUS + 1} px a side, got {h} x {w}")
        self.shape = tuple(a.shape)
        self.device = a.device
        self.pixels = a
        # chunk by chunk: every step works image by image, and a whole shard's float64 temporaries
        # (the RGB copy alone is 24 bytes a pixel) were the run's largest allocation
        xs, uxs, vxs = [], [], []
        for i in range(0, len(a), _CHUNK):
            x = luminance(a[i : i + _CHUNK])
            ux, uxx = _blur(torch.cat([x, x * x])).split(len(x))
            xs.append(x)
            uxs.append(ux)
            vxs.append(uxx - ux * ux)
        empty = torch.zeros((0, h, w), dtype=torch.float64, device=a.device)
        self.x, self.ux, self.vx = (torch.cat(t) if t else empty for t in (xs, uxs, vxs))

    def ssim(self, corrupted: np.ndarray | torch.Tensor) -> torch.Tensor:
        """(n,) float64 mean SSIM of the first n clean images against ``corrupted`` (n images)."""
        b = _as_nhwc(corrupted).to(self.device)
        n = len(b)
        if tuple(b.shape[1:]) != self.shape[1:] or n > self.shape[0]:
            raise ValueError(f"clean {self.shape} and corrupted {tuple(b.shape)} images differ in shape")
        c1, c2 = (_K1 * DATA_RANGE) ** 2, (_K2 * DATA_RANGE) ** 2
        r, (h, w) = SSIM_RADIUS, self.shape[1:3]
        out = []
        for i in range(0, n, _CHUNK):
            j = min(i + _CHUNK, n)
            x, ux, vx, y = self.x[i:j], self.ux[i:j], self.vx[i:j], luminance(b[i:j])
            uy, uyy, uxy = _blur(torch.cat([y, y * y, x * y])).split(j - i)
            vy, vxy = uyy - uy * uy, uxy - ux * uy
            s = ((2 * ux * uy + c1) * (2 * vxy + c2)) / ((ux * ux + uy * uy + c1) * (vx + vy + c2))
            out.append(s[:, r : h - r, r : w - r].mean(dim=(1, 2)))
        return torch.cat(out) if out else torch.zeros(0, dtype=torch.float64)


def ssim_per_image(clean: np.ndarray | torch.Tensor, corrupted: np.ndarray | torch.Tensor) -> torch.Tensor:
    """(N,) float64 mean SSIM of each corrupted image against its clean image, on luminance."""
    a, b = _as_nhwc(clean), _as_nhwc(corrupted)
    if a.shape != b.shape:
        raise ValueError(f"clean {tuple(a.shape)} and corrupted {tuple(b.shape)} images differ in shape")
    return SsimReference(a).ssim(b)


def mse_per_image(clean: np.ndarray | torch.Tensor, corrupted: np.ndarray | torch.Tensor) -> torch.Tensor:
    """(N,) float64 mean squared pixel error over all pixels and channels of each image."""
    a, b = _as_nhwc(clean), _as_nhwc(corrupted)
    out = []
    for i in range(0, len(a), _CHUNK):  # image by image in effect: a shard's float64 copies were ~50 bytes a pixel
        d = a[i : i + _CHUNK].to(torch.float64) - b[i : i + _CHUNK].to(torch.float64)
        out.append((d * d).mean(dim=(1, 2, 3)))
    return torch.cat(out) if out else torch.zeros(0, dtype=torch.float64, device=a.device)


def damage_sums(clean: np.ndarray | torch.Tensor | SsimReference, corrupted: np.ndarray | torch.Tensor) -> DamageSums:
    """The mergeable SSIM/MSE sums of one batch of (clean, corrupted) uint8 images.

    ``clean`` may be a :class:`SsimReference` of a larger clean batch whose first images were
    corrupted (a stability subset), reused across the cells of a shard.
    """
    ref = clean if isinstance(clean, SsimReference) else SsimReference(clean)
    b = _as_nhwc(corrupted).to(ref.device)
    ssim = ref.ssim(b)
    mse = mse_per_image(ref.pixels[: len(b)], b)
    return DamageSums(ssim_sum=int(fixed_point(ssim.cpu().numpy(), SSIM_SCALE).sum()),
                      mse_sum=int(fixed_point(mse.cpu().numpy(), MSE_SCALE).sum()), n=int(len(ssim)))

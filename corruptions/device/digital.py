"""Digital family on the device: posterize, pixelate, and JPEG through torchvision's batched codec on CUDA.

There is no JPEG codec for CPU tensors that batches: on a CPU device the kernel runs the CPU
kernel image by image (same pixels, no speed-up). On CUDA, torchvision encodes and decodes the
whole batch with nvJPEG; its quantisation tables and chroma subsampling are libjpeg's, so the
result agrees with cv2's in distribution, not bit for bit. WebP has no kernel: torchvision
decodes WebP but cannot encode it, on any device.
"""

from __future__ import annotations

from functools import lru_cache

import cv2
import numpy as np
import torch

from domainbench.corruptions.device.common import DeviceBatch, empty
from domainbench.corruptions.device.registry import device_kernel
from domainbench.corruptions.kernels.digital import JpegParams, PixelateParams, PosterizeParams, jpeg_compression

#: Pillow's fixed-point resampling of 8-bit images: weights in 1/2**22
_PIL_BITS = 22


@device_kernel("posterize", exact=True, cpu_chunk=None)
def posterize(images: torch.Tensor, p: PosterizeParams, b: DeviceBatch) -> torch.Tensor:
    mask = torch.tensor((0xFF << (8 - p.bits)) & 0xFF, dtype=torch.uint8, device=images.device)
    return torch.bitwise_and(images, mask, out=empty(tuple(images.shape), torch.uint8, images.device))


@lru_cache(maxsize=64)
def _pil_box_taps(n_in: int, n_out: int) -> tuple[np.ndarray, np.ndarray]:
    """Pillow's BOX resampling of one axis (``precompute_coeffs`` + ``normalize_coeffs_8bpc``).

    Returns (n_out, taps) input indices, and per output its fixed-point weight: a box weighs
    every input it covers equally, so one integer per output (padding taps repeat an index and
    are masked by index -1).
    """
    scale = n_in / n_out
    support = 0.5 * max(scale, 1.0)
    rows: list[list[int]] = []
    for j in range(n_out):
        center = (j + 0.5) * scale
        lo = max(int(center - support + 0.5), 0)
        hi = min(int(center + support + 0.5), n_in)
        # Pillow's box filter: 1 on (-0.5, 0.5] of the input position relative to the centre
        rows.append([x for x in range(lo, hi) if -0.5 < (x - center + 0.5) / max(scale, 1.0) <= 0.5])
    taps = max(len(r) for r in rows)
    index = np.array([r + [-1] * (taps - len(r)) for r in rows], dtype=np.int64)
    weight = np.array([int(0.5 + (1.0 / len(r)) * (1 << _PIL_BITS)) for r in rows], dtype=np.int32)
    return index, weight


def _pil_box_axis(x: torch.Tensor, dim: int, n_out: int) -> torch.Tensor:
    """Pillow's 8-bit BOX downsampling of (N, H, W, C) uint8 along ``dim``, rounded to uint8 as Pillow does."""
    index, weight = _pil_box_taps(x.shape[dim], n_out)
    dev = x.device
    # per-output factors repeated over the values that follow each output in memory, so that every
    # product broadcasts along the leading dimension of a 2-D view (broadcasting inside the last
    # dimension is slow on a CPU)
    inner = x.shape[-1] if dim == 2 else 1

    def per_output(values: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
        factors = torch.from_numpy(np.repeat(values, inner)).to(dev, dtype)
        return factors[None, :, None] if dim == 1 else factors[None, :]

    # sums of at most 51 uint8 values (scale >= 0.02) fit int16; only the fixed-point product needs int32
    acc: torch.Tensor | None = None
    for col in index.T:
        # gathered as uint8 (a gather of int16 is 2x slower), widened after
        picked = _pick2d(x, dim, torch.from_numpy(np.maximum(col, 0)).to(dev)).to(torch.int16)
        if (col < 0).any():
            picked.mul_(per_output((col >= 0).astype(np.int16), torch.int16))
        acc = picked if acc is None else acc.add_(picked)
    assert acc is not None
    fixed = acc.to(torch.int32).mul_(per_output(weight, torch.int32))
    # weight * taps <= 2**22 + taps / 2, so the rounded value stays within 255 (Pillow's clip is a no-op)
    out = fixed.add_(1 << (_PIL_BITS - 1)).bitwise_right_shift_(_PIL_BITS).to(torch.uint8)
    shape = list(x.shape)
    shape[dim] = n_out
    return out.view(shape)


def _pick2d(x: torch.Tensor, dim: int, index: torch.Tensor) -> torch.Tensor:
    """``pick`` returning the 2-D view it works on: (N, rows, W * C) for rows, (N * H, columns * C) for columns."""
    n, h, w, c = x.shape
    if dim == 1:
        return x.reshape(n, h, w * c).index_select(1, index)
    flat = (index[:, None] * c + torch.arange(c, device=x.device)).view(1, -1).expand(n * h, -1)
    return torch.gather(x.reshape(n * h, w * c), 1, flat)


def pick(x: torch.Tensor, dim: int, index: torch.Tensor) -> torch.Tensor:
    """``x.index_select(dim, index)`` of contiguous (N, H, W, C), for dim 1 (rows) or 2 (columns).

    Rows are contiguous blocks, which index_select copies fast. Columns are blocks of C values,
    where index_select is slow on a CPU: they are taken as a gather of single values from the
    (N * H, W * C) view instead (measured 4x faster for uint8).
    """
    shape = list(x.shape)
    shape[dim] = len(index)
    return _pick2d(x, dim, index).view(shape)


@lru_cache(maxsize=64)
def _nearest_exact_index(n_small: int, n_big: int) -> np.ndarray:
    """Source index of each output of cv2.resize(INTER_NEAREST_EXACT) along one axis: cv2 resizing the indices themselves."""
    ramp = np.arange(n_small, dtype=np.float32)[None, :]
    return cv2.resize(ramp, (n_big, 1), interpolation=cv2.INTER_NEAREST_EXACT)[0].astype(np.int64)


@device_kernel("pixelate", exact=True, note="Pillow's BOX taps and fixed point, cv2's nearest-exact indices: gathers")
def pixelate(images: torch.Tensor, p: PixelateParams, b: DeviceBatch) -> torch.Tensor:
    n, h, w, c = images.shape
    oh, ow = max(1, int(h * p.scale)), max(1, int(w * p.scale))
    # Pillow resamples horizontally, rounds to 8 bits, then vertically
    small = _pil_box_axis(_pil_box_axis(images, 2, ow), 1, oh)
    rows = torch.from_numpy(_nearest_exact_index(oh, h)).to(images.device)
    cols = torch.from_numpy(_nearest_exact_index(ow, w)).to(images.device)
    # columns first, on the small image; then whole rows
    return pick(pick(small, 2, cols), 1, rows)


def torchvision_jpeg(images: torch.Tensor, quality: int) -> torch.Tensor:
    """Encode and decode an (N, H, W, C) uint8 batch with torchvision (batched on CUDA; also runs on CPU)."""
    from torchvision.io import ImageReadMode, decode_jpeg, encode_jpeg

    chw = list(images.permute(0, 3, 1, 2).contiguous().unbind(0))
    encoded = encode_jpeg(chw, quality=quality)
    mode = ImageReadMode.GRAY if images.shape[-1] == 1 else ImageReadMode.RGB
    decoded = decode_jpeg(encoded, mode=mode, device=images.device)
    return torch.stack(decoded).permute(0, 2, 3, 1).contiguous()


@device_kernel("jpeg_compression", exact=False, note="CUDA: torchvision/nvJPEG batch codec; CPU device: the CPU kernel per image",
               cpu_chunk=None)
def jpeg(images: torch.Tensor, p: JpegParams, b: DeviceBatch) -> torch.Tensor:
    if images.device.type == "cuda":
        return torchvision_jpeg(images, p.quality)
    host = images.numpy()
    out = np.empty(host.shape, np.uint8)
    for i, img in enumerate(host):
        # the codec draws nothing: the per-image numpy streams (0.02 ms each) are never built
        out[i] = jpeg_compression(img, p, None)  # type: ignore[arg-type]
    return torch.from_numpy(out)

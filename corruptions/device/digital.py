"""Digital family on the device: posterize, and JPEG through torchvision's batched codec on CUDA.

There is no JPEG codec for CPU tensors that batches: on a CPU device the kernel runs the CPU
kernel image by image (same pixels, no speed-up). On CUDA, torchvision encodes and decodes the
whole batch with nvJPEG; its quantisation tables and chroma subsampling are libjpeg's, so the
result agrees with cv2's in distribution, not bit for bit.
"""

from __future__ import annotations

import numpy as np
import torch

from corruptions.device.common import DeviceBatch
from corruptions.device.registry import device_kernel
from corruptions.kernels.digital import JpegParams, PosterizeParams, jpeg_compression


@device_kernel("posterize", exact=True)
def posterize(images: torch.Tensor, p: PosterizeParams, b: DeviceBatch) -> torch.Tensor:
    return images & ((0xFF << (8 - p.bits)) & 0xFF)


def torchvision_jpeg(images: torch.Tensor, quality: int) -> torch.Tensor:
    """Encode and decode an (N, H, W, C) uint8 batch with torchvision (batched on CUDA; also runs on CPU)."""
    from torchvision.io import ImageReadMode, decode_jpeg, encode_jpeg

    chw = list(images.permute(0, 3, 1, 2).contiguous().unbind(0))
    encoded = encode_jpeg(chw, quality=quality)
    mode = ImageReadMode.GRAY if images.shape[-1] == 1 else ImageReadMode.RGB
    decoded = decode_jpeg(encoded, mode=mode, device=images.device)
    return torch.stack(decoded).permute(0, 2, 3, 1).contiguous()


@device_kernel("jpeg_compression", exact=False, note="CUDA: torchvision/nvJPEG batch codec; CPU device: the CPU kernel per image")
def jpeg(images: torch.Tensor, p: JpegParams, b: DeviceBatch) -> torch.Tensor:
    if images.device.type == "cuda":
        return torchvision_jpeg(images, p.quality)
    host = images.numpy()
    out = np.stack([jpeg_compression(np.ascontiguousarray(img), p, rng) for img, rng in zip(host, b.rngs)])
    return torch.from_numpy(out)

"""Running a device kernel over a CPU tensor a few images at a time.

A batched kernel makes several passes over float intermediates of the whole batch: for 256
images at 224x224 that is 150 MB a pass, so on a CPU every pass streams from main memory. Split
into sub-batches whose intermediates fit the last-level cache, the same kernel runs 2-4 times
faster there. On a GPU the whole batch is one launch per pass, so it is left whole.
``corruptions.device.corrupt_batch`` runs every kernel through :func:`run`.
"""

from __future__ import annotations

import torch

from corruptions.device.common import DeviceBatch, empty
from corruptions.device.registry import KernelFn

#: images per sub-batch on a CPU: a 224x224 RGB image is 0.6 MB as float32, so a kernel's few live
#: intermediates of 8 images sit in a 32 MB cache (measured at batch 256: 8 to 16 beat 4 and 32)
CPU_CHUNK = 8


def run(fn: KernelFn, images: torch.Tensor, params: object, b: DeviceBatch) -> torch.Tensor:
    """``fn`` applied to sub-batches of CPU_CHUNK images when the batch is on the CPU (whole on a GPU).

    Each image keeps its own numpy stream and torch generator (seeded by its own seed), so the
    pixels and drawn values do not depend on how the batch is split.
    """
    if images.device.type != "cpu" or images.shape[0] <= CPU_CHUNK:
        return fn(images, params, b)
    out = empty(tuple(images.shape), images.dtype, images.device)  # numpy's huge pages on a CPU (see empty)
    for start in range(0, images.shape[0], CPU_CHUNK):
        part = b.part(start, start + CPU_CHUNK)
        out[start : start + CPU_CHUNK] = fn(images[start : start + CPU_CHUNK], params, part)
        b.merge(start, part)
    return out

"""Running a device kernel over a CPU tensor a few images at a time.

A batched kernel makes several passes over float intermediates of the whole batch: for 256
images at 224x224 that is 150 MB a pass, so on a CPU every pass streams from main memory. Split
into sub-batches whose intermediates fit the last-level cache, the same kernel runs 2-4 times
faster there. On a GPU the whole batch is one launch per pass, so it is left whole.
``domainbench.corruptions.device.corrupt_batch`` runs every kernel through :func:`run`.
"""

from __future__ import annotations

import torch

from domainbench.corruptions.device.common import DeviceBatch, empty
from domainbench.corruptions.device.registry import KernelFn


def run(fn: KernelFn, images: torch.Tensor, params: object, b: DeviceBatch, size: int | None) -> torch.Tensor:
    """``fn`` applied to sub-batches of ``size`` images when the batch is on the CPU (whole on a GPU,
    or when ``size`` is None).

    Each image keeps its own numpy stream and torch generator (seeded by its own seed), so the
    pixels and drawn values do not depend on how the batch is split.
    """
    if size is None or images.device.type != "cpu" or images.shape[0] <= size:
        return fn(images, params, b)
    out = empty(tuple(images.shape), images.dtype, images.device)  # numpy's huge pages on a CPU (see empty)
    for start in range(0, images.shape[0], size):
        part = b.part(start, start + size)
        out[start : start + size] = fn(images[start : start + size], params, part)
        b.merge(start, part)
    return out

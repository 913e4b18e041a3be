"""Which corruptions have a batched torch kernel, and the kernel contract.

A device kernel is ``kernel(images, params, batch) -> images``: ``images`` is an (N, H, W, C)
uint8 tensor on the target device (C = 3, or 1 when the corruption's spec is ``grayscale``),
``params`` the validated parameter model of the CPU spec (one parameter model, one ladder),
``batch`` the per-image randomness (:class:`domainbench.corruptions.device.common.DeviceBatch`). It returns
a uint8 tensor of the same shape on the same device.

``exact`` says whether the kernel reproduces the CPU kernel's pixels (up to a grey level of
rounding): true when every random value it uses is drawn from the same numpy stream as the CPU
kernel draws it; false when per-pixel fields come from a torch generator seeded with the same
per-image seed (same distribution, other values).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

KernelFn = Callable[[torch.Tensor, Any, Any], torch.Tensor]

#: modules that register device kernels on import (one per family, like corruptions.kernels)
BUILTIN_MODULES: tuple[str, ...] = tuple(
    f"domainbench.corruptions.device.{family}" for family in ("blur", "digital", "geometric", "noise", "occlusion", "photometric", "sensor", "weather")
)


#: a 224x224 RGB image is 0.6 MB as float32, so a kernel's few live intermediates of 8 images sit
#: in a 32 MB cache (measured at batch 256: 8 to 16 beat 4 and 32)
DEFAULT_CPU_CHUNK = 8


@dataclass(frozen=True)
class DeviceKernel:
    name: str
    fn: KernelFn
    exact: bool
    note: str = ""
    #: images per sub-batch on a CPU (``chunking.run``): kernels with several float passes gain 2-4x
    #: when their intermediates stay in cache; None (one cheap pass over the batch) runs it whole
    cpu_chunk: int | None = DEFAULT_CPU_CHUNK


_KERNELS: dict[str, DeviceKernel] = {}
_loaded = False


def device_kernel(name: str, *, exact: bool, note: str = "", cpu_chunk: int | None = DEFAULT_CPU_CHUNK
                  ) -> Callable[[KernelFn], KernelFn]:
    """Register ``fn`` as the device kernel of the CPU corruption ``name``."""

    def decorator(fn: KernelFn) -> KernelFn:
        if name in _KERNELS:
            raise ValueError(f"device kernel for {name!r} registered twice")
        _KERNELS[name] = DeviceKernel(name, fn, exact, note, cpu_chunk)
        return fn

    return decorator


def _load() -> None:
    global _loaded
    if not _loaded:
        # marked loaded only once every module imported: a failed import is retried (and raised) on
        # the next call instead of leaving a silently partial registry
        for module in BUILTIN_MODULES:
            importlib.import_module(module)
        _loaded = True


def kernels() -> dict[str, DeviceKernel]:
    _load()
    return dict(_KERNELS)


def names() -> list[str]:
    return sorted(kernels())


def has_kernel(name: str) -> bool:
    return name in kernels()


def get_kernel(name: str) -> DeviceKernel:
    found = kernels().get(name)
    if found is None:
        from domainbench.corruptions.errors import CorruptionError

        raise CorruptionError(f"corruption {name!r} has no device kernel; device kernels exist for: {', '.join(names())}")
    return found

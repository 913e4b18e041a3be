"""Batched torch versions of the corruptions, for corrupting on the device the model runs on.

Imported only when used (it imports torch); ``corruptions`` itself never imports it. Same
names, parameter models, ladders and per-image seeds as the CPU kernels::

    from domainbench.corruptions import device
    device.has_kernel("gaussian_noise")
    out = device.corrupt_batch(images, "gaussian_noise", severity=3, seeds=seeds, device="cuda")

``images`` is an (N, H, W[, C]) uint8 numpy array or tensor; the result is a uint8 tensor of
the same shape on ``device``. See ``domainbench.corruptions.device.registry`` for the kernel contract and
which kernels reproduce the CPU pixels exactly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from domainbench.corruptions import compose
from domainbench.corruptions.api import MIN_SIDE, Drawn, _check_image, _fixed_per_image, _resolve
from domainbench.corruptions.errors import CorruptionError
from domainbench.corruptions.registry import get
from domainbench.corruptions.seeding import batch_seeds
from domainbench.corruptions.device import chunking
from domainbench.corruptions.device.common import DeviceBatch, rgb_to_grey
from domainbench.corruptions.device.registry import DeviceKernel, get_kernel, has_kernel, kernels, names


def _check_tensor(images: torch.Tensor) -> None:
    """The checks ``corrupt_batch`` makes on numpy input, for a tensor (without copying it to the host)."""
    if images.dtype != torch.uint8:
        raise CorruptionError(f"images must have dtype uint8, got {images.dtype}")
    if images.ndim not in (3, 4) or (images.ndim == 4 and images.shape[-1] not in (1, 3)):
        raise CorruptionError(f"images must have shape (N, H, W) or (N, H, W, C) with C in {{1, 3}}, got {tuple(images.shape)}")
    if images.shape[0] == 0 or min(images.shape[1], images.shape[2]) < MIN_SIDE:
        raise CorruptionError(f"images are {tuple(images.shape)}; corruptions need a non-empty batch of at least {MIN_SIDE}x{MIN_SIDE} pixels")


def corrupt_batch(
    images: np.ndarray | torch.Tensor,
    name: str,
    severity: int | None = None,
    params: Mapping[str, Any] | None = None,
    seeds: int | Sequence[int] | np.ndarray = 0,
    device: str | torch.device | None = None,
    return_drawn: bool = False,
    drawn: Mapping[str, Sequence[Any]] | None = None,
) -> torch.Tensor | tuple[torch.Tensor, Drawn]:
    """``corruptions.corrupt_batch`` on ``device`` (default: the tensor's device, or CPU for numpy input)."""
    spec = get(name)
    kernel = get_kernel(spec.name)
    resolved = _resolve(spec, severity, params)
    shape = tuple(images.shape)
    if isinstance(images, torch.Tensor):
        _check_tensor(images)
        dev = torch.device(device) if device is not None else images.device
        x = images.to(dev)
        x = x[..., None] if x.ndim == 3 else x
    else:
        dev = torch.device(device) if device is not None else torch.device("cpu")
        host = _check_image(images, "images", batch=True)
        # kernels never write into their input, but torch warns about read-only arrays: copy those
        x = torch.from_numpy(host if host.flags.writeable else host.copy()).to(dev)
    per_image = batch_seeds(seeds, x.shape[0])
    model = spec.params_model.model_validate(resolved)
    batch = DeviceBatch(per_image, _fixed_per_image(spec, drawn, len(per_image)), dev)
    grey_via_rgb = x.shape[-1] == 1 and not spec.grayscale
    work = x.expand(*x.shape[:-1], 3).contiguous() if grey_via_rgb else x.contiguous()
    out = chunking.run(kernel.fn, work, model, batch, kernel.cpu_chunk)
    if out.shape != work.shape or out.dtype != torch.uint8:
        raise RuntimeError(f"device kernel of {spec.name!r} returned {tuple(out.shape)} {out.dtype}, expected {tuple(work.shape)} uint8")
    if grey_via_rgb:
        out = rgb_to_grey(out)
    out = out.reshape(shape)
    records = batch.drawn()
    keys = sorted({k for record in records for k in record})
    undeclared = sorted(set(keys) - set(spec.draws))
    if undeclared:
        raise RuntimeError(f"device kernel of {spec.name!r} recorded {undeclared} but its spec declares draws {sorted(spec.draws)}")
    if not return_drawn:
        return out
    return out, {k: [record.get(k) for record in records] for k in keys}


def has_kernels(steps: Sequence[tuple[str, int]]) -> bool:
    """Whether every step of a composition has a device kernel (only then does it run on the device)."""
    return bool(steps) and all(has_kernel(name) for name, _ in steps)


def corrupt_composed(images: np.ndarray | torch.Tensor, steps: Sequence[tuple[str, int]], seeds: Sequence[int],
                     device: str | torch.device | None = None) -> tuple[torch.Tensor, list[Drawn]]:
    """``corruptions.corrupt_composed`` with each step's torch kernel on ``device``: the same steps, order
    and per-step seeds; the images stay on the device between steps."""
    def step(x: np.ndarray | torch.Tensor, name: str, **kw: Any) -> tuple[torch.Tensor, Drawn]:
        return corrupt_batch(x, name, device=device, **kw)  # type: ignore[return-value]

    return compose.corrupt_composed(images, steps, seeds, corrupt=step)


__all__ = ["CorruptionError", "DeviceKernel", "corrupt_batch", "corrupt_composed", "get_kernel", "has_kernel",
           "has_kernels", "kernels", "names"]

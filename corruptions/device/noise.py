"""Noise family on the device: the same formulas as corruptions.kernels.noise, per-pixel draws from torch generators."""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch
from scipy.stats import poisson

from domainbench.corruptions.device.common import DeviceBatch, below, empty, lookup, threshold15, to_uint8
from domainbench.corruptions.device.registry import device_kernel
from domainbench.corruptions.kernels.noise import GaussianNoiseParams, ImpulseNoiseParams, SaltPepperParams, ShotNoiseParams, SpeckleNoiseParams


@device_kernel("gaussian_noise", exact=False)
def gaussian_noise(images: torch.Tensor, p: GaussianNoiseParams, b: DeviceBatch) -> torch.Tensor:
    noise = b.randn(tuple(images.shape[1:]))
    return to_uint8(noise.mul_(p.sigma * 255.0).add_(images))


#: bits of the uniform that picks a Poisson count from the table: a table of 256 x 2**14 uint8 (4 MB);
#: at 2**15 (8 MB) lookups left the cache and cost 4x more on the CPU measured
_SHOT_BITS = 14


@device_kernel("shot_noise", exact=False, note="Poisson counts by inverse CDF: a table per pixel value, 14-bit uniforms")
def shot_noise(images: torch.Tensor, p: ShotNoiseParams, b: DeviceBatch) -> torch.Tensor:
    # every pixel value has its own Poisson law, so a pixel's output is a table lookup at (value, uniform),
    # where torch.poisson samples each value by rejection (measured 25x slower on a CPU)
    table = torch.from_numpy(shot_table(float(p.photons))).to(images.device)
    index = images.to(torch.int32).bitwise_left_shift_(_SHOT_BITS)
    index.bitwise_or_(b.uniform15(tuple(images.shape[1:])).bitwise_right_shift_(15 - _SHOT_BITS))
    # an int32 index (take needs int64: 4x slower here, most of it the wider index)
    return lookup(table, index)


@lru_cache(maxsize=4)
def shot_table(photons: float) -> np.ndarray:
    """(256 * 2**_SHOT_BITS,) uint8: at ``value << _SHOT_BITS | u`` the CPU kernel's output for
    pixel ``value``, to_uint8(k * 255 / photons), with k the Poisson(value * photons / 255) count
    whose CDF first reaches (u + 0.5) / 2**_SHOT_BITS: each count has its Poisson probability to
    within 2**-_SHOT_BITS (6e-5)."""
    lam = np.arange(256) * (photons / 255.0)
    k = np.arange(int(lam[-1] + 12 * np.sqrt(lam[-1]) + 30) + 1)  # beyond: a tail far below 2**-14
    cdf = poisson.cdf(k[None, :], lam[:, None])
    levels = (np.arange(1 << _SHOT_BITS) + 0.5) / (1 << _SHOT_BITS)
    counts = np.stack([np.searchsorted(row, levels, side="left") for row in cdf])
    outputs = np.clip(np.rint(np.append(k, k[-1]) * (255.0 / photons)), 0, 255).astype(np.uint8)
    return np.ascontiguousarray(outputs[counts].reshape(-1))


@device_kernel("impulse_noise", exact=False)
def impulse_noise(images: torch.Tensor, p: ImpulseNoiseParams, b: DeviceBatch) -> torch.Tensor:
    u = b.uniform15(tuple(images.shape[1:]))
    # u < amount/2: white, amount/2 <= u < amount: black (the CPU kernel's split of the same uniform),
    # as uint8 arithmetic: x * (u >= amount) | 255 * (u < amount/2), vectorised where masked fills are not
    shape = tuple(images.shape)
    keep = torch.ge(u, threshold15(p.amount), out=empty(shape, torch.uint8, images.device))
    out = torch.mul(images, keep, out=empty(shape, torch.uint8, images.device))
    return out.bitwise_or_(torch.lt(u, threshold15(p.amount / 2), out=keep).mul_(255))


@device_kernel("speckle_noise", exact=False)
def speckle_noise(images: torch.Tensor, p: SpeckleNoiseParams, b: DeviceBatch) -> torch.Tensor:
    noise = b.randn(tuple(images.shape[1:]))
    # x + x * noise * sigma as x * (1 + sigma * noise), in place on the noise: one float tensor, not three
    return to_uint8(noise.mul_(p.sigma).add_(1.0).mul_(images))


@device_kernel("salt_and_pepper", exact=False)
def salt_and_pepper(images: torch.Tensor, p: SaltPepperParams, b: DeviceBatch) -> torch.Tensor:
    u = b.uniform15(tuple(images.shape[1:3])).view(-1)  # one draw per pixel: all channels together
    salt = below(u, p.amount * p.salt_ratio)
    pepper = below(u, p.amount).logical_xor_(salt)  # salt is a subset of u < amount
    out = empty(tuple(images.shape), torch.uint8, images.device).copy_(images)
    # whole pixels are rows of the (pixels, C) view: filling the few hit rows by index avoids
    # broadcasting a per-pixel mask over the channels (a slow, unvectorised path on CPU)
    pixels = out.view(-1, images.shape[-1])
    pixels.index_fill_(0, salt.nonzero().view(-1), 255)
    pixels.index_fill_(0, pepper.nonzero().view(-1), 0)
    return out

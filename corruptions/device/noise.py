"""Noise family on the device: the same formulas as corruptions.kernels.noise, per-pixel draws from torch generators."""

from __future__ import annotations

import torch

from corruptions.device.common import DeviceBatch, as_float, below, empty, threshold15, to_uint8
from corruptions.device.registry import device_kernel
from corruptions.kernels.noise import GaussianNoiseParams, ImpulseNoiseParams, SaltPepperParams, ShotNoiseParams, SpeckleNoiseParams


@device_kernel("gaussian_noise", exact=False)
def gaussian_noise(images: torch.Tensor, p: GaussianNoiseParams, b: DeviceBatch) -> torch.Tensor:
    noise = b.randn(tuple(images.shape[1:]))
    return to_uint8(noise.mul_(p.sigma * 255.0).add_(images))


@device_kernel("shot_noise", exact=False)
def shot_noise(images: torch.Tensor, p: ShotNoiseParams, b: DeviceBatch) -> torch.Tensor:
    lam = as_float(images).mul_(p.photons / 255.0)
    counts = empty(tuple(lam.shape), torch.float32, lam.device)
    for i, field in enumerate(counts):
        field.copy_(torch.poisson(lam[i], generator=b.generator(i)))
    return to_uint8(counts.mul_(255.0 / p.photons))


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

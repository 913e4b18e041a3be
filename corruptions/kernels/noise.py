"""Noise family: additive, signal-dependent and impulse noise (ImageNet-C definitions)."""

from __future__ import annotations

import numpy as np
from pydantic import Field

from domainbench.corruptions.kernels._common import to_uint8
from domainbench.corruptions.spec import CorruptionSpec, Params


class GaussianNoiseParams(Params):
    sigma: float = Field(0.18, ge=0.0, le=1.0, description="noise standard deviation as a fraction of 255")


def gaussian_noise_batch(images: np.ndarray, p: GaussianNoiseParams, rngs: list[np.random.Generator]) -> np.ndarray:
    shape = images.shape[1:]
    noise = np.stack([rng.standard_normal(shape, dtype=np.float32) for rng in rngs])
    return to_uint8(images.astype(np.float32) + noise * np.float32(p.sigma * 255.0))


CORRUPTIONS: list[CorruptionSpec] = [
    CorruptionSpec(
        name="gaussian_noise",
        family="noise",
        description="Adds zero-mean Gaussian noise to every pixel, like a sensor at high gain or in poor light.",
        situations=[
            "night-time surveillance camera at high ISO",
            "low-light indoor smartphone photo",
            "portable X-ray scanner sensor noise",
            "thermal noise of a cheap webcam sensor",
            "analogue video transmission with interference",
        ],
        params_model=GaussianNoiseParams,
        ladder={1: {"sigma": 0.08}, 2: {"sigma": 0.12}, 3: {"sigma": 0.18}, 4: {"sigma": 0.26}, 5: {"sigma": 0.38}},
        ranges={"sigma": (0.02, 0.45)},
        apply_batch=gaussian_noise_batch,
        backend="numpy (ImageNet-C gaussian_noise)",
    ),
]


class ShotNoiseParams(Params):
    photons: float = Field(12.0, ge=0.5, le=1000.0, description="photon count at full white (lower = noisier)")


def shot_noise_batch(images: np.ndarray, p: ShotNoiseParams, rngs: list[np.random.Generator]) -> np.ndarray:
    lam = images.astype(np.float64) * (p.photons / 255.0)
    counts = np.stack([rng.poisson(lam[i]) for i, rng in enumerate(rngs)])
    return to_uint8(counts * (255.0 / p.photons))


class ImpulseNoiseParams(Params):
    amount: float = Field(0.09, ge=0.0, le=1.0, description="fraction of channel values replaced by 0 or 255")


def impulse_noise_batch(images: np.ndarray, p: ImpulseNoiseParams, rngs: list[np.random.Generator]) -> np.ndarray:
    u = np.stack([rng.random(images.shape[1:], dtype=np.float32) for rng in rngs])
    out = images.copy()
    half = np.float32(p.amount / 2)
    out[u < half] = 255
    out[(u >= half) & (u < np.float32(p.amount))] = 0
    return out


class SpeckleNoiseParams(Params):
    sigma: float = Field(0.35, ge=0.0, le=2.0, description="standard deviation of the multiplicative noise")


def speckle_noise_batch(images: np.ndarray, p: SpeckleNoiseParams, rngs: list[np.random.Generator]) -> np.ndarray:
    noise = np.stack([rng.standard_normal(images.shape[1:], dtype=np.float32) for rng in rngs])
    x = images.astype(np.float32)
    return to_uint8(x + x * noise * np.float32(p.sigma))


class SaltPepperParams(Params):
    amount: float = Field(0.05, ge=0.0, le=1.0, description="fraction of pixels set to black or white (all channels)")
    salt_ratio: float = Field(0.5, ge=0.0, le=1.0, description="share of white (salt) among the corrupted pixels")


def salt_and_pepper_batch(images: np.ndarray, p: SaltPepperParams, rngs: list[np.random.Generator]) -> np.ndarray:
    u = np.stack([rng.random(images.shape[1:3], dtype=np.float32) for rng in rngs])
    salt = u < np.float32(p.amount * p.salt_ratio)
    pepper = (~salt) & (u < np.float32(p.amount))
    out = images.copy()
    out[salt] = 255
    out[pepper] = 0
    return out


CORRUPTIONS += [
    CorruptionSpec(
        name="shot_noise",
        family="noise",
        description="Adds photon (Poisson) noise whose strength grows with brightness, typical of short exposures with few photons.",
        situations=[
            "astronomy or microscopy imaging with very few photons",
            "fluorescence microscope at low excitation power",
            "fast shutter sports photo under stadium lights",
            "low-dose CT or X-ray acquisition",
            "dashcam at dusk",
        ],
        params_model=ShotNoiseParams,
        ladder={1: {"photons": 60.0}, 2: {"photons": 25.0}, 3: {"photons": 12.0}, 4: {"photons": 5.0}, 5: {"photons": 3.0}},
        ranges={"photons": (100.0, 2.0)},
        apply_batch=shot_noise_batch,
        backend="numpy (ImageNet-C shot_noise)",
    ),
    CorruptionSpec(
        name="impulse_noise",
        family="noise",
        description="Replaces random individual colour values with full black or full white, as from bit errors in transmission.",
        situations=[
            "bit errors on a noisy wireless video link",
            "damaged memory card or corrupted image file",
            "radiation hits on a satellite camera sensor",
            "faulty analogue-to-digital converter",
            "old CCD with many hot pixels",
        ],
        params_model=ImpulseNoiseParams,
        ladder={1: {"amount": 0.03}, 2: {"amount": 0.06}, 3: {"amount": 0.09}, 4: {"amount": 0.17}, 5: {"amount": 0.27}},
        ranges={"amount": (0.01, 0.3)},
        apply_batch=impulse_noise_batch,
        backend="numpy (ImageNet-C impulse_noise, per channel value)",
    ),
    CorruptionSpec(
        name="speckle_noise",
        family="noise",
        description="Multiplies pixels by random noise so bright areas become grainy, as in coherent imaging such as ultrasound or radar.",
        situations=[
            "medical ultrasound scan",
            "synthetic-aperture radar satellite image",
            "laser-illuminated industrial inspection",
            "optical coherence tomography of the retina",
            "grainy high-ISO film scan",
        ],
        params_model=SpeckleNoiseParams,
        ladder={1: {"sigma": 0.15}, 2: {"sigma": 0.2}, 3: {"sigma": 0.35}, 4: {"sigma": 0.45}, 5: {"sigma": 0.6}},
        ranges={"sigma": (0.05, 0.7)},
        apply_batch=speckle_noise_batch,
        backend="numpy (ImageNet-C speckle_noise)",
    ),
    CorruptionSpec(
        name="salt_and_pepper",
        family="noise",
        description="Turns random whole pixels pure white or pure black, like dead and stuck pixels or dust on a scan.",
        situations=[
            "dust and scratches on a scanned document",
            "dead and stuck pixels on an aging camera sensor",
            "packet loss in a compressed video stream",
            "thermal camera with defective detector elements",
            "fax or photocopy of a photograph",
        ],
        params_model=SaltPepperParams,
        ladder={
            1: {"amount": 0.01}, 2: {"amount": 0.03}, 3: {"amount": 0.05}, 4: {"amount": 0.08}, 5: {"amount": 0.12},
        },
        ranges={"amount": (0.005, 0.15)},
        apply_batch=salt_and_pepper_batch,
        backend="numpy (whole-pixel salt and pepper as albumentations SaltAndPepper)",
    ),
]

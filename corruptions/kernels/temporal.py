"""Temporal corruptions: damage whose state evolves across the frames of a clip.

Clip kernels take (frames (T, H, W, 3) uint8, params, rng, fps) and return new frames of the
same shape (see ``domainbench.corruptions.spec``); one generator per clip, so a trajectory, a
flicker phase or a drop pattern is drawn once and followed frame after frame.
"""

from __future__ import annotations

import math

import numpy as np
from pydantic import Field, field_validator

from domainbench.corruptions.draws import record
from domainbench.corruptions.kernels._common import to_uint8
from domainbench.corruptions.spec import CorruptionSpec, Params

#: mains frequencies of the world's grids; a lamp on mains pulses at twice the mains frequency
MAINS_HZ: tuple[float, float] = (50.0, 60.0)


def beat_hz(light_hz: float, fps: float) -> float:
    """The frequency (Hz, in [0, fps / 2]) at which a light pulsing at ``light_hz`` appears in frames taken at ``fps``.

    Sampling folds ``light_hz`` onto its alias: the distance to the nearest multiple of ``fps``.
    """
    r = math.fmod(light_hz, fps)
    return min(r, fps - r)


def mains_for(fps: float) -> float:
    """The grid (50 or 60 Hz) whose light beats fastest with ``fps``: the frame rate set for the *other* grid,
    which is when flicker shows (a 30 fps camera under 50 Hz light beats at 10 Hz; under 60 Hz not at all)."""
    return max(MAINS_HZ, key=lambda m: (round(beat_hz(2 * m, fps), 9), -m))


class FlickerParams(Params):
    depth: float = Field(0.2, ge=0.0, le=0.9, description="modulation depth: each frame's brightness falls to between 1 - depth and 1 of the scene's")
    mains_hz: float = Field(0.0, ge=0.0, le=70.0, description="mains frequency in Hz (the light pulses at twice it); 0 picks whichever of 50 and 60 beats with the clip's frame rate")

    @field_validator("mains_hz")
    @classmethod
    def _grid(cls, v: float) -> float:
        if v != 0.0 and v < 40.0:
            raise ValueError("mains_hz is 0 (automatic) or a grid frequency in [40, 70] Hz")
        return v


def flicker_gains(n_frames: int, fps: float, p: FlickerParams, phase: float) -> np.ndarray:
    """Per-frame brightness gain in [1 - depth, 1]: the lamp's 2 x mains pulse sampled at the frame times."""
    mains = p.mains_hz or mains_for(fps)
    t = np.arange(n_frames, dtype=np.float64) / fps
    return 1.0 - p.depth * 0.5 * (1.0 + np.cos(2.0 * np.pi * 2.0 * mains * t + phase))


def flicker(frames: np.ndarray, p: FlickerParams, rng: np.random.Generator, fps: float) -> np.ndarray:
    """Mains-light flicker: every frame scaled by the lamp's brightness at its capture time (the aliasing beat)."""
    phase = record(rng, "phase", float(rng.uniform(0.0, 2.0 * np.pi)))  # where in the lamp's cycle the clip starts
    gains = flicker_gains(frames.shape[0], fps, p, phase).astype(np.float32)
    return to_uint8(frames.astype(np.float32) * gains[:, None, None, None])


class FrameDropParams(Params):
    drop: float = Field(0.2, ge=0.0, le=0.95, description="probability that a frame after a kept one is dropped")
    burst: float = Field(0.4, ge=0.0, le=0.95, description="probability that a frame after a dropped one is dropped too (bursty loss)")


def kept_sources(n_frames: int, p: FrameDropParams, rng: np.random.Generator) -> np.ndarray:
    """For each output frame the index of the input frame shown: itself when kept, the last kept one when dropped.

    The first frame is always kept. One uniform draw per frame decides, against ``drop`` after a kept
    frame and ``burst`` after a dropped one (a two-state loss model), so for a seed the dropped
    frames of a weaker step are dropped at every stronger one (drop and burst both rise on the ladder).
    """
    u = rng.random(n_frames)
    src = np.zeros(n_frames, dtype=np.int64)
    dropped = False
    for t in range(1, n_frames):
        dropped = bool(u[t] < (p.burst if dropped else p.drop))
        src[t] = src[t - 1] if dropped else t
    return src


def frame_drop(frames: np.ndarray, p: FrameDropParams, rng: np.random.Generator, fps: float) -> np.ndarray:
    """Dropped frames replaced by repeats of the last kept one (a stalled stream or a full buffer)."""
    src = kept_sources(frames.shape[0], p, rng)
    record(rng, "dropped", int((src != np.arange(frames.shape[0])).sum()))
    return frames[src]


CORRUPTIONS: list[CorruptionSpec] = [
    CorruptionSpec(
        name="flicker",
        family="photometric",
        description=(
            "Brightness that pulses between frames under mains-powered light: the lamp's pulse, sampled at the "
            "clip's frame rate, aliases into a slow beat."
        ),
        situations=[
            "CCTV camera indoors under fluorescent tubes",
            "broadcast footage of a sports hall lit by sodium lamps",
            "dash-cam in a tunnel lit by mains lamps",
            "factory inspection camera under LED panels with a cheap driver",
            "smartphone video of a screen or a shop interior",
        ],
        params_model=FlickerParams,
        ladder={s: {"depth": d, "mains_hz": 0.0} for s, d in zip(range(1, 6), (0.08, 0.16, 0.26, 0.38, 0.52))},
        ranges={"depth": (0.04, 0.6)},
        apply_clip=flicker,
        backend="numpy (per-frame gain)",
        draws={"phase": (0.0, 2.0 * np.pi)},
    ),
    CorruptionSpec(
        name="frame_drop",
        family="digital",
        description="Frames lost in capture or transmission, each replaced by the last frame that arrived: the clip stutters and freezes.",
        situations=[
            "wireless CCTV feed over a congested network",
            "drone video downlink at the edge of its range",
            "body-cam recording to a slow memory card",
            "video call or live stream on a weak mobile connection",
            "robot camera whose frames are dropped by an overloaded computer",
        ],
        params_model=FrameDropParams,
        ladder={1: {"drop": 0.1, "burst": 0.2}, 2: {"drop": 0.2, "burst": 0.3}, 3: {"drop": 0.3, "burst": 0.45},
                4: {"drop": 0.4, "burst": 0.6}, 5: {"drop": 0.5, "burst": 0.75}},
        ranges={"drop": (0.05, 0.6), "burst": (0.1, 0.8)},
        apply_clip=frame_drop,
        backend="numpy (frame indexing)",
        draws={"dropped": None},
    ),
]

"""Corruption jobs: what worker processes run. Imports no torch, so workers start fast.

A job corrupts one shard's clean images for one cell. Each image's seed is a pure function
of (run seed, corruption, severity, dataset index), so a resumed run, a run with a different
shard size or a different worker count sees exactly the same pixels.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np

import corruptions

CLEAN = "clean"


def image_seeds(run_seed: int, corruption: str, severity: int, indices: np.ndarray) -> list[int]:
    tag = zlib.crc32(corruption.encode())
    return [
        int(np.random.SeedSequence(run_seed, spawn_key=(tag, severity, int(i))).generate_state(1, np.uint64)[0] >> 1)
        for i in indices
    ]


@dataclass(frozen=True)
class Job:
    shard: int
    corruption: str
    severity: int  # 1..5; for stability jobs the index of the grid point, starting at 1
    params: dict[str, Any] | None = None  # explicit parameters (plan overrides, stability grid)
    stability: bool = False
    n_images: int | None = None  # corrupt only the shard's first n images (stability subsets)


def run_job(job: Job, images: np.ndarray, indices: np.ndarray, run_seed: int) -> np.ndarray:
    # stability grid points get their own seed stream, disjoint from the severity ladder's
    tag_sev = job.severity + (100 if job.stability else 0)
    images, indices = images[: job.n_images], indices[: job.n_images]
    seeds = image_seeds(run_seed, job.corruption, tag_sev, indices)
    if job.params:
        return corruptions.corrupt_batch(images, job.corruption, params=job.params, seeds=seeds)
    return corruptions.corrupt_batch(images, job.corruption, severity=job.severity, seeds=seeds)


def _init_worker() -> None:
    import os

    # each worker is one process on one core: nested BLAS/OpenCV threads only oversubscribe
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    try:
        import cv2

        cv2.setNumThreads(1)
    except ImportError:
        pass

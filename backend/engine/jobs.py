"""Corruption jobs: what worker processes run. Imports no torch, so workers start fast.

A job corrupts one shard's clean images for one cell (or one point of a stability grid). Each
image's seed is a pure function of (run seed, corruption, seed tag, dataset index), so a
resumed run, a run with a different shard size or a different worker count sees exactly the
same pixels.
"""

from __future__ import annotations

import dataclasses
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from domainbench import corruptions
from domainbench.records.config import COMPOSITION_PREFIX
if TYPE_CHECKING:
    from domainbench.records.unit_sums import DamageSums

CLEAN = "clean"
#: stability grid point j draws from seed tag GRID_SEED_TAG + j: disjoint from severities 1..5
GRID_SEED_TAG = 100


def image_seeds(run_seed: int, corruption: str, tag: int, indices: np.ndarray) -> list[int]:
    crc = zlib.crc32(corruption.encode())
    return [
        int(np.random.SeedSequence(run_seed, spawn_key=(crc, tag, int(i))).generate_state(1, np.uint64)[0] >> 1)
        for i in indices
    ]


@dataclass(frozen=True)
class Job:
    shard: int
    corruption: str
    #: ladder severity 1..5; 0 for a stability grid point
    severity: int = 0
    #: explicit parameters (plan overrides, a stability grid point); None: the ladder's
    params: dict[str, Any] | None = None
    #: stability jobs: index of the parameter grid point, from 1
    grid_point: int | None = None
    #: corrupt only the shard's first n images (stability subsets)
    n_images: int | None = None

    @property
    def stability(self) -> bool:
        return self.grid_point is not None

    @property
    def seed_tag(self) -> int:
        return self.severity if self.grid_point is None else GRID_SEED_TAG + self.grid_point


@dataclass(frozen=True)
class Corrupted:
    """A job's output: the corrupted images and what the kernel drew for each (per-image lists).

    ``images`` is a host array, or a torch tensor on the models' device for a device job.
    """

    images: Any
    drawn: dict[str, list[Any]]
    #: where the images were corrupted: numpy kernels on the CPU, or torch kernels on the models' device
    on: Literal["cpu", "device"] = "cpu"
    #: the cell's SSIM/PSNR sums against the clean images, when the process that corrupted them measured
    #: them too (``run_job(damage=True)``); None: the scoring side measures them
    damage: DamageSums | None = None


def composition_steps(job: Job) -> list[tuple[str, int]] | None:
    """The (corruption, severity) steps of a composed cell's job; None for any other job."""
    if not job.corruption.startswith(COMPOSITION_PREFIX) or job.params is None:
        return None
    return [(n, s) for n, s in job.params["steps"]]


def run_job(job: Job, images: np.ndarray, indices: np.ndarray, run_seed: int, damage: bool = False) -> Corrupted:
    """Corrupt the job's images; with ``damage``, also measure the cell's SSIM/PSNR sums here.

    A worker process that corrupts a cell also measures it: the float64 SSIM maps then run on the
    worker's core beside the models' forward passes instead of after them in the scoring process
    (the sums are the same: the same function on the same pixels)."""
    images, indices = images[: job.n_images], indices[: job.n_images]
    if len(images) == 0:  # a shard whose files were all unreadable (--skip-unreadable): nothing to corrupt
        return Corrupted(images, {})
    done = _corrupt(job, images, indices, run_seed)
    if damage and not job.stability:
        from domainbench.metrics.damage import SSIM_RADIUS, damage_sums  # torch and scipy: only where damage is measured

        if min(images.shape[1:3]) >= 2 * SSIM_RADIUS + 1:  # as ShardDamage: smaller images get no damage numbers
            return dataclasses.replace(done, damage=damage_sums(images, done.images))
    return done


def _corrupt(job: Job, images: np.ndarray, indices: np.ndarray, run_seed: int) -> Corrupted:
    seeds = image_seeds(run_seed, job.corruption, job.seed_tag, indices)
    steps = composition_steps(job)
    if steps is not None:
        out, drawn = corruptions.corrupt_composed(images, steps, seeds)
        return Corrupted(out, {"steps": drawn})
    if job.params is not None:
        out, drawn = corruptions.corrupt_batch(images, job.corruption, params=job.params, seeds=seeds, return_drawn=True)
    else:
        out, drawn = corruptions.corrupt_batch(images, job.corruption, severity=job.severity, seeds=seeds, return_drawn=True)
    return Corrupted(out, drawn)


def init_worker() -> None:
    import os

    from domainbench.runtime import host_memory
    host_memory.configure()  # a spawned process starts with glibc's defaults
    import signal

    from domainbench.runtime.parent_watch import watch_parent
    watch_parent(signal.SIGKILL)  # a corruption worker holds nothing worth saving: end with the engine

    # each worker is one process on one core: nested BLAS/OpenCV threads only oversubscribe
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    try:
        import cv2

        cv2.setNumThreads(1)
    except ImportError:
        pass

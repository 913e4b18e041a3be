"""Corrupting on the model's device: where each corruption job runs, and the device job itself.

``--corrupt-on``:
- ``cpu``: every job runs the numpy kernels on the worker processes (the default before).
- ``device``: jobs whose corruption has a torch kernel (``domainbench.corruptions.device``) run it on the
  device the models run on, in the main process, when the shard is consumed; the others stay on
  the CPU workers. With ``--device cpu`` this runs the torch kernels on the CPU, which is how the
  tests check that a run's results do not depend on where its units were corrupted.
- ``auto``: ``device`` when the models run on a GPU, else ``cpu`` (on a CPU-only machine the
  worker processes are the faster path: they corrupt the next shard while the model scores
  this one).

A composed cell (``compose:NAME``) runs on the device only when every one of its steps has a
torch kernel; one CPU-only step keeps the whole composition on the CPU workers (moving the
images between host and device mid-composition would cost more than it saves).

Per-image seeds are the CPU jobs' (``jobs.image_seeds``), so deterministic corruptions give
the same pixels either way; where each unit was corrupted is stored on it (``corrupted_on``).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import torch

from domainbench.records.config import COMPOSITION_PREFIX
from domainbench.engine.jobs import Corrupted, Job, composition_steps, image_seeds
from domainbench.engine.scoring import to_device
from domainbench.models.hub_common import as_tensor

Site = Literal["cpu", "device"]


def has_device_kernel(corruption: str) -> bool:
    from domainbench.corruptions import device  # imports the torch kernels only when a run may use them

    return device.has_kernel(corruption)


def corruption_site(choice: str, model_device: torch.device, corruption: str,
                    steps: list[tuple[str, int]] | None = None) -> Site:
    """Where a job of ``corruption`` (a composition: with its ``steps``) runs under ``--corrupt-on choice``
    with the models on ``model_device``."""
    if choice == "cpu" or (choice == "auto" and model_device.type != "cuda"):
        return "cpu"
    if corruption.startswith(COMPOSITION_PREFIX):
        from domainbench.corruptions import device

        return "device" if steps and device.has_kernels(steps) else "cpu"
    return "device" if has_device_kernel(corruption) else "cpu"


def job_site(choice: str, model_device: torch.device, job: Job) -> Site:
    """``corruption_site`` of one job."""
    return corruption_site(choice, model_device, job.corruption, composition_steps(job))


def run_device_job(job: Job, images: np.ndarray, indices: np.ndarray, run_seed: int, device: torch.device) -> Corrupted:
    """``jobs.run_job`` with the corruption's torch kernel on ``device``; same seeds, same drawn record."""
    from domainbench.corruptions import device as device_kernels

    images, indices = images[: job.n_images], indices[: job.n_images]
    seeds = image_seeds(run_seed, job.corruption, job.seed_tag, indices)
    x = to_device(as_tensor(images), device)
    if len(x) == 0:  # a shard whose files were all unreadable (--skip-unreadable): nothing to corrupt
        return Corrupted(x, {}, on="device")
    steps = composition_steps(job)
    if steps is not None:
        out, drawn_steps = device_kernels.corrupt_composed(x, steps, seeds, device=device)
        return Corrupted(out, {"steps": drawn_steps}, on="device")
    if job.params is not None:
        out, drawn = device_kernels.corrupt_batch(x, job.corruption, params=job.params, seeds=seeds, device=device, return_drawn=True)
    else:
        out, drawn = device_kernels.corrupt_batch(x, job.corruption, severity=job.severity, seeds=seeds, device=device,
                                                  return_drawn=True)
    # stays on the device: the models preprocess it there (scoring.pixels), numpy consumers copy it back
    return Corrupted(out, drawn, on="device")

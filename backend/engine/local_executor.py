"""The local executor: models in this process, decoding and corruption in a process pool (or inline,
or corruption on the models' device).

One shard of look-ahead: while the models score shard k, the pool corrupts shard k+1 and decodes
shard k+2's files (``input_pipeline``); without worker processes a thread decodes and the
corruption runs when its shard is scored (``engine.corruption_kind.CellsLocal``). An FMR run's shards
come through the same pipeline (decode only: its search perturbs in this process; ``fmr.kind.FmrLocal``).
"""

from __future__ import annotations

import os
import platform
from collections.abc import Callable, Sequence
from typing import Any

import torch

from domainbench.records.config import RunConfig
from domainbench.data import Batch, Dataset
from domainbench.engine.device_corruption import job_site, run_device_job
from domainbench.engine.input_pipeline import InputPipeline
from domainbench.engine.jobs import Corrupted, Job, run_job
from domainbench.engine.scoring import ModelState, load_models
from domainbench.engine.shards import CorruptedFuture
from domainbench.engine.tasks import RunEvents, RunStats
from domainbench.engine.timings import StageTimes
from domainbench.store import Store


class _InlineFuture:
    """Runs the job when its result is asked for: no process, and no corrupted shard held early."""

    def __init__(self, fn: Callable[[], Corrupted]) -> None:
        self._fn = fn

    def result(self) -> Corrupted:
        return self._fn()


class LocalExecutor:
    """``Executor`` running everything on this machine; the models stay loaded in this process.

    It knows no run kind: a kind's local part (``CorruptionKind``'s ``CellsLocal``, FMR's ``FmrLocal``) loads
    its models with ``load_models`` (or its own loaders) and reads its shards through ``InputPipeline``."""

    name = "local"

    def load_models(self, store: Store, cfg: RunConfig, ds: Dataset, events: RunEvents,
                    timer: StageTimes | None = None) -> list[ModelState]:
        return load_models(cfg.models, ds.classes, cfg.device, cfg.batch_size, cfg.templates, say=events.message,
                           options=cfg.model_args, cache=store, timer=timer)


def submit_job(inputs: InputPipeline, job: Job, batch: Batch, seed: int, corrupt_on: str, device: torch.device,
               stats: RunStats) -> CorruptedFuture:
    """One corruption job of a shard, as a future: in the pool, inline, or on the models' device."""
    stats.corruption_calls += len(batch.images[: job.n_images])
    if job_site(corrupt_on, device, job) == "device":
        # runs when the shard is consumed, on the models' device: no worker, no pickled shard
        return _InlineFuture(lambda: run_device_job(job, batch.images, batch.indices, seed, device))
    if inputs.pool is None:
        return inputs.pinning.corrupted(_InlineFuture(lambda: run_job(job, batch.images, batch.indices, seed)))
    # the worker that corrupts a cell also measures its damage (SSIM, PSNR): on its own core, beside the
    # models' forward passes, instead of after them here
    return inputs.pinning.corrupted(inputs.pool.submit(run_job, job, batch.images, batch.indices, seed, damage=True))


def models_device(models: Sequence[ModelState]) -> torch.device:
    """Where models loaded in this process run (the CPU when there are none)."""
    return models[0].model.device if models else torch.device("cpu")


def local_environment(models: list[ModelState]) -> dict[str, Any]:
    """Device and versions of models loaded in this process, as the run record keeps them."""
    dev = models_device(models)
    return {
        "device": str(dev),
        "gpu": torch.cuda.get_device_name(dev) if dev.type == "cuda" else None,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "host_cpus": os.cpu_count(),
    }

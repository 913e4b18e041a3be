"""A run's clean shards, decoded ahead of the models in worker processes: the one input pipeline
of ``run``, ``fmr`` and the Ray executor's driver (``InputPipeline``).

The models score shard k while shard k+1 is corrupted and the workers decode the files of shard
k+2 (``AHEAD`` shards are started beyond the one handed out, so memory stays bounded whatever
the dataset's size). A shard's files are split
into one chunk per worker, so a single shard decodes on every core; the main process only
concatenates the chunks' arrays (no per-image work there). Each chunk goes through
``domainbench.data.decode_files``, the decode ``Dataset.load`` uses, so the pixels are the same
wherever a shard was decoded.

Without worker processes (``workers=0``) shards decode on one thread of this process, one shard
ahead; in-memory datasets (the bundled sample) are sliced, never decoded.

When the models run on CUDA, every shard handed out (and every corrupted batch from the host)
lies in page-locked host memory (``Pinning``), so ``scoring.to_device`` uploads each uint8
batch with one asynchronous copy and no staging copy of its own; on a CPU nothing is pinned.
"""

from __future__ import annotations

import contextlib
import dataclasses
import multiprocessing as mp
import os
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from domainbench.data import Batch, Dataset, decode_files, files_batch
from domainbench.engine.jobs import init_worker
from domainbench.engine.timings import RUN, StageTimes

if TYPE_CHECKING:  # torch is imported where pinning needs it: decode workers start without it
    import torch

    from domainbench.engine.jobs import Corrupted
    from domainbench.engine.shards import CorruptedFuture

#: shards started decoding beyond the one handed out (the executor holds one more, being corrupted)
AHEAD = 1


def auto_workers(models_on_gpu: bool = True) -> int:
    """Worker processes of a run by default: one per core, at most 8, when a GPU runs the models;
    on a CPU, one per core beyond the two the forward pass keeps busy.

    Measured on 2 cores (ViT-B-32, 150 photos x 7 cells, docs/scale.md): 2 workers made the run
    1.6x slower than none, the forward pass's threads waiting on cores the workers held.
    """
    cores = os.cpu_count() or 1
    return min(8, cores if models_on_gpu else max(0, cores - 2))


def run_workers(setting: int | None, models_on_gpu: bool) -> int:
    """The worker processes of a run: ``--workers`` (the run config's ``workers``), else ``auto_workers``."""
    return auto_workers(models_on_gpu) if setting is None else setting


def pinned(images: np.ndarray) -> np.ndarray:
    """``images`` copied once into page-locked host memory (an array viewing a pinned tensor, which it keeps alive)."""
    from domainbench.models.hub_common import as_tensor  # torch: only where something is pinned

    return as_tensor(images).pin_memory().numpy()


@dataclasses.dataclass(frozen=True)
class Pinning:
    """Whether batches go through page-locked host memory (``on``): for models on CUDA only."""

    on: bool = False

    @classmethod
    def for_device(cls, device: torch.device | str) -> Pinning:
        import torch

        return cls(torch.device(device).type == "cuda")

    def batch(self, batch: Batch) -> Batch:
        """A clean shard as the models take it."""
        return dataclasses.replace(batch, images=pinned(batch.images)) if self.on else batch

    def corrupted(self, fut: CorruptedFuture) -> CorruptedFuture:
        """A host-corrupted batch's future, its images pinned when asked for (once, for every model scoring it)."""
        return _PinnedFuture(fut) if self.on else fut


class _PinnedFuture:
    def __init__(self, fut: CorruptedFuture) -> None:
        self._fut = fut

    def result(self) -> Corrupted:
        done = self._fut.result()
        return dataclasses.replace(done, images=pinned(done.images))


def decode_chunk(paths: list[Path], size: int) -> tuple[np.ndarray, list[tuple[int, str]]]:
    """A worker's part of a shard: the decoded images stacked, and (position, reason) of those that failed."""
    decoded = decode_files(paths, size)
    images = [d for d in decoded if not isinstance(d, str)]
    stacked = np.stack(images) if images else np.zeros((0, size, size, 3), np.uint8)
    return stacked, [(k, d) for k, d in enumerate(decoded) if isinstance(d, str)]


class _Sliced:
    def __init__(self, batch: Batch) -> None:
        self._batch = batch

    def result(self) -> Batch:
        return self._batch


class _Chunked:
    """A shard whose chunks decode in worker processes; ``result()`` joins them in order."""

    def __init__(self, ds: Dataset, indices: np.ndarray, chunks: list[tuple[list[Path], Future]]) -> None:
        self._ds, self._indices, self._chunks = ds, indices, chunks

    def result(self) -> Batch:
        done = [(paths, *fut.result()) for paths, fut in self._chunks]
        labels = None if self._ds.labels is None else self._ds.labels[self._indices]
        if not any(failed for _, _, failed in done):  # the usual case: one concatenation, nothing per image
            return Batch(np.concatenate([images for _, images, _ in done]), self._indices, labels)
        decoded: list[np.ndarray | str] = []
        paths: list[Path] = []
        for chunk_paths, images, failed in done:
            reasons = dict(failed)
            it = iter(images)
            decoded += [reasons[k] if k in reasons else next(it) for k in range(len(chunk_paths))]
            paths += chunk_paths
        return files_batch(decoded, paths, self._indices, labels, self._ds.image_size)


class ShardLoader:
    """Starts decoding shards; ``pool``: the run's worker processes (None: a thread of this process)."""

    def __init__(self, ds: Dataset, pool: Executor | None, workers: int) -> None:
        self.ds, self.pool, self.workers = ds, pool, max(1, workers)
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="domainbench-load") if pool is None else None

    def start(self, indices: np.ndarray) -> _Sliced | _Chunked | Future[Batch]:
        ds = self.ds
        indices = np.asarray(indices, dtype=np.int64)
        if ds.paths is None:
            return _Sliced(ds.load(indices))
        if self._thread is not None:
            return self._thread.submit(ds.load, indices)
        assert self.pool is not None
        chunks = []
        for part in np.array_split(indices, min(self.workers, len(indices))):
            paths = [ds.paths[i] for i in part]
            chunks.append((paths, self.pool.submit(decode_chunk, paths, ds.image_size)))
        return _Chunked(ds, indices, chunks)

    def ahead(self, plan: Iterator[tuple[int, list]], shards: list[np.ndarray],
              depth: int = AHEAD) -> Iterator[tuple[int, list, _Sliced | _Chunked | Future[Batch]]]:
        """The plan's shards with their batches decoding, ``depth`` more started before one is handed out."""
        started: deque[tuple[int, list, _Sliced | _Chunked | Future[Batch]]] = deque()
        for shard, todo in plan:
            started.append((shard, todo, self.start(shards[shard])))
            if len(started) > depth:
                yield started.popleft()
        yield from started

    def close(self) -> None:
        if self._thread is not None:
            self._thread.shutdown(cancel_futures=True)


class InputPipeline:
    """The one input pipeline: a run's clean shards (``run``, ``fmr``, the Ray executor's driver)
    decoded ahead in ``workers`` processes, pinned by ``pinning``.

    ``corrupts``: the same processes take the run's corruption jobs (``pool``), so they are started
    for an in-memory dataset too; otherwise only a folder dataset starts them.
    """

    def __init__(self, ds: Dataset, workers: int, pinning: Pinning = Pinning(), corrupts: bool = False) -> None:
        self.workers, self.pinning = workers, pinning
        start = workers > 0 and (corrupts or ds.paths is not None)
        # spawn, not fork: forking a process whose torch/OpenMP threads are running can deadlock
        self.pool = (ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn"), initializer=init_worker)
                     if start else None)
        self.loader = ShardLoader(ds, self.pool, workers)

    @classmethod
    def for_models(cls, ds: Dataset, setting: int | None, device: torch.device | str,
                   corrupts: bool = False) -> InputPipeline:
        """The pipeline feeding models on ``device`` in this process: workers (``setting``, else
        ``auto_workers``) and pinning decided from the device."""
        pinning = Pinning.for_device(device)
        return cls(ds, run_workers(setting, pinning.on), pinning, corrupts)

    def batches(self, plan: Iterator[tuple[int, list]], shards: list[np.ndarray], report: Callable[[Batch], Batch],
                timer: StageTimes | None = None) -> Iterator[tuple[int, list, Batch]]:
        """The plan's (shard, todo, clean batch), decoded ahead; ``report`` sees each batch first
        (unreadable files), ``timer`` gets the seconds spent waiting for the decode."""
        for shard, todo, loaded in self.loader.ahead(plan, shards):
            with timer.stage(RUN, "decode") if timer is not None else contextlib.nullcontext():
                batch = report(loaded.result())
            yield shard, todo, self.pinning.batch(batch)

    def close(self) -> None:
        self.loader.close()
        if self.pool is not None:
            self.pool.shutdown(cancel_futures=True)

    def __enter__(self) -> InputPipeline:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

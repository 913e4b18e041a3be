"""A run's clean shards, decoded ahead of the models in worker processes.

The models score shard k while shard k+1 is corrupted and the workers decode the files of shard
k+2 (``AHEAD`` shards are started beyond the one handed out, so memory stays bounded whatever
the dataset's size). A shard's files are split
into one chunk per worker, so a single shard decodes on every core; the main process only
concatenates the chunks' arrays (no per-image work there). Each chunk goes through
``domainbench.data.decode_files``, the decode ``Dataset.load`` uses, so the pixels are the same
wherever a shard was decoded.

Without worker processes (``workers=0``) shards decode on one thread of this process, one shard
ahead; in-memory datasets (the bundled sample) are sliced, never decoded.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from pathlib import Path

import numpy as np

from domainbench.data import Batch, Dataset, decode_files, files_batch

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

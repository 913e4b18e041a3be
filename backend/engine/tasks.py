"""Per-run tasks beside the classification units: embedding stability and the PD threat (an FMR
search is a kind of run of its own, ``domainbench.fmr.kind``).

Each task implements :class:`RunTask`: which corruption jobs it needs for a shard, what it does
with a corrupted batch, and when to write. A task holds the store and a :class:`RunContext`,
never the engine, so the runner loops over tasks without knowing what they measure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import cv2
import numpy as np
import torch

from domainbench import corruptions
from domainbench.records.config import DomainConfig, RunConfig
from domainbench.data import Batch, Dataset
from domainbench.engine.jobs import CLEAN, Corrupted, Job
from domainbench.engine.scoring import ModelState, as_host, encode
from domainbench.records.model_backends import has_image_embeddings
from domainbench.store import Store
from domainbench.store.records import StabilityRecord, ThreatRecord

# images are compared by the PD threat at this resolution at most: area resizing is linear,
# so the downscaled δ is exactly the difference of the downscaled images
THREAT_MAX_SIDE = 64


class RunEvents(Protocol):
    def start(self, total_units: int, done_units: int) -> None: ...
    def advance(self, units: int, images: int) -> None: ...
    def message(self, text: str) -> None: ...


class SilentEvents:
    def start(self, total_units: int, done_units: int) -> None:
        pass

    def advance(self, units: int, images: int) -> None:
        pass

    def message(self, text: str) -> None:
        pass


@dataclass
class RunStats:
    """What one session of a run did (any kind of run): the CLI's and the worker's closing line."""

    computed_units: int = 0
    skipped_units: int = 0
    corruption_calls: int = 0  # images passed through a corruption kernel
    unreadable: list[tuple[int, str, str]] = field(default_factory=list)


@dataclass
class Cell:
    """One (corruption, severity) of the plan, with the parameters its kernel applies."""

    corruption: str
    severity: int
    params: dict[str, Any] | None  # explicit parameters passed to the kernel, None: the ladder's
    applied: dict[str, Any] = field(default_factory=dict)  # what the kernel applies, recorded per unit

    def job(self, shard: int) -> Job:
        return Job(shard, self.corruption, self.severity, self.params)


def cells_of(domain: DomainConfig) -> list[Cell]:
    """The corruption run's cells in plan order: the clean pass, each corruption's severities, each composition."""
    cells = [Cell(CLEAN, 0, None)]
    for c in domain.corruptions:
        for s in c.severities:
            # explicit params override the ladder's values at every listed severity
            ladder = corruptions.resolve_params(c.name, severity=s)
            params = {**ladder, **c.params} if c.params else None
            cells.append(Cell(c.name, s, params, params or ladder))
    for comp in domain.compositions:
        # one cell of severity 1 per composition; its steps are its parameters
        steps = {"steps": [[name, severity] for name, severity in comp.pairs]}
        cells.append(Cell(comp.cell_name, 1, steps, steps))
    return cells


@dataclass
class RunContext:
    """What a task may know about its run."""

    run_id: str
    cfg: RunConfig
    domain: DomainConfig
    dataset: Dataset
    store: Store
    models: list[ModelState]
    events: RunEvents


@dataclass
class CleanPass:
    """A shard's clean predictions per model, and the clean embeddings computed this session."""

    preds: dict[str, np.ndarray] = field(default_factory=dict)
    embeddings: dict[str, torch.Tensor] = field(default_factory=dict)


class RunTask(Protocol):
    def jobs(self, shard: int, cells: list[Cell]) -> list[Job]:
        """Corruption jobs this task still needs for ``shard`` (the runner merges equal ones)."""

    def needs_clean_embeddings(self, model: str, shard: int) -> bool:
        """True when the shard's clean embeddings of ``model`` must be computed for this task."""

    def consume(self, job: Job, batch: Batch, corrupted: Corrupted, clean: CleanPass) -> None:
        """Use a finished job's images (every job of the shard is offered; ignore others')."""

    def flush(self, shard: int) -> None:
        """The shard is done: write what was gathered."""


def threat_view(images: np.ndarray) -> np.ndarray:
    """uint8 (N, H, W[, C]) -> float32 (N, D) in [0, 1], area-downscaled to <= 64 px a side."""
    n, h, w = images.shape[:3]
    scale = min(1.0, THREAT_MAX_SIDE / max(h, w))
    out = images.astype(np.float32) / 255.0
    if scale < 1.0:
        size = (max(1, round(w * scale)), max(1, round(h * scale)))
        out = np.stack([cv2.resize(im, size, interpolation=cv2.INTER_AREA) for im in out])
    return out.reshape(n, -1)


class StabilityTask:
    """DivergenceRadius, cosine and Euclidean robustness over each corruption's parameter grid."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self.grids = {c.name: corruptions.get(c.name).continuous_params(ctx.cfg.stability_points)
                      for c in ctx.domain.corruptions}
        self.done = ctx.store.stability.keys(run_id=ctx.run_id)
        # a model without image embeddings (an endpoint, a plain classifier): its stability is n/a, never
        # measured (told by the name's backend: the Ray driver knows the models by name only)
        self.remote = {m.name for m in ctx.models if not has_image_embeddings(m.name)}
        self.buffer: dict[tuple[str, str], dict[int, torch.Tensor]] = {}
        self.indices: dict[int, list[int]] = {}

    def _missing(self, model: str, corruption: str, shard: int) -> bool:
        return model not in self.remote and (self.ctx.run_id, model, corruption, shard) not in self.done

    def needs_clean_embeddings(self, model: str, shard: int) -> bool:
        return any(self._missing(model, c, shard) for c in self.grids)

    def jobs(self, shard: int, cells: list[Cell]) -> list[Job]:
        out = []
        for name, grid in self.grids.items():
            if any(self._missing(m.name, name, shard) for m in self.ctx.models):
                out += [
                    Job(shard, name, params=params, grid_point=j, n_images=self.ctx.cfg.stability_images)
                    for j, params in enumerate(grid, start=1)
                ]
        return out

    def consume(self, job: Job, batch: Batch, corrupted: Corrupted, clean: CleanPass) -> None:
        if job.grid_point is None:
            return
        images = corrupted.images
        self.indices[job.shard] = batch.indices[: len(images)].tolist()
        for ms in self.ctx.models:
            if not self._missing(ms.name, job.corruption, job.shard):
                continue
            slot = self.buffer.setdefault((ms.name, job.corruption), {})
            if 0 not in slot:
                slot[0] = clean.embeddings[ms.name][: len(images)]
            slot[job.grid_point] = encode(ms, images)

    def flush(self, shard: int) -> None:
        from domainbench.metrics.stability import stability_metrics

        records = []
        for (model, corruption), slot in self.buffer.items():
            emb = torch.stack([slot[j] for j in sorted(slot)], dim=1)  # (k, 1 + m, d)
            metrics = stability_metrics(emb.double().cpu().numpy())
            records.append(
                StabilityRecord(
                    run_id=self.ctx.run_id,
                    model=model,
                    corruption=corruption,
                    shard=shard,
                    indices=self.indices[shard],
                    points=len(slot) - 1,
                    grid=self.grids[corruption],
                    **{k: np.asarray(v, dtype=float).tolist() for k, v in metrics.items()},
                )
            )
            self.done.add((self.ctx.run_id, model, corruption, shard))
        self.ctx.store.stability.put_many(records)
        self.buffer.clear()


class ThreatTask:
    """PD threat of every corrupted shard against anchors chosen from the run's clean images."""

    def __init__(self, ctx: RunContext, pool_size: int = 2000) -> None:
        from domainbench.metrics.threat import ProjectedDisplacement, select_anchors, unsafe_reference_threat

        self.ctx = ctx
        self.done = ctx.store.threat.keys(run_id=ctx.run_id)
        pool = ctx.dataset.subset(pool_size)
        batch = pool.load(np.arange(len(pool)))
        assert batch.labels is not None
        x = threat_view(batch.images)
        smallest = int(np.bincount(batch.labels).min()) if len(batch.labels) else 0
        k = max(1, min(ctx.cfg.threat_anchors, smallest))
        anchors, anchor_labels = select_anchors(x, batch.labels, k)
        self.pd = ProjectedDisplacement(anchors, anchor_labels, beta=0.5)
        scale = float(unsafe_reference_threat(x, batch.labels, self.pd, n_pairs=min(500, len(x)), seed=ctx.cfg.seed))
        ctx.store.update_run(ctx.run_id, different_class_threat=scale, threat_anchors_per_class=k)

    def _missing(self, corruption: str, severity: int, shard: int) -> bool:
        return (self.ctx.run_id, corruption, severity, shard) not in self.done

    def needs_clean_embeddings(self, model: str, shard: int) -> bool:
        return False

    def jobs(self, shard: int, cells: list[Cell]) -> list[Job]:
        return [c.job(shard) for c in cells if c.corruption != CLEAN and self._missing(c.corruption, c.severity, shard)]

    def consume(self, job: Job, batch: Batch, corrupted: Corrupted, clean: CleanPass) -> None:
        if job.stability or not self._missing(job.corruption, job.severity, job.shard):
            return
        x = threat_view(batch.images)
        t = np.asarray(self.pd.threat(x, batch.labels, threat_view(as_host(corrupted.images)) - x), dtype=np.float64)
        self.ctx.store.threat.put(ThreatRecord(
            run_id=self.ctx.run_id,
            corruption=job.corruption,
            severity=job.severity,
            shard=job.shard,
            n=int(len(t)),
            sum=float(t.sum()),
            sum_sq=float((t**2).sum()),
            n_above_1=int((t > 1.0).sum()),
            max=float(t.max()) if len(t) else 0.0,
        ))
        self.done.add((self.ctx.run_id, job.corruption, job.severity, job.shard))

    def flush(self, shard: int) -> None:
        pass  # each cell is written as soon as it is measured

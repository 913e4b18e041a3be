"""Per-run measurements beside classification: embedding stability and the PD threat.

Both ride on the engine's loop: stability adds corruption jobs at equally spaced points of
each corruption's continuous parameter domain, on the first images of every shard; the PD
threat scores every corrupted shard the engine produces anyway, once, whatever the models.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import cv2
import numpy as np
import torch

import corruptions
from backend.config import DomainConfig, RunConfig
from backend.data import Batch, Dataset
from backend.engine.jobs import Job

if TYPE_CHECKING:
    from backend.engine.runner import Cell, Engine, ModelState

# images are compared by the PD threat at this resolution at most: area resizing is linear,
# so the downscaled δ is exactly the difference of the downscaled images
THREAT_MAX_SIDE = 64


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
    def __init__(self, engine: Engine, run_id: str, cfg: RunConfig, domain: DomainConfig) -> None:
        self.engine = engine
        self.run_id = run_id
        self.cfg = cfg
        self.grids = {c.name: corruptions.get(c.name).continuous_params(cfg.stability_points) for c in domain.corruptions}
        self.done = engine.store.keys("stability", run_id=run_id)
        self.models: list[ModelState] = []
        self.buffer: dict[tuple[str, str], dict[int, torch.Tensor]] = {}
        self.indices: dict[int, list[int]] = {}

    def _missing(self, model: str, corruption: str, shard: int) -> bool:
        return (self.run_id, model, corruption, shard) not in self.done

    def needs_clean(self, ms: ModelState, shard: int) -> bool:
        return any(self._missing(ms.name, c, shard) for c in self.grids)

    def jobs(self, shard: int, models: list[ModelState]) -> list[Job]:
        self.models = models
        out = []
        for name, grid in self.grids.items():
            if any(self._missing(m.name, name, shard) for m in models):
                out += [
                    Job(shard, name, j, params, stability=True, n_images=self.cfg.stability_images)
                    for j, params in enumerate(grid, start=1)
                ]
        return out

    def add(self, job: Job, corrupted: np.ndarray, clean_emb: dict[str, torch.Tensor], batch: Batch) -> None:
        from backend.engine.runner import encode

        self.indices[job.shard] = batch.indices[: len(corrupted)].tolist()
        for ms in self.models:
            if not self._missing(ms.name, job.corruption, job.shard):
                continue
            slot = self.buffer.setdefault((ms.name, job.corruption), {})
            if 0 not in slot:
                slot[0] = clean_emb[ms.name][: len(corrupted)]
            slot[job.severity] = encode(ms, corrupted)

    def flush(self, shard: int) -> None:
        from backend.metrics.stability import stability_metrics

        docs = []
        for (model, corruption), slot in self.buffer.items():
            emb = torch.stack([slot[j] for j in sorted(slot)], dim=1)  # (k, 1 + m, d)
            metrics = stability_metrics(emb.double().cpu().numpy())
            docs.append(
                {
                    "run_id": self.run_id,
                    "model": model,
                    "corruption": corruption,
                    "shard": shard,
                    "indices": self.indices[shard],
                    "points": len(slot) - 1,
                    "grid": self.grids[corruption],
                    **{k: np.asarray(v, dtype=float).tolist() for k, v in metrics.items()},
                }
            )
            self.done.add((self.run_id, model, corruption, shard))
        self.engine.store.upsert_many("stability", docs)
        self.buffer.clear()


class ThreatTask:
    """PD threat of every corrupted shard against anchors chosen from the run's clean images."""

    def __init__(self, engine: Engine, run_id: str, cfg: RunConfig, ds: Dataset, pool_size: int = 2000) -> None:
        from backend.metrics.threat import ProjectedDisplacement, select_anchors, unsafe_reference_threat

        self.engine = engine
        self.run_id = run_id
        self.done = engine.store.keys("threat", run_id=run_id)
        pool = ds.subset(pool_size)
        batch = pool.load(np.arange(len(pool)))
        assert batch.labels is not None
        x = threat_view(batch.images)
        smallest = int(np.bincount(batch.labels).min()) if len(batch.labels) else 0
        k = max(1, min(cfg.threat_anchors, smallest))
        anchors, anchor_labels = select_anchors(x, batch.labels, k)
        self.pd = ProjectedDisplacement(anchors, anchor_labels, beta=0.5)
        self.reference = float(unsafe_reference_threat(x, batch.labels, self.pd, n_pairs=min(500, len(x)), seed=cfg.seed))
        engine.store.update_run(run_id, threat_reference=self.reference, threat_anchors_per_class=k)

    def missing(self, cell: Cell, shard: int) -> bool:
        return (self.run_id, cell.corruption, cell.severity, shard) not in self.done

    def add(self, cell: Cell, shard: int, batch: Batch, corrupted: np.ndarray) -> None:
        x = threat_view(batch.images)
        t = np.asarray(self.pd.threat(x, batch.labels, threat_view(corrupted) - x), dtype=np.float64)
        doc: dict[str, Any] = {
            "run_id": self.run_id,
            "corruption": cell.corruption,
            "severity": cell.severity,
            "shard": shard,
            "n": int(len(t)),
            "sum": float(t.sum()),
            "sum_sq": float((t**2).sum()),
            "n_above_1": int((t > 1.0).sum()),
            "max": float(t.max()) if len(t) else 0.0,
        }
        self.engine.store.upsert("threat", doc)
        self.done.add((self.run_id, cell.corruption, cell.severity, shard))

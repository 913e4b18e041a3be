"""Scoring one shard: the per-shard work every executor runs, in-process or on a Ray actor.

Given a shard's clean batch and its corruption jobs (futures of corrupted batches), every
model scores the clean images and each corrupted batch, the run's tasks consume what they
need, and each unit is upserted by key as soon as it is computed. Keeping this in one
function is what makes a Ray run's units identical to a local run's.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np
import torch

from domainbench import corruptions
from domainbench.records.config import COMPOSITION_PREFIX, SHIFT_PREFIX
from domainbench.corruptions.kernels.frost_photos import texture_of
from domainbench.data import Batch
from domainbench.engine.jobs import CLEAN, Corrupted, Job
from domainbench.engine.scoring import ModelState, Scored, classify, confusion
from domainbench.engine.tasks import Cell, CleanPass, RunContext, RunTask
from domainbench.engine.timings import RUN
from domainbench.engine.vlm_units import vlm_unit_fields
from domainbench.metrics.calibration import calibration_counts
from domainbench.metrics.damage import SSIM_RADIUS, SsimReference, damage_sums
from domainbench.models.generative import VLMResult
from domainbench.models.hub_common import as_tensor
from domainbench.store.records import UnitRecord
from domainbench.records.unit_sums import CalibrationCounts, DamageSums


class CorruptedFuture(Protocol):
    def result(self) -> Corrupted: ...


def score_shard(ctx: RunContext, cells: list[Cell], done: set[tuple[Any, ...]], tasks: Sequence[RunTask],
                shard: int, batch: Batch, jobs: Sequence[tuple[Job, CorruptedFuture]],
                on_unit: Callable[[int], None] | None = None) -> int:
    """Score ``shard`` with every model of ``ctx``; returns the number of units written.

    ``done`` holds the unit keys already stored (it is updated); ``jobs`` are awaited in
    order. ``on_unit(n_images)`` is called after each unit is upserted.
    """
    run_id = ctx.run_id
    written = 0

    def write(ms: ModelState, cell: Cell, scored: Scored, clean: np.ndarray | None, corrupted: Corrupted,
              t0: float) -> None:
        nonlocal written
        t1 = time.perf_counter()
        write_unit(ctx, ms, cell, shard, batch, scored.preds, clean, corrupted, t0, confidence=scored.confidence,
                   vlm=scored.vlm, calibration=calibration_of(scored, batch.labels), damage=damage.get(cell))
        if ms.timer is not None:
            ms.timer.add(ms.name, "store", time.perf_counter() - t1)
        done.add((run_id, ms.name, cell.corruption, cell.severity, shard))
        written += 1
        if on_unit is not None:
            on_unit(len(scored.preds))

    clean = CleanPass()
    damage = ShardDamage(batch.images)
    for ms in ctx.models:
        key = (run_id, ms.name, CLEAN, 0, shard)
        need_emb = any(t.needs_clean_embeddings(ms.name, shard) for t in tasks)
        if key in done and not need_emb:
            stored = ctx.store.units.get(run_id=run_id, model=ms.name, corruption=CLEAN, severity=0, shard=shard)
            clean.preds[ms.name] = np.asarray(stored.preds, dtype=np.int64)
            continue
        t0 = time.perf_counter()
        scored = classify(ms, batch.images, embeddings=need_emb)
        clean.preds[ms.name] = scored.preds
        if scored.embeddings is not None:
            clean.embeddings[ms.name] = scored.embeddings
        if key not in done:
            write(ms, Cell(CLEAN, 0, None), scored, None, Corrupted(batch.images, {}), t0)
    by_cell = {(c.corruption, c.severity): c for c in cells}
    timer = ctx.models[0].timer if ctx.models else None
    for job, fut in jobs:
        t0 = time.perf_counter()
        corrupted = fut.result()
        if timer is not None:
            timer.add(RUN, "corruption", time.perf_counter() - t0)
        for task in tasks:
            task.consume(job, batch, corrupted, clean)
        if job.stability:
            continue
        cell = by_cell[(job.corruption, job.severity)]
        if corrupted.damage is not None:  # measured where it was corrupted (a worker process)
            damage.put(cell, corrupted.damage)
        elif any((run_id, ms.name, cell.corruption, cell.severity, shard) not in done for ms in ctx.models):
            t0 = time.perf_counter()
            damage.measure(cell, corrupted.images)
            if timer is not None:
                timer.add(RUN, "damage", time.perf_counter() - t0)
        for ms in ctx.models:
            if (run_id, ms.name, cell.corruption, cell.severity, shard) in done:
                continue
            t0 = time.perf_counter()
            write(ms, cell, classify(ms, corrupted.images), clean.preds[ms.name], corrupted, t0)
    for task in tasks:
        task.flush(shard)
    return written


class ShardDamage:
    """SSIM/PSNR sums of each corrupted cell of a shard against the shard's clean images (once per cell,
    shared by every model's unit); the clean side is filtered once for all cells."""

    def __init__(self, clean: np.ndarray) -> None:
        self._clean, self._ref, self._by_cell = clean, None, {}
        # SSIM's 11-pixel window needs images at least that large; smaller ones get no damage numbers
        self.measurable = min(clean.shape[1:3]) >= 2 * SSIM_RADIUS + 1 if len(clean) else False

    def measure(self, cell: Cell, corrupted: Any) -> None:
        if not self.measurable:
            return
        if self._ref is None:
            on_device = isinstance(corrupted, torch.Tensor) and corrupted.device.type != "cpu"
            clean = as_tensor(self._clean).to(corrupted.device) if on_device else self._clean
            self._ref = SsimReference(clean)
        self._by_cell[(cell.corruption, cell.severity)] = damage_sums(self._ref, corrupted)

    def put(self, cell: Cell, sums: DamageSums) -> None:
        """The cell's sums as measured elsewhere (the worker that corrupted it, on the same pixels)."""
        if self.measurable:
            self._by_cell[(cell.corruption, cell.severity)] = sums

    def get(self, cell: Cell) -> DamageSums | None:
        return self._by_cell.get((cell.corruption, cell.severity))


def calibration_of(scored: Scored, labels: np.ndarray | None) -> CalibrationCounts | None:
    if labels is None or scored.logits is None:
        return None
    return calibration_counts(scored.logits, labels, scored.preds)


def write_unit(ctx: RunContext, ms: ModelState, cell: Cell, shard: int, batch: Batch, preds: np.ndarray,
               clean: np.ndarray | None, corrupted: Corrupted, t0: float, confidence: np.ndarray | None = None,
               vlm: VLMResult | None = None, calibration: CalibrationCounts | None = None,
               damage: DamageSums | None = None) -> None:
    classes = ctx.dataset.classes
    unit = UnitRecord(
        run_id=ctx.run_id,
        model=ms.name,
        corruption=cell.corruption,
        severity=cell.severity,
        shard=shard,
        n=int(len(preds)),
        confusion=confusion(batch.labels, preds, len(classes)),
        flips=0 if clean is None else int((preds != clean).sum()),
        preds=preds,
        indices=batch.indices,
        hits=None if batch.labels is None else (preds == batch.labels).astype(np.int8),
        confidence=confidence,
        n_unreadable=len(batch.unreadable),
        # what the corruption drew per image (corrupted.drawn) is not stored: it is the same for every model of the
        # cell and a pure function of the run's seed, the cell and the images, so ``query.drawn_of`` makes it again
        params=cell.applied,
        seed=ctx.cfg.seed,
        classes=classes,
        # per-image labels once per shard: the stability link joins them with predictions
        # and in a real-shift unit, whose images are its own (``shift_outcomes`` reads them there)
        labels=batch.labels if (cell.corruption == CLEAN or cell.corruption.startswith(SHIFT_PREFIX)) else None,
        corrupted_on=None if cell.corruption == CLEAN else corrupted.on,
        frost_texture=texture_of(corrupted.drawn),
        elapsed_s=round(time.perf_counter() - t0, 4),
        computed_at=_now(),
        ladder_version=_ladder_version(cell.corruption),
        calibration=calibration,
        damage=damage,
        **vlm_unit_fields(vlm),
    )
    ctx.store.units.put(unit)


def _ladder_version(corruption: str) -> int:
    # the clean pass, compositions and real shifts have no ladder of their own (a composition's steps keep theirs)
    if corruption == CLEAN or corruption.startswith((COMPOSITION_PREFIX, SHIFT_PREFIX)):
        return 1
    return corruptions.get(corruption).ladder_version


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")

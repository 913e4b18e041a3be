"""Real-shift cells: the user's own shifted images (``[[shift]]``, ``run --shift NAME=PATH``) scored beside the plan.

Each shift is the cell ``shift:NAME`` at severity 1 (like a composition: one cell, no ladder). Its
images are not made from the clean shards but read from the shift's folder
(:mod:`domainbench.data.shift_folder`), in shards of their own, and stored as units like every
other cell, so every per-cell metric, interval and export applies:

- labelled shifts (class folders) have a confusion matrix, hits, calibration;
- paired shifts (files named like the clean ones) have flips against the paired clean image's
  prediction, and SSIM/PSNR against it; their unit ``indices`` are the paired clean indices;
- an unpaired labelled shift has no flips (stored 0, ``params.paired`` false) and no damage; its
  unit ``indices`` are positions in the shift folder's sorted file list.
- class folders whose files name dataset images that ``--limit`` left out are paired with the whole
  dataset's images: each model classifies the paired clean images with the shift (their predictions
  count for the shift's flips only, never for the clean pass), and the units are indexed by position.

A shift's folder is fingerprinted like the dataset when the run starts; a resume refuses a changed one.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from domainbench.records.config import DomainConfig, RealShift, RunConfig
from domainbench.data import Batch, Dataset
from domainbench.data.fingerprint import DatasetFingerprint, dataset_fingerprint
from domainbench.data.readable import check_readable, unreadable_error
from domainbench.data.shift_folder import ShiftImages, open_shift
from domainbench.engine.jobs import CLEAN, Corrupted
from domainbench.engine.scoring import ModelState, classify, encode
from domainbench.engine.shards import ShardDamage, calibration_of, write_unit
from domainbench.engine.tasks import Cell, RunContext
from domainbench.errors import UserInputError
from domainbench.records.model_backends import has_image_embeddings
from domainbench.store.records import StabilityRecord

#: a real shift is one cell; it is stored at severity 1 (severity 0 is the clean pass)
SHIFT_SEVERITY = 1


def parse_shift_option(text: str) -> RealShift:
    """``NAME=PATH`` of ``--shift`` as a ``RealShift`` (path made absolute); a one-line error otherwise."""
    name, sep, path = text.partition("=")
    name, path = name.strip(), path.strip()
    if not sep or not name or not path:
        raise UserInputError(f"--shift {text!r}: expected NAME=PATH, e.g. --shift night=photos/night")
    try:
        return RealShift(name=name, path=os.path.abspath(Path(path).expanduser()))
    except ValueError:
        raise UserInputError(f"--shift {text!r}: the name {name!r} must be a word of ASCII letters, digits, '_', '-' or '.' "
                             "(at most 40), e.g. night") from None


def with_shifts(domain: DomainConfig, extra: list[RealShift], plan_dir: Path | None = None) -> DomainConfig:
    """``domain`` with ``extra`` shifts added and every shift path absolute (a plan's relative to ``plan_dir``)."""
    if not domain.shift and not extra:
        return domain
    base = plan_dir if plan_dir is not None else Path.cwd()
    pinned = [s.model_copy(update={"path": os.path.abspath(base / Path(s.path).expanduser())}) for s in domain.shift]
    try:
        return DomainConfig.model_validate({**domain.model_dump(), "shift": [s.model_dump() for s in pinned + extra]})
    except ValueError as e:  # a name given twice
        from domainbench.errors import first_validation_error

        loc, msg = first_validation_error(e)  # type: ignore[arg-type]
        raise UserInputError(f"--shift: {msg}; give each shift its own name") from None


def open_shifts(domain: DomainConfig, cfg: RunConfig, ds: Dataset) -> list[ShiftImages]:
    """The domain's shift folders, opened against the run's dataset (every error before anything is written)."""
    shifts = [open_shift(s.name, s.path, ds, cfg.dataset, cfg.limit) for s in domain.shift]
    if not cfg.skip_unreadable:  # as for the dataset: an undecodable file is refused unless --skip-unreadable
        for s in shifts:
            check_readable(s.images.paths)
    return shifts


def shift_fingerprints(shifts: list[ShiftImages]) -> dict[str, DatasetFingerprint]:
    return {s.name: dataset_fingerprint(s.images) for s in shifts}


def check_same_shifts(run_id: str, stored: dict[str, DatasetFingerprint], shifts: list[ShiftImages]) -> None:
    """Refuse to resume a run whose shift folders' content changed since it started."""
    for s in shifts:
        before = stored.get(s.name)
        if before is None:
            continue
        changed = before.differences(dataset_fingerprint(s.images))
        if changed:
            raise UserInputError(f"run {run_id}: shift {s.name!r} folder {s.root} changed since the run started (the "
                                 f"{changed}); restore it or start a new run")


def shift_shards(shift: ShiftImages, shard_size: int) -> list[np.ndarray]:
    n = len(shift.images)
    return [np.arange(i, min(i + shard_size, n)) for i in range(0, n, shard_size)]


def shift_cell(shift: ShiftImages) -> Cell:
    applied = {"shift": shift.name, "path": str(shift.root), "labelled": shift.labelled, "paired": shift.paired}
    return Cell("shift:" + shift.name, SHIFT_SEVERITY, None, applied)


def missing_units(ctx: RunContext, shifts: list[ShiftImages], shard_size: int, done: set[tuple[Any, ...]]) -> int:
    return sum(1 for s in shifts for k in range(len(shift_shards(s, shard_size))) for m in ctx.models
               if (ctx.run_id, m.name, shift_cell(s).corruption, SHIFT_SEVERITY, k) not in done)


def score_shifts(ctx: RunContext, shifts: list[ShiftImages], shard_size: int, done: set[tuple[Any, ...]],
                 on_unit: Any = None) -> int:
    """Score every shift's missing units with every model (after the clean pass is stored); returns units written.

    A paired shift with ``cfg.stability`` also gets each model's embedding stability against the
    paired clean image (one perturbed point: the shifted image), on the shard's first
    ``stability_images`` images, as a stability record of the cell ``shift:NAME``.
    """
    written = 0
    clean_preds: dict[str, dict[int, int]] | None = None
    stable = ctx.store.stability.keys(run_id=ctx.run_id) if ctx.cfg.stability else set()
    for shift in shifts:
        cell = shift_cell(shift)
        for note in shift.notes:
            ctx.events.message(note)
        for shard, positions in enumerate(shift_shards(shift, shard_size)):
            unit_todo = {m.name for m in ctx.models if (ctx.run_id, m.name, cell.corruption, cell.severity, shard) not in done}
            stab_todo = {m.name for m in ctx.models if ctx.cfg.stability and shift.paired and has_image_embeddings(m.name)
                         and (ctx.run_id, m.name, cell.corruption, shard) not in stable}
            if not unit_todo and not stab_todo:
                continue
            batch, clean_seen = _shift_batch(ctx, shift, positions)
            damage = None
            if clean_seen is not None:
                damage = ShardDamage(_same_layout(clean_seen, batch.images))
                damage.measure(cell, batch.images)
                if clean_preds is None:
                    clean_preds = _clean_predictions(ctx)
            for ms in ctx.models:
                if ms.name not in unit_todo | stab_todo:
                    continue
                t0 = time.perf_counter()
                scored = classify(ms, batch.images, embeddings=ms.name in stab_todo)
                if clean_seen is not None and ms.name in stab_todo and scored.embeddings is not None:
                    k = min(ctx.cfg.stability_images, len(batch.images))
                    ctx.store.stability.put(_stability_record(ctx, ms, cell, shard, batch.indices[:k],
                                                              encode(ms, clean_seen[:k]), scored.embeddings[:k]))
                    stable.add((ctx.run_id, ms.name, cell.corruption, shard))
                if ms.name not in unit_todo:
                    continue
                paired_clean = None
                if clean_seen is not None and shift.source is not None:
                    # partners --limit left out have no stored clean prediction: each model classifies them here
                    paired_clean = classify(ms, clean_seen).preds
                elif clean_preds is not None:
                    paired_clean = np.array([clean_preds[ms.name][int(i)] for i in batch.indices], dtype=np.int64)
                write_unit(ctx, ms, cell, shard, batch, scored.preds, paired_clean, Corrupted(batch.images, {}), t0,
                           confidence=scored.confidence, vlm=scored.vlm, calibration=calibration_of(scored, batch.labels),
                           damage=None if damage is None else damage.get(cell))
                done.add((ctx.run_id, ms.name, cell.corruption, cell.severity, shard))
                written += 1
                if on_unit is not None:
                    on_unit(len(scored.preds))
    return written


def _shift_batch(ctx: RunContext, shift: ShiftImages, positions: np.ndarray) -> tuple[Batch, np.ndarray | None]:
    """A shard of the shift's images and, for a paired shift, the paired clean images as the clean pass saw them.

    A paired shift's batch is indexed by the clean images' dataset indices; an unpaired one's by
    position in the shift's file list.
    """
    loaded = shift.images.load(positions)
    if loaded.unreadable and not ctx.cfg.skip_unreadable:
        _, path, why = loaded.unreadable[0]
        raise unreadable_error(path, why, len(loaded.unreadable) - 1, run_id=ctx.run_id)
    for _, path, why in loaded.unreadable:
        ctx.events.message(f"unreadable image skipped: {path} ({why})")
    if shift.partner is None:
        return loaded, None
    partner = shift.partner[loaded.indices]
    clean = (shift.source if shift.source is not None else ctx.dataset).load(partner)
    keep = np.isin(partner, clean.indices)  # a clean partner that cannot be read pairs with nothing
    labels = None if loaded.labels is None else loaded.labels[keep]
    indices = shift.unit_indices()[loaded.indices]
    return Batch(loaded.images[keep], indices[keep], labels, loaded.unreadable), clean.images


def _stability_record(ctx: RunContext, ms: ModelState, cell: Cell, shard: int, indices: np.ndarray,
                      clean: torch.Tensor, shifted: torch.Tensor) -> StabilityRecord:
    from domainbench.metrics.stability import stability_metrics

    metrics = stability_metrics(torch.stack([clean, shifted.to(clean.device)], dim=1).double().cpu().numpy())
    return StabilityRecord(run_id=ctx.run_id, model=ms.name, corruption=cell.corruption, shard=shard,
                           indices=[int(i) for i in indices], points=1, grid=[cell.applied],
                           **{k: np.asarray(v, dtype=float).tolist() for k, v in metrics.items()})


def _clean_predictions(ctx: RunContext) -> dict[str, dict[int, int]]:
    """Per model, the stored clean prediction of every dataset index (the clean pass ran first)."""
    out: dict[str, dict[int, int]] = {m.name: {} for m in ctx.models}
    for u in ctx.store.units(ctx.run_id, corruption=CLEAN):
        if u.model in out:
            out[u.model].update(zip((int(i) for i in u.indices), (int(p) for p in u.preds)))
    return out


def _same_layout(clean: np.ndarray, shifted: np.ndarray) -> np.ndarray:
    """Greyscale clean images as RGB when the shifted ones are RGB (decoded files): SSIM/PSNR need one shape."""
    if clean.ndim == 3 and shifted.ndim == 4:
        return np.repeat(clean[..., None], shifted.shape[-1], axis=-1)
    return clean

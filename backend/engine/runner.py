"""The evaluation engine: corrupt once per (corruption, severity), feed every model.

One unit of work is (run, model, corruption, severity, shard). Units are upserted as soon as
they finish, so a killed run loses at most the units in flight and ``resume`` recomputes
nothing that is stored. Per unit we store sufficient statistics (confusion matrix, flip
count, n, per-image predictions), never only final numbers: metrics are derived later, and
the baseline model can change after the run.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing as mp
import os
import platform
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Protocol

import numpy as np
import torch

import corruptions
from backend.config import DomainConfig, RunConfig
from backend.data import Batch, Dataset, open_dataset
from backend.engine.jobs import CLEAN, Job, _init_worker, run_job
from backend.errors import UserInputError
from backend.models import VisionLanguageModel, build_classifier, create_model, resolve_device
from backend.models.base import DEFAULT_TEMPLATES
from backend.store import Store


class ModelOutputError(RuntimeError):
    """A model produced NaN or infinite embeddings: its numbers would be meaningless."""


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
class ModelState:
    name: str
    model: VisionLanguageModel
    classifier: torch.Tensor
    batch_size: int


@dataclass
class Cell:
    corruption: str
    severity: int
    params: dict[str, Any] | None  # explicit parameters passed to the kernel, None: the ladder's
    applied: dict[str, Any] = field(default_factory=dict)  # what the kernel applies, recorded per unit


@dataclass
class RunStats:
    computed_units: int = 0
    skipped_units: int = 0
    corruption_calls: int = 0  # images passed through a corruption kernel
    unreadable: list[tuple[int, str, str]] = field(default_factory=list)


def new_run_id(domain: str) -> str:
    slug = "".join(ch if ch.isalnum() else "-" for ch in domain.lower())[:24].strip("-") or "run"
    while "--" in slug:
        slug = slug.replace("--", "-")
    return f"{datetime.now(timezone.utc):%Y%m%d-%H%M%S}-{slug}-{uuid.uuid4().hex[:4]}"


def domain_id(domain: DomainConfig) -> str:
    blob = json.dumps(domain.model_dump(mode="json", exclude={"planner": {"created_at"}}), sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def cells_of(domain: DomainConfig) -> list[Cell]:
    cells = [Cell(CLEAN, 0, None)]
    for c in domain.corruptions:
        for s in c.severities:
            # explicit params override the ladder's values at every listed severity
            ladder = corruptions.resolve_params(c.name, severity=s)
            params = {**ladder, **c.params} if c.params else None
            cells.append(Cell(c.name, s, params, params or ladder))
    return cells


def auto_shard_size(ds: Dataset) -> int:
    """Images per shard so that one corrupted shard is about 32 MB (16..512 images)."""
    per_image = int(np.prod(ds.arrays.shape[1:])) if ds.arrays is not None else ds.image_size**2 * 3
    return int(max(16, min(512, (32 << 20) // per_image)))


def auto_workers() -> int:
    # on two cores the model forward pass already uses both; extra processes only contend
    return max(0, min(8, (os.cpu_count() or 1) - 2))


class _InlineFuture:
    """Runs the job when its result is asked for: no process, and no corrupted shard held early."""

    def __init__(self, fn: Callable[[], np.ndarray]) -> None:
        self._fn = fn

    def result(self) -> np.ndarray:
        return self._fn()


def open_run_dataset(cfg: RunConfig) -> Dataset:
    ds = open_dataset(cfg.dataset, classes=cfg.classes, image_size=cfg.image_size).subset(cfg.limit)
    if len(ds.classes) < 2:
        raise UserInputError(
            f"dataset {cfg.dataset} has a single class {ds.classes}: zero-shot accuracy would be 1 by construction; "
            "give at least two classes (--classes a,b for candidate names)"
        )
    return ds


def load_models(cfg: RunConfig, classes: list[str], events: RunEvents) -> list[ModelState]:
    if cfg.baseline_model not in cfg.models:
        raise UserInputError(f"baseline {cfg.baseline_model!r} is not among the run's models {cfg.models}; add it to --models")
    device = resolve_device(cfg.device)
    states = []
    for name in cfg.models:
        events.message(f"loading {name} on {device}")
        model = create_model(name, device)
        classifier = build_classifier(model, classes, cfg.templates or DEFAULT_TEMPLATES).to(device)
        states.append(ModelState(name, model, classifier, cfg.batch_size))
    return states


def encode(ms: ModelState, images: np.ndarray) -> torch.Tensor:
    """L2-normalised float32 embeddings, in batches, halving the batch on CUDA out-of-memory."""
    model = ms.model
    cuda = model.device.type == "cuda"
    out: list[torch.Tensor] = []
    i = 0
    while i < len(images):
        chunk = images[i : i + ms.batch_size]
        try:
            with torch.inference_mode(), torch.autocast("cuda", enabled=cuda):
                pix = model.preprocess(chunk)
                if cuda:
                    pix = pix.pin_memory()
                emb = model.encode_image(pix.to(model.device, non_blocking=True)).float()
        except torch.OutOfMemoryError:
            if ms.batch_size == 1:
                raise
            ms.batch_size //= 2
            torch.cuda.empty_cache()
            continue
        out.append(emb)
        i += len(chunk)
    emb = torch.cat(out) if out else torch.zeros((0, ms.classifier.shape[1]), device=model.device)
    if not torch.isfinite(emb).all():
        bad = int((~torch.isfinite(emb)).any(dim=1).sum())
        raise ModelOutputError(
            f"model {ms.name} returned NaN/inf embeddings for {bad} of {len(emb)} images; "
            "check its weights and preprocessing (and fp16 overflow on GPU: try --device cpu)"
        )
    return emb


def predict(ms: ModelState, emb: torch.Tensor) -> np.ndarray:
    with torch.inference_mode():
        return (emb @ ms.classifier.T.to(emb.dtype)).argmax(dim=1).cpu().numpy().astype(np.int64)


def confusion(labels: np.ndarray | None, preds: np.ndarray, n_classes: int) -> list[list[int]] | None:
    if labels is None:
        return None
    cm = np.bincount(labels * n_classes + preds, minlength=n_classes * n_classes).reshape(n_classes, n_classes)
    return cm.tolist()


class Engine:
    def __init__(self, store: Store, events: RunEvents | None = None) -> None:
        self.store = store
        self.events: RunEvents = events or SilentEvents()
        self.stats = RunStats()
        self.classes: list[str] = []

    # -- public entry points ----------------------------------------------------------
    def start(self, domain: DomainConfig, cfg: RunConfig, run_id: str | None = None) -> str:
        """Validate everything, then create the run and evaluate it. Returns the run id.

        ``run_id`` lets a caller that launches the run in the background (the UI) know its
        id up front; by default one is made from the time and the domain text.
        """
        if run_id is not None and (not run_id.strip() or self.store.get_run(run_id) is not None):
            raise UserInputError(f"run id {run_id!r} is empty or already used; choose another or resume it with --resume")
        domain.check_catalogue()
        ds = open_run_dataset(cfg)
        models = load_models(cfg, ds.classes, self.events)
        # nothing is written before every input is known to be good
        run_id = run_id or new_run_id(domain.domain)
        did = domain_id(domain)
        self.store.put_domain({"domain_id": did, "created_at": _now(), **domain.model_dump(mode="json")})
        self.store.put_run(
            {
                "run_id": run_id,
                "domain_id": did,
                "domain": domain.model_dump(mode="json"),
                "config": cfg.model_dump(mode="json"),
                "status": "running",
                "pid": os.getpid(),
                "host": platform.node(),
                "created_at": _now(),
                "dataset": {"name": ds.name, "size": len(ds), "classes": ds.classes, "labelled": ds.labelled},
                "environment": _environment(models),
            }
        )
        return self._evaluate(run_id, domain, cfg, ds, models)

    def resume(self, run_id: str) -> str:
        doc = self.store.get_run(run_id)
        if doc is None:
            known = [r["run_id"] for r in self.store.list_runs()[:5]]
            raise UserInputError(f"no run {run_id!r} in {self.store.description}; recent runs: {known or 'none'} (see `domainbench ls`)")
        domain = DomainConfig.model_validate(doc["domain"])
        cfg = RunConfig.model_validate(doc["config"])
        ds = open_run_dataset(cfg)
        models = load_models(cfg, ds.classes, self.events)
        self.store.update_run(run_id, status="running", resumed_at=_now(), pid=os.getpid(), host=platform.node())
        return self._evaluate(run_id, domain, cfg, ds, models)

    # -- the loop ---------------------------------------------------------------------
    def _evaluate(self, run_id: str, domain: DomainConfig, cfg: RunConfig, ds: Dataset, models: list[ModelState]) -> str:
        from backend.engine.extras import StabilityTask, ThreatTask

        self.classes = ds.classes
        shard_size = cfg.shard_size or auto_shard_size(ds)
        shards = [np.arange(i, min(i + shard_size, len(ds))) for i in range(0, len(ds), shard_size)]
        cells = cells_of(domain)
        done = self.store.keys("units", run_id=run_id)
        total = len(shards) * len(cells) * len(models)
        self.events.start(total, len(done))
        stability = StabilityTask(self, run_id, cfg, domain) if cfg.stability else None
        threat = ThreatTask(self, run_id, cfg, ds) if cfg.threat and ds.labelled else None
        if cfg.threat and not ds.labelled:
            self.events.message("PD threat skipped: it needs labelled images (anchors of other classes)")

        workers = auto_workers() if cfg.workers is None else cfg.workers
        # spawn, not fork: forking a process whose torch/OpenMP threads are running can deadlock
        pool = ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn"), initializer=_init_worker) if workers > 0 else None
        try:
            pending: deque[tuple[int, Batch, list[tuple[Job, Any]]]] = deque()
            self.stats.skipped_units = len(done)
            # one shard of look-ahead: workers corrupt shard k+1 while models score shard k
            for shard, todo in self._plan(run_id, shards, cells, models, done, stability, threat):
                batch = ds.load(shards[shard])
                if batch.unreadable:
                    for idx, path, why in batch.unreadable:
                        self.events.message(f"unreadable image skipped: {path} ({why})")
                    self.stats.unreadable += batch.unreadable
                jobs = [(job, self._submit(pool, job, batch, cfg.seed)) for job in todo]
                pending.append((shard, batch, jobs))
                if len(pending) >= 2:
                    self._consume(run_id, cfg, ds, models, cells, done, stability, threat, *pending.popleft())
            while pending:
                self._consume(run_id, cfg, ds, models, cells, done, stability, threat, *pending.popleft())
        except BaseException as e:
            self.store.update_run(run_id, status="interrupted" if isinstance(e, KeyboardInterrupt) else "failed",
                                  error=f"{type(e).__name__}: {e}"[:500])
            raise
        finally:
            if pool is not None:
                pool.shutdown(cancel_futures=True)

        from backend.engine.summary import build_summary

        summary = build_summary(self.store, run_id)
        self.store.put_summary(summary)
        self.store.update_run(
            run_id,
            status="done",
            finished_at=_now(),
            n_unreadable=len(self.stats.unreadable),
            unreadable=[p for _, p, _ in self.stats.unreadable[:100]],
        )
        return run_id

    def _plan(self, run_id: str, shards: list[np.ndarray], cells: list[Cell], models: list[ModelState],
              done: set[tuple[Any, ...]], stability: Any, threat: Any) -> Iterator[tuple[int, list[Job]]]:
        """Per shard, the corruption jobs still needed: one per cell, whatever the number of models."""
        for shard in range(len(shards)):
            jobs: list[Job] = []
            for cell in cells:
                missing = any((run_id, m.name, cell.corruption, cell.severity, shard) not in done for m in models)
                need_threat = threat is not None and cell.corruption != CLEAN and threat.missing(cell, shard)
                if cell.corruption != CLEAN and (missing or need_threat):
                    jobs.append(Job(shard, cell.corruption, cell.severity, cell.params))
            if stability is not None:
                jobs += stability.jobs(shard, models)
            clean_missing = any((run_id, m.name, CLEAN, 0, shard) not in done for m in models)
            if jobs or clean_missing:
                yield shard, jobs

    def _submit(self, pool: ProcessPoolExecutor | None, job: Job, batch: Batch, seed: int) -> Future | _InlineFuture:
        self.stats.corruption_calls += len(batch.images[: job.n_images])
        if pool is None:
            return _InlineFuture(lambda: run_job(job, batch.images, batch.indices, seed))
        return pool.submit(run_job, job, batch.images, batch.indices, seed)

    def _consume(self, run_id: str, cfg: RunConfig, ds: Dataset, models: list[ModelState], cells: list[Cell],
                 done: set[tuple[Any, ...]], stability: Any, threat: Any, shard: int, batch: Batch,
                 jobs: list[tuple[Job, Any]]) -> None:
        n_classes = len(ds.classes)
        clean_preds: dict[str, np.ndarray] = {}
        clean_emb: dict[str, torch.Tensor] = {}
        for ms in models:
            key = (run_id, ms.name, CLEAN, 0, shard)
            need_emb = stability is not None and stability.needs_clean(ms, shard)
            if key in done and not need_emb:
                stored = self.store.get("units", run_id=run_id, model=ms.name, corruption=CLEAN, severity=0, shard=shard)
                clean_preds[ms.name] = np.asarray(stored["preds"], dtype=np.int64)  # type: ignore[index]
                continue
            t0 = time.perf_counter()
            emb = encode(ms, batch.images)
            clean_preds[ms.name] = predict(ms, emb)
            clean_emb[ms.name] = emb
            if key not in done:
                self._write_unit(run_id, ms, Cell(CLEAN, 0, None), shard, batch, clean_preds[ms.name], None, n_classes, cfg, t0)
                done.add(key)
        by_cell = {(c.corruption, c.severity): c for c in cells}
        for job, fut in jobs:
            corrupted = fut.result()
            if job.stability:
                stability.add(job, corrupted, clean_emb, batch)
                continue
            cell = by_cell[(job.corruption, job.severity)]
            if threat is not None and threat.missing(cell, shard):
                threat.add(cell, shard, batch, corrupted)
            for ms in models:
                key = (run_id, ms.name, cell.corruption, cell.severity, shard)
                if key in done:
                    continue
                t0 = time.perf_counter()
                preds = predict(ms, encode(ms, corrupted))
                self._write_unit(run_id, ms, cell, shard, batch, preds, clean_preds[ms.name], n_classes, cfg, t0)
                done.add(key)
        if stability is not None:
            stability.flush(shard)

    def _write_unit(self, run_id: str, ms: ModelState, cell: Cell, shard: int, batch: Batch, preds: np.ndarray,
                    clean: np.ndarray | None, n_classes: int, cfg: RunConfig, t0: float) -> None:
        doc = {
            "run_id": run_id,
            "model": ms.name,
            "corruption": cell.corruption,
            "severity": cell.severity,
            "shard": shard,
            "n": int(len(preds)),
            "confusion": confusion(batch.labels, preds, n_classes),
            "flips": 0 if clean is None else int((preds != clean).sum()),
            "preds": preds.tolist(),
            "indices": batch.indices.tolist(),
            "n_unreadable": len(batch.unreadable),
            "params": cell.applied,
            "seed": cfg.seed,
            "classes": self.classes,
            "elapsed_s": round(time.perf_counter() - t0, 4),
            "computed_at": _now(),
        }
        if cell.corruption == CLEAN and batch.labels is not None:
            # per-image labels once per shard: the stability link joins them with predictions
            doc["labels"] = batch.labels.tolist()
        self.store.upsert("units", doc)
        self.stats.computed_units += 1
        self.events.advance(1, len(preds))


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _environment(models: list[ModelState]) -> dict[str, Any]:
    dev = models[0].model.device if models else torch.device("cpu")
    return {
        "device": str(dev),
        "gpu": torch.cuda.get_device_name(dev) if dev.type == "cuda" else None,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "host_cpus": os.cpu_count(),
    }

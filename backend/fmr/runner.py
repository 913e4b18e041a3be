"""An FMR run: validate everything, create the run, then one resumable unit per (tested model, shard).

Per shard the oracle scores the clean images once (its votes do not depend on the tested
model); then each tested model's search runs and its unit is upserted: the clean pass as an
ordinary ``units`` record (so the run's report shows clean accuracy like any run) and the
per-image outcomes with the generated images as an ``fmr`` record. The ``fmr`` record is
written last, so a unit counts as done only when both are stored; a killed run resumes
without recomputing stored units.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from domainbench.config import DomainConfig, FmrSettings, RunConfig
from domainbench.data import Batch, Dataset
from domainbench.engine.jobs import CLEAN
from domainbench.engine.dataset_pin import check_same_dataset, dataset_info, pinned_config
from domainbench.engine.lifecycle import check_new_run_id, complete_run, create_run, now, restart_run, stored_run
from domainbench.engine.local_executor import local_environment
from domainbench.engine.runner import open_run_dataset
from domainbench.engine.scoring import confusion
from domainbench.engine.tasks import RunEvents, SilentEvents
from domainbench.errors import UserInputError
from domainbench.fmr.differentiable import gradient_search
from domainbench.fmr.generator import SearchConfig, SearchResult, greedy_search
from domainbench.fmr.images import to_png_b64
from domainbench.fmr.oracle import Oracle, check_oracle_names, load_oracle
from domainbench.fmr.tested import TestedModel, ZeroShotTested, load_tested
from domainbench.store import Store
from domainbench.store.records import FmrUnitRecord, UnitRecord

#: a unit's image payload at most; MongoDB refuses documents over 16 MB
MAX_UNIT_BYTES = 8 << 20


def family_of(domain: DomainConfig) -> tuple[list[str], dict[str, dict[str, object]]]:
    """The perturbation family: the domain's corruptions, with their explicit parameters."""
    return [c.name for c in domain.corruptions], {c.name: dict(c.params) for c in domain.corruptions if c.params}


def auto_shard_size(ds: Dataset) -> int:
    """Images per unit so that a unit's payloads stay under MAX_UNIT_BYTES even for incompressible images.

    Each perturbed image stores two PNGs (original, generated), base64 (× 4/3); a PNG of
    noise is about as large as the raw pixels.
    """
    if ds.arrays is not None:
        raw = int(np.prod(ds.arrays.shape[1:]))
    else:
        raw = ds.image_size**2 * 3
    return int(max(1, min(50, MAX_UNIT_BYTES // (2 * raw * 4 // 3 + 1024))))


class FmrRunner:
    def __init__(self, store: Store, events: RunEvents | None = None) -> None:
        self.store = store
        self.events: RunEvents = events or SilentEvents()
        self.computed_units = 0
        self.skipped_units = 0

    def start(self, domain: DomainConfig, cfg: RunConfig, settings: FmrSettings, run_id: str | None = None,
              tested: Sequence[TestedModel] | None = None) -> str:
        """Check every input, then create the run and search. ``tested`` overrides ``cfg.models``
        with ready-made models (their names must be ``cfg.models``); nothing is stored on bad input."""
        check_new_run_id(self.store, run_id)
        check_oracle_names(settings.oracle)
        domain.check_catalogue()
        cfg = pinned_config(cfg)
        ds, oracle, models = self._prepare(domain, cfg, settings, tested)
        run_id = create_run(self.store, domain, cfg, run_id, dataset_info(ds, cfg), local_environment(oracle.members),
                            fmr=settings)
        return self._evaluate(run_id, domain, cfg, settings, ds, oracle, models)

    def resume(self, run_id: str, tested: Sequence[TestedModel] | None = None) -> str:
        run = stored_run(self.store, run_id)
        if run.fmr is None:
            raise UserInputError(f"run {run_id} is not an FMR run; resume it with `domainbench run --resume {run_id}`")
        ds, oracle, models = self._prepare(run.domain, run.config, run.fmr, tested)
        check_same_dataset(run, ds)
        restart_run(self.store, run_id, resumed_at=now())
        return self._evaluate(run_id, run.domain, run.config, run.fmr, ds, oracle, models)

    # -- inputs -------------------------------------------------------------------------
    def _prepare(self, domain: DomainConfig, cfg: RunConfig, settings: FmrSettings,
                 tested: Sequence[TestedModel] | None) -> tuple[Dataset, Oracle, list[TestedModel]]:
        family, _ = family_of(domain)
        if settings.search == "greedy" and not family:
            raise UserInputError("the domain config lists no corruptions: the greedy search perturbs with the domain's corruptions")
        ds = open_run_dataset(cfg)
        if not ds.labelled:
            raise UserInputError(f"dataset {cfg.dataset} has no labels: FMR compares predictions with true labels")
        oracle = load_oracle(settings.oracle, ds.classes, cfg.device, cfg.batch_size, cfg.templates)
        probe = ds.load(np.arange(min(2, len(ds)))).images
        if tested is None:
            models = [load_tested(m, ds.classes, cfg.device, cfg.batch_size, cfg.templates, probe) for m in cfg.models]
        else:
            models = list(tested)
            if [m.name for m in models] != list(cfg.models):
                raise UserInputError(f"tested models {[m.name for m in models]} are not the run config's models {cfg.models}")
        if settings.search == "gradient":
            for m in models:
                if m.torch_logits is None:
                    raise UserInputError(f"tested model {m.name!r} has no differentiable path for the gradient search; "
                                         "use --search greedy")
        return ds, oracle, models

    # -- the loop -----------------------------------------------------------------------
    def _evaluate(self, run_id: str, domain: DomainConfig, cfg: RunConfig, settings: FmrSettings, ds: Dataset,
                  oracle: Oracle, models: list[TestedModel]) -> str:
        size = settings.shard_size or auto_shard_size(ds)
        shards = [np.arange(i, min(i + size, len(ds))) for i in range(0, len(ds), size)]
        done = self.store.fmr.keys(run_id=run_id)
        self.skipped_units = len(done)
        self.events.start(len(shards) * len(models), len(done))

        def compute() -> dict[str, Any]:
            for shard, idx in enumerate(shards):
                todo = [m for m in models if (run_id, m.name, shard) not in done]
                if not todo:
                    continue
                batch = ds.load(idx)
                for _, path, why in batch.unreadable:
                    self.events.message(f"unreadable image skipped: {path} ({why})")
                clean_votes = oracle.votes(batch.images)
                for m in todo:
                    self._unit(run_id, domain, cfg, settings, ds, oracle, m, shard, batch, clean_votes)
            return {}

        return complete_run(self.store, run_id, compute)

    def _unit(self, run_id: str, domain: DomainConfig, cfg: RunConfig, settings: FmrSettings, ds: Dataset,
              oracle: Oracle, m: TestedModel, shard: int, batch: Batch, clean_votes: np.ndarray) -> None:
        t0 = time.perf_counter()
        assert batch.labels is not None
        labels = batch.labels.astype(np.int64)
        search = SearchConfig(seed=cfg.seed, budget=settings.budget, candidates=settings.candidates, step_size=settings.step_size)
        family, overrides = family_of(domain)
        if settings.search == "gradient":
            res = gradient_search(batch.images, labels, batch.indices, m, oracle, clean_votes, search, family)
        else:
            res = greedy_search(batch.images, labels, batch.indices, m, oracle, clean_votes, family, search, overrides)
        clean_preds = _argmax(m, batch.images)
        final_preds = _argmax(m, res.images)
        classes = ds.classes
        self.store.units.put(UnitRecord(
            run_id=run_id, model=m.name, corruption=CLEAN, severity=0, shard=shard, n=len(labels),
            confusion=confusion(labels, clean_preds, len(classes)), flips=0, preds=clean_preds.tolist(),
            indices=batch.indices.tolist(), n_unreadable=len(batch.unreadable), params={}, seed=cfg.seed,
            classes=classes, labels=labels.tolist(), elapsed_s=None, computed_at=now(),
        ))
        self.store.fmr.put(unit_record(run_id, m.name, shard, settings.search, cfg.seed, batch, labels, clean_preds,
                                   final_preds, res, time.perf_counter() - t0))
        self.computed_units += 1
        self.events.advance(1, len(labels))


def _argmax(m: TestedModel, images: np.ndarray) -> np.ndarray:
    if len(images) == 0:
        return np.zeros(0, dtype=np.int64)
    return m.logits(images).argmax(dim=1).numpy().astype(np.int64)


def unit_record(run_id: str, model: str, shard: int, search: str, seed: int, batch: Batch, labels: np.ndarray,
                clean_preds: np.ndarray, final_preds: np.ndarray, res: SearchResult, elapsed: float) -> FmrUnitRecord:
    # only perturbed images carry payloads: the rest are their clean image (PA counts them as such)
    perturbed = res.steps > 0
    images = [to_png_b64(res.images[i]) if perturbed[i] else None for i in range(len(labels))]
    originals = [to_png_b64(batch.images[i]) if perturbed[i] else None for i in range(len(labels))]
    size = sum(len(s) for s in images + originals if s)
    if size > MAX_UNIT_BYTES:
        raise UserInputError(f"an FMR unit of {len(labels)} images holds {size / 2**20:.1f} MB of images; "
                             "use a smaller --shard-size so every stored document stays far below 16 MB")
    return FmrUnitRecord(
        run_id=run_id, model=model, shard=shard, search=search, seed=seed, indices=batch.indices.tolist(),
        labels=labels.tolist(), clean_preds=clean_preds.tolist(), final_preds=final_preds.tolist(),
        validated=res.validated.tolist(), steps=res.steps.tolist(), oracle_clean=res.oracle_clean.tolist(),
        oracle_final=res.oracle_final.tolist(), ops=[[(n, float(v)) for n, v in o] for o in res.ops],
        images=images, originals=originals, elapsed_s=round(elapsed, 4), computed_at=now(),
    )


__all__ = ["FmrRunner", "ZeroShotTested", "family_of", "unit_record"]

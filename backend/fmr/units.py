"""FMR's units of work: one (tested model, shard), the same code on every executor.

Per shard the oracle scores the clean images once (its votes do not depend on the tested
model); then each tested model's search runs and its unit is upserted: the clean pass as an
ordinary ``units`` record (so the run's report shows clean accuracy like any run) and the
per-image outcomes with the generated images as an ``fmr`` record. The ``fmr`` record is
written last, so a unit counts as done only when both are stored; a killed run resumes
without recomputing stored units. ``fmr_unit`` is what the local executor calls in this
process and what a Ray actor calls on its node, so both store identical records.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone

import numpy as np

from domainbench.records.config import DomainConfig, FmrSettings, RunConfig
from domainbench.data import Batch, Dataset
from domainbench.engine.cancel import CancelWatch
from domainbench.engine.jobs import CLEAN
from domainbench.engine.scoring import confusion
from domainbench.engine.tasks import RunEvents, RunStats
from domainbench.errors import UserInputError
from domainbench.fmr.differentiable import gradient_search
from domainbench.fmr.generator import SearchConfig, SearchResult, greedy_search
from domainbench.fmr.images import to_png_b64
from domainbench.fmr.oracle import Oracle, load_oracle
from domainbench.fmr.tested import TestedModel, load_tested
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


def check_fmr_inputs(domain: DomainConfig, cfg: RunConfig, settings: FmrSettings, ds: Dataset) -> None:
    """What an FMR run needs of its plan and dataset, checked before any model is loaded."""
    family, _ = family_of(domain)
    if settings.search == "greedy" and not family:
        raise UserInputError("the domain config lists no corruptions: the greedy search perturbs with the domain's corruptions")
    if not ds.labelled:
        raise UserInputError(f"dataset {cfg.dataset} has no labels: FMR compares predictions with true labels")


@dataclass
class FmrModels:
    """An FMR run's oracle and tested models where they were loaded (names only on a Ray driver)."""

    names: list[str]
    oracle: Oracle | None = None
    tested: dict[str, TestedModel] = field(default_factory=dict)


def load_fmr_models(cfg: RunConfig, settings: FmrSettings, ds: Dataset, models: Sequence[str],
                    tested: Sequence[TestedModel] | None = None, cache: Store | None = None) -> tuple[Oracle, list[TestedModel]]:
    """The oracle and ``models`` loaded here and checked (classes, logit width, a gradient path for the
    gradient search); ``tested`` gives ready-made models instead (their names must be ``cfg.models``).
    Zero-shot classifiers come from ``cache``'s text embeddings when there."""
    oracle = load_oracle(settings.oracle, ds.classes, cfg.device, cfg.batch_size, cfg.templates, cache=cache,
                         options=cfg.model_args)
    probe = ds.load(np.arange(min(2, len(ds)))).images
    if tested is None:
        loaded = [load_tested(m, ds.classes, cfg.device, cfg.batch_size, cfg.templates, probe, cache=cache,
                              options=cfg.options_of(m)) for m in models]
    else:
        loaded = list(tested)
        if [m.name for m in loaded] != list(cfg.models):
            raise UserInputError(f"tested models {[m.name for m in loaded]} are not the run config's models {cfg.models}")
    if settings.search == "gradient":
        for m in loaded:
            if m.torch_logits is None:
                raise UserInputError(f"tested model {m.name!r} has no differentiable path for the gradient search; "
                                     "use --search greedy")
    return oracle, loaded


@dataclass
class FmrWork:
    """What an executor computes for an FMR run: the (tested model, shard) units still missing."""

    run_id: str
    cfg: RunConfig
    domain: DomainConfig
    settings: FmrSettings
    dataset: Dataset
    store: Store
    models: FmrModels
    shards: list[np.ndarray]
    #: (run_id, model, shard) of the stored FMR units (grows as units are written)
    done: set[tuple[str, str, int]]
    stats: RunStats
    events: RunEvents
    cancel: CancelWatch

    def plan(self) -> Iterator[tuple[int, list[str]]]:
        """Per shard, the tested models whose unit is still missing."""
        for shard in range(len(self.shards)):
            todo = [m for m in self.models.names if (self.run_id, m, shard) not in self.done]
            if todo:
                yield shard, todo

    def report_unreadable(self, batch: Batch) -> Batch:
        """``batch``, its unreadable files reported (the input pipeline hands each decoded shard here)."""
        for _, path, why in batch.unreadable:
            self.events.message(f"unreadable image skipped: {path} ({why})")
        return batch

    def unit_written(self, model: str, shard: int, n_images: int) -> None:
        self.done.add((self.run_id, model, shard))
        self.stats.computed_units += 1
        self.events.advance(1, n_images)
        self.cancel.check()


def fmr_unit(store: Store, run_id: str, domain: DomainConfig, cfg: RunConfig, settings: FmrSettings, classes: list[str],
             oracle: Oracle, m: TestedModel, shard: int, batch: Batch, clean_votes: np.ndarray) -> int:
    """Search one shard for tested model ``m`` and store its two records; returns the images in the unit."""
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
    store.units.put(UnitRecord(
        run_id=run_id, model=m.name, corruption=CLEAN, severity=0, shard=shard, n=len(labels),
        confusion=confusion(labels, clean_preds, len(classes)), flips=0, preds=clean_preds.tolist(),
        indices=batch.indices.tolist(), n_unreadable=len(batch.unreadable), params={}, seed=cfg.seed,
        classes=classes, labels=labels.tolist(), elapsed_s=None, computed_at=_now(),
    ))
    store.fmr.put(unit_record(run_id, m.name, shard, settings.search, cfg.seed, batch, labels, clean_preds,
                              final_preds, res, time.perf_counter() - t0))
    return len(labels)


def score_fmr_shards(work: FmrWork, oracle: Oracle, tested: dict[str, TestedModel],
                     batches: Iterable[tuple[int, list[str], Batch]]) -> None:
    """The in-process loop over the plan's ``batches`` (shard, missing tested models, clean images; from the
    input pipeline): per shard the oracle's clean votes once, then each missing tested model's unit."""
    for shard, todo, batch in batches:
        clean_votes = oracle.votes(batch.images)
        for name in todo:
            n = fmr_unit(work.store, work.run_id, work.domain, work.cfg, work.settings, work.dataset.classes, oracle,
                         tested[name], shard, batch, clean_votes)
            work.unit_written(name, shard, n)


def _argmax(m: TestedModel, images: np.ndarray) -> np.ndarray:
    if len(images) == 0:
        return np.zeros(0, dtype=np.int64)
    return m.logits(images).argmax(dim=1).numpy().astype(np.int64)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


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
        images=images, originals=originals, elapsed_s=round(elapsed, 4), computed_at=_now(),
    )

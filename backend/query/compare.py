"""Paired comparison of the models of one or more stored runs (``domainbench compare``, the UI).

Runs can be compared only when they evaluated the same images: the same dataset (as named, with
the same classes, and the same content fingerprint where both runs recorded one), the same image indices with the same labels, and the same seed (so each corrupted
image is the same pixels in both runs). Otherwise the comparison is refused, saying why.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import cache

import numpy as np

from domainbench.engine.adaptive import arrival_ranks
from domainbench.query.confidence import OutcomesReader, load_outcomes, read_outcomes
from domainbench.errors import UserInputError
from domainbench.metrics.classification import MetricInputError
from domainbench.metrics.comparison import Comparison, FlipVerdict, compare_flips, compare_models
from domainbench.metrics.outcomes import ImageOutcomes
from domainbench.records.report import RunReport
from domainbench.stats.bootstrap import DEFAULT_RESAMPLES
from domainbench.stats.intervals import DEFAULT_CONFIDENCE, check_confidence
from domainbench.store import Store
from domainbench.store.records import RunRecord


def _dataset_key(run: RunRecord) -> tuple[object, ...]:
    """The dataset as the user named it and its classes; which of its images were used is checked by index."""
    return (run.config.dataset, None if run.dataset is None else tuple(run.dataset.classes))


def cell_identities(run: RunRecord) -> dict[str, tuple[object, ...]]:
    """Per cell name of ``run``, what its images are made by: a corruption's parameters and ladder version, a
    composition's steps (each with its ladder version), a shift folder's content. Two runs' cells of one name
    are the same images only when these are equal (``gaussian_noise@3`` with ``sigma = 0.9`` is another cell)."""
    out: dict[str, tuple[object, ...]] = {}
    for c in run.domain.corruptions:
        out[c.name] = ("corruption", json.dumps(c.params, sort_keys=True, default=str), run.ladder_version(c.name))
    for comp in run.domain.compositions:
        out[comp.cell_name] = ("composition", tuple((s.corruption, s.severity, run.ladder_versions.get(s.corruption))
                                                    for s in comp.steps))
    shifts = run.dataset.shifts if run.dataset is not None else {}
    for sh in run.domain.shift:
        fp = shifts.get(sh.name)
        out[sh.cell_name] = ("shift", None if fp is None else (fp.kind, fp.files, fp.listing_sha256, fp.content_sha256,
                                                              fp.version))
    return out


def _differing_cells(first: dict[str, tuple[object, ...]], other: dict[str, tuple[object, ...]]) -> list[str]:
    return sorted(name for name in first.keys() & other.keys() if first[name] != other[name])


def merged_outcomes(store: Store, run_ids: Sequence[str], read: OutcomesReader = read_outcomes,
                    differing: list[str] | None = None) -> ImageOutcomes:
    """The runs' per-image outcomes as one, after checking they are on the same images.

    A model evaluated by several of the runs is taken from the first run that has it. ``read``: how a run's
    outcomes are read (a cached reader shares them with the run's intervals). A cell whose name a later run
    shares with an earlier one but that is made differently (``cell_identities``) is left out of the later
    run's models, so it is never paired across the runs; its name is added to ``differing``.
    """
    if not run_ids:
        raise UserInputError("compare needs at least one RUN; see `domainbench ls`")
    runs = []
    for rid in run_ids:
        run = store.get_run(rid)
        if run is None:
            raise UserInputError(f"no run {rid!r} in {store.description}; see `domainbench ls`")
        runs.append(run)
    first = runs[0]
    merged: ImageOutcomes | None = None
    #: per cell name, how the first run that has it made it
    made: dict[str, tuple[object, ...]] = {}
    for run in runs:
        if _dataset_key(run) != _dataset_key(first):
            raise UserInputError(f"runs {first.run_id} and {run.run_id} evaluated different datasets "
                                 f"({_dataset_key(first)[0]} vs {_dataset_key(run)[0]}); compare runs on the same images")
        fa = first.dataset.fingerprint if first.dataset is not None else None
        fb = run.dataset.fingerprint if run.dataset is not None else None
        if fa is not None and fb is not None and fa.differences(fb):
            raise UserInputError(f"runs {first.run_id} and {run.run_id} evaluated different images "
                                 f"(dataset fingerprints differ: {fa.differences(fb)}); compare runs on the same images")
        if run.config.seed != first.config.seed:
            raise UserInputError(f"runs {first.run_id} and {run.run_id} used different seeds ({first.config.seed} vs "
                                 f"{run.config.seed}), so their corrupted images differ; compare runs made with the same --seed")
        try:
            out = load_outcomes(store, run.run_id, read)
        except MetricInputError as e:
            raise UserInputError(f"run {run.run_id}: {e}") from None
        ident = cell_identities(run)
        other = _differing_cells(made, ident)
        made = {**ident, **made}
        if merged is None:
            merged = out
            continue
        if other:
            if differing is not None:
                differing.extend(n for n in other if n not in differing)
            out = ImageOutcomes(indices=out.indices, labels=out.labels,
                                preds={k: v for k, v in out.preds.items() if k[1] not in other})
        same_labels = (out.labels is None) == (merged.labels is None) and (
            out.labels is None or np.array_equal(out.labels, merged.labels))
        if not np.array_equal(out.indices, merged.indices) or not same_labels:
            raise UserInputError(f"runs {first.run_id} and {run.run_id} evaluated different images of the dataset "
                                 f"({merged.n} vs {out.n} images, or other indices/labels); compare runs on the same images")
        known = set(merged.models())
        merged = ImageOutcomes(indices=merged.indices, labels=merged.labels,
                               preds={**merged.preds, **{k: v for k, v in out.preds.items() if k[0] not in known}})
    assert merged is not None
    return merged


def pooled_outcomes(store: Store, run_ids: Sequence[str], read: OutcomesReader = read_outcomes) -> ImageOutcomes:
    """The runs' per-image outcomes as one, every run's cells kept (``merged_outcomes`` keeps a model's cells of the
    first run that has it): for the tied groups of several domains' runs on the same images, each model judged over
    all of its corrupted cells. A later run's cell that an earlier run made the same way is the same images and
    predictions and is kept once; one of the same name made differently is kept as ``name [run id]``."""
    merged = merged_outcomes(store, run_ids, read)  # the checks: same dataset, fingerprint, seed, images, labels
    preds = dict(merged.preds)
    made: dict[str, tuple[object, ...]] = {}
    for rid in run_ids:
        run = store.get_run(rid)
        assert run is not None  # merged_outcomes found every run
        ident = cell_identities(run)
        other = set(_differing_cells(made, ident))
        made = {**ident, **made}
        out = load_outcomes(store, rid, read)
        for (model, corruption, severity), p in out.preds.items():
            key = (model, f"{corruption} [{rid}]" if corruption in other else corruption, severity)
            preds.setdefault(key, p)
    return ImageOutcomes(indices=merged.indices, labels=merged.labels, preds=preds)


def pooled_comparison(store: Store, run_ids: Sequence[str], confidence: float = DEFAULT_CONFIDENCE,
                      resamples: int = DEFAULT_RESAMPLES, read: OutcomesReader = read_outcomes) -> Comparison:
    """The paired comparison of the runs' models over every run's corrupted cells (``pooled_outcomes``): the
    Compare page's tied groups across domains. Adaptive runs are refused: their tests follow each run's own order."""
    confidence = check_confidence(confidence)
    read = cache(read)
    adaptive = [rid for rid in run_ids if read(store, rid).adaptive_units is not None]
    if adaptive and len(run_ids) > 1:
        raise UserInputError(f"run(s) {', '.join(adaptive)} stopped their cells adaptively: their tests follow each "
                             "run's own order of images, so they are not pooled with other runs; compare them alone")
    if len(run_ids) == 1:
        return paired_comparison(store, run_ids, confidence=confidence, resamples=resamples, read=read)
    outcomes = pooled_outcomes(store, run_ids, read)
    if outcomes.labels is None:
        raise UserInputError(f"run(s) {', '.join(run_ids)} are on an unlabelled dataset: models can only be compared "
                             "on labelled images")
    configured = [m for rid in run_ids for m in store.get_run(rid).config.models]  # type: ignore[union-attr]
    evaluated = set(outcomes.models())
    available = list(dict.fromkeys([m for m in configured if m in evaluated] + sorted(evaluated)))
    if len(available) < 2:
        raise UserInputError(f"run(s) {', '.join(run_ids)} evaluated only {', '.join(available)}; a comparison needs two "
                             "models")
    first = store.get_run(run_ids[0])
    assert first is not None
    try:
        return compare_models(outcomes, available, confidence, resamples, first.config.seed)
    except MetricInputError as e:
        raise UserInputError(str(e)) from None


def paired_comparison(store: Store, run_ids: Sequence[str], models: Sequence[str] | None = None,
                      confidence: float = DEFAULT_CONFIDENCE, resamples: int = DEFAULT_RESAMPLES,
                      read: OutcomesReader = read_outcomes) -> Comparison:
    """The models' paired tests per pair and cell, Holm, and the verdicts (``metrics.comparison``: one rule for "beats")."""
    confidence = check_confidence(confidence)
    differing: list[str] = []
    read = cache(read)  # the outcomes below and the adaptive look after them: each run's units read once, not twice
    outcomes = merged_outcomes(store, run_ids, read, differing)
    evaluated = set(outcomes.models())
    # in the order the runs list them (A, B of each pair as the user wrote them)
    configured = [m for rid in run_ids for m in store.get_run(rid).config.models]  # type: ignore[union-attr]
    available = list(dict.fromkeys([m for m in configured if m in evaluated] + sorted(evaluated)))
    if models:
        unknown = [m for m in models if m not in available]
        if unknown:
            raise UserInputError(f"--models: {', '.join(unknown)} not evaluated by run(s) {', '.join(run_ids)}; "
                                 f"choose among {', '.join(available)}")
        if len(set(models)) < 2:
            raise UserInputError(f"--models: a comparison needs two different models, got {', '.join(models)}")
    elif len(available) < 2:
        raise UserInputError(f"run(s) {', '.join(run_ids)} evaluated only {', '.join(available)}; a comparison needs two "
                             "models: add a run with another model on the same images")
    if outcomes.labels is None:
        raise UserInputError(f"run(s) {', '.join(run_ids)} are on an unlabelled dataset: models can only be compared "
                             "on labelled images")
    first = store.get_run(run_ids[0])
    assert first is not None
    # an adaptive run stopped its cells by looking at the outcomes: its comparison is made of anytime-valid tests
    # along the order its images were evaluated in (any run merged with it is read along the same order)
    adaptive = next((u for u in (read(store, rid).adaptive_units for rid in run_ids) if u is not None), None)
    arrival = None if adaptive is None else arrival_ranks(adaptive, outcomes.indices, first.config.seed)
    try:
        comparison = compare_models(outcomes, list(models) if models else available, confidence, resamples,
                                    first.config.seed, arrival=arrival)
        return comparison.model_copy(update={"differing_cells": differing}) if differing else comparison
    except MetricInputError as e:
        raise UserInputError(str(e)) from None


def flip_comparison(store: Store, run_ids: Sequence[str], confidence: float = DEFAULT_CONFIDENCE,
                    read: OutcomesReader = read_outcomes) -> list[FlipVerdict]:
    """The runs' models compared by label flips (``metrics.comparison.compare_flips``): the verdict of an unlabelled run,
    where balanced accuracy is not defined."""
    confidence = check_confidence(confidence)
    outcomes = merged_outcomes(store, run_ids, cache(read))
    configured = [m for rid in run_ids for m in store.get_run(rid).config.models]  # type: ignore[union-attr]
    evaluated = set(outcomes.models())
    names = list(dict.fromkeys([m for m in configured if m in evaluated] + sorted(evaluated)))
    try:
        return compare_flips(outcomes, names, confidence)
    except MetricInputError as e:
        raise UserInputError(str(e)) from None


def run_pairs(store: Store, report: RunReport, confidence: float = DEFAULT_CONFIDENCE,
              read: OutcomesReader = read_outcomes) -> dict[str, object]:
    """The JSON export's ``pairs`` and ``verdicts`` of a run: empty for one model or an unlabelled dataset."""
    if len(report.model_names) < 2 or not report.models[0].labeled:
        return {"pairs": [], "verdicts": []}
    c = paired_comparison(store, [report.run_id], confidence=confidence, read=read)
    return {"pairs": [p.model_dump(mode="json") for p in c.pairs], "verdicts": [v.model_dump(mode="json") for v in c.verdicts]}

"""VQA and retrieval evaluated under a plan's cells, in memory: the computation a task run kind stores.

``evaluate_task(domain, "vqa" | "retrieval", MANIFEST, models)`` checks the manifest and that every model can
do the task (one ``UserInputError`` before any model loads), decodes the manifest's images once, and for every
cell of the plan (the clean cell, each corruption x severity, each composition: ``runner.cells_of``) corrupts
them once with the same seeded jobs as a classification run (``jobs.run_job``: an image's pixels are a pure
function of the run seed, the cell and the image's index in the whole manifest, so ``--limit`` changes which
images are seen, never their pixels) and hands the same corrupted images to every model.

It returns the export rows (``metrics.task_report``), the Holm-corrected paired tests of every metric, and
the per-question (VQA) or per-query (retrieval) prediction rows. It writes nothing: storing units, resuming
and the worker queue belong to the run-kind protocol that will call it cell by cell.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from domainbench.records.config import DomainConfig
from domainbench.data import decode_files
from domainbench.data.decoding import display_name
from domainbench.data.manifests import (
    ManifestFingerprint,
    RetrievalManifest,
    VQAManifest,
    is_yes_no,
    load_retrieval_manifest,
    load_vqa_manifest,
)
from domainbench.engine.jobs import CLEAN, run_job
from domainbench.engine.runner import cells_of
from domainbench.errors import UserInputError
from domainbench.metrics.retrieval import RetrievalScores, score_retrieval
from domainbench.metrics.task_report import (
    RETRIEVAL_METRICS,
    VQA_METRICS,
    paired_tests,
    retrieval_outcomes,
    task_row,
    vqa_outcomes,
)
from domainbench.metrics.vqa import VQAScores, normalize_answer, score_vqa
from domainbench.records.model_backends import kind_of
from domainbench.models.generative import MAX_NEW_TOKENS
from domainbench.models.vqa_answering import Ask, answer_questions, check_max_new_tokens, check_model_for_task, embed_for_retrieval
from domainbench.stats.bootstrap import DEFAULT_RESAMPLES
from domainbench.stats.intervals import DEFAULT_CONFIDENCE, check_confidence

Task = Literal["vqa", "retrieval"]
TASKS: tuple[str, ...] = ("vqa", "retrieval")


@dataclass
class TaskResult:
    task: str
    fingerprint: ManifestFingerprint
    rows: list[dict[str, Any]] = field(default_factory=list)  # one per model x cell
    paired: list[dict[str, Any]] = field(default_factory=list)  # per metric, cell and pair of models
    predictions: list[dict[str, Any]] = field(default_factory=list)


def check_task(task: str) -> Task:
    if task not in TASKS:
        raise UserInputError(f"--task {task!r} is not one of {', '.join(TASKS)}; classification runs go through "
                             "`domainbench run` without --task")
    return task  # type: ignore[return-value]


def _decode(paths: list[Path], size: int) -> np.ndarray:
    decoded = decode_files(paths, size)
    bad = [(p, d) for p, d in zip(paths, decoded) if isinstance(d, str)]
    if bad:
        p, why = bad[0]
        raise UserInputError(f"image {display_name(str(p))} does not decode ({why}); replace the file or remove its "
                             f"rows from the manifest ({len(bad)} such image(s))")
    return np.stack([d for d in decoded if not isinstance(d, str)])


def _open_questions(m: VQAManifest) -> list[str]:
    unit = "line" if m.path.suffix.lower() == ".jsonl" else "record"
    return [f"{unit} {m.line_of[i]} {m.rows[i].question!r}" for i in m.open_questions()]


@dataclass
class TaskInputs:
    """A task manifest checked against the run's models and its images decoded: what every cell reads."""

    task: str
    manifest: VQAManifest | RetrievalManifest
    images: np.ndarray
    indices: np.ndarray  # each image's index in the whole manifest (its corruption draws depend on it)
    cells: list[Any]
    fingerprint: ManifestFingerprint
    #: model name -> its caption embeddings (retrieval: captions are clean in every cell, encoded once)
    captions: dict[str, np.ndarray] = field(default_factory=dict)


def prepare_task(domain: DomainConfig, task: str, manifest: str | Path, models: Sequence[str], *,
                 limit: int | None = None, seed: int = 0, image_size: int = 224,
                 max_new_tokens: int = MAX_NEW_TOKENS) -> TaskInputs:
    """Every refusal (the task, the manifest's rows, a model that cannot do the task) before a model loads;
    then the manifest's images decoded once."""
    task = check_task(task)
    check_max_new_tokens(max_new_tokens)
    if not models:
        raise UserInputError("give at least one model with --models")
    m: VQAManifest | RetrievalManifest = (load_vqa_manifest(manifest) if task == "vqa"
                                          else load_retrieval_manifest(manifest)).subset(limit, seed)
    open_questions = _open_questions(m) if isinstance(m, VQAManifest) else []
    for name in models:  # every refusal before a model loads or an image decodes
        check_model_for_task(name, kind_of(name) == "generative", task, open_questions)
    images = _decode(m.images, image_size)
    indices = np.arange(len(m.images)) if m.origin is None else m.origin
    return TaskInputs(task, m, images, indices, cells_of(domain), m.fingerprint())


def cell_pixels(inputs: TaskInputs, cell: Any, seed: int) -> np.ndarray:
    """The manifest's images under ``cell``, drawn as a classification run of the same seed draws them."""
    return inputs.images if cell.corruption == CLEAN else run_job(cell.job(0), inputs.images, inputs.indices, seed).images


def _floats(outcomes: dict[str, tuple[np.ndarray, np.ndarray]]) -> dict[str, list[list[float]]]:
    return {k: [np.asarray(v, float).tolist(), np.asarray(c, float).tolist()] for k, (v, c) in outcomes.items()}


def evaluate_cell(inputs: TaskInputs, name: str, model: Any, cell: Any, pixels: np.ndarray,
                  clean_raw: dict[str, list[Any]] | None, *, batch_size: int = 8,
                  max_new_tokens: int = MAX_NEW_TOKENS) -> dict[str, Any]:
    """One model on one cell: a ``TaskUnitRecord``'s fields but its key (``clean_raw``: the model's clean unit's
    ``raw``, None on the clean cell itself)."""
    m = inputs.manifest
    if isinstance(m, VQAManifest):
        answers = _vqa_answers(model, pixels, m, batch_size, max_new_tokens)
        clean = None if clean_raw is None else list(clean_raw["answers"])
        scores = score_vqa(answers, [r.answers for r in m.rows], [is_yes_no(r) for r in m.rows],
                           [bool(r.choices) for r in m.rows], clean_answers=clean)
        head = {"images": int(np.unique(m.image_of).size), "questions": int(scores.accuracy.size)}
        return {"head": head, "outcomes": _floats(vqa_outcomes(scores, m.image_of)), "raw": {"answers": answers},
                "predictions": _vqa_predictions(name, cell.corruption, cell.severity, m, answers, scores,
                                                answers if clean is None else clean)}
    image_emb, caption_emb = embed_for_retrieval(model, pixels, m.captions, batch_size, inputs.captions.get(name))
    inputs.captions[name] = caption_emb
    rscores = score_retrieval(image_emb, caption_emb, m.caption_image)
    clean_r = None if clean_raw is None else RetrievalScores(**{k: np.asarray(v) for k, v in clean_raw.items()})
    head = {"images": int(rscores.image_ranks.size), "captions": int(rscores.caption_ranks.size)}
    raw = {f: np.asarray(getattr(rscores, f)).tolist() for f in RETRIEVAL_RAW}
    return {"head": head, "outcomes": _floats(retrieval_outcomes(rscores, clean_r)), "raw": raw,
            "predictions": _retrieval_predictions(name, cell.corruption, cell.severity, m, rscores,
                                                  rscores if clean_r is None else clean_r)}


#: the fields of a ``RetrievalScores`` a retrieval unit stores (what a later cell's top-1 changes compare with)
RETRIEVAL_RAW = ("caption_ranks", "image_ranks", "caption_top1", "image_top1", "caption_image")


def unit_outcomes(unit: Any) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """A stored unit's (``TaskUnitRecord`` or ``evaluate_cell`` dict) outcomes as arrays."""
    outcomes = unit["outcomes"] if isinstance(unit, dict) else unit.outcomes
    return {k: (np.asarray(v, float), np.asarray(c, float)) for k, (v, c) in outcomes.items()}


def task_rows(task: str, units: Sequence[Any], confidence: float = DEFAULT_CONFIDENCE,
              resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(export rows, Holm-corrected paired tests) of ``units`` in their order, at ``confidence``.

    ``units``: ``TaskUnitRecord``s (or objects with their model, corruption, severity, head and outcomes), so a
    stored run's numbers are recomputed at any confidence from what it stored."""
    check_confidence(confidence)
    metrics = VQA_METRICS if task == "vqa" else RETRIEVAL_METRICS
    rows, outcomes = [], {}
    for u in units:
        o = unit_outcomes(u)
        rows.append(task_row({"model": u.model, "corruption": u.corruption, "severity": u.severity, **u.head}, o,
                             metrics, confidence, resamples, seed))
        outcomes[(u.model, u.corruption, u.severity)] = o
    paired = [p for metric in metrics for p in paired_tests(outcomes, metric)]
    return rows, paired


def evaluate_task(domain: DomainConfig, task: str, manifest: str | Path, models: Sequence[str], *,
                  limit: int | None = None, seed: int = 0, batch_size: int = 8,
                  max_new_tokens: int = MAX_NEW_TOKENS, device: str = "cpu", image_size: int = 224,
                  confidence: float = DEFAULT_CONFIDENCE, resamples: int = DEFAULT_RESAMPLES) -> TaskResult:
    """Evaluate ``models`` on a task manifest under every cell of ``domain`` (module docstring)."""
    check_confidence(confidence)
    inputs = prepare_task(domain, task, manifest, models, limit=limit, seed=seed, image_size=image_size,
                          max_new_tokens=max_new_tokens)
    from domainbench.models import create_model

    loaded = {name: create_model(name, device) for name in models}
    units: list[Any] = []
    clean: dict[str, dict[str, list[Any]]] = {}
    for cell in inputs.cells:
        pixels = cell_pixels(inputs, cell, seed)
        for name, model in loaded.items():
            unit = evaluate_cell(inputs, name, model, cell, pixels, clean.get(name), batch_size=batch_size,
                                 max_new_tokens=max_new_tokens)
            if cell.corruption == CLEAN:
                clean[name] = unit["raw"]
            units.append(_Unit(name, cell.corruption, cell.severity, unit["head"], unit["outcomes"],
                               unit["predictions"]))
    rows, paired = task_rows(inputs.task, units, confidence, resamples, seed)
    return TaskResult(inputs.task, inputs.fingerprint, rows, paired, [p for u in units for p in u.predictions])


def gallery_pixels(domain: DomainConfig, task: str, manifest: str | Path, corruption: str, severity: int,
                   images: Sequence[int], *, limit: int | None = None, seed: int = 0,
                   image_size: int = 224) -> tuple[np.ndarray, np.ndarray]:
    """(clean, corrupted) pixels of a stored run's ``images`` (indices as its prediction rows give them) in one
    cell: re-created from the manifest and the run's seed, exactly as the run corrupted them."""
    m: VQAManifest | RetrievalManifest = (load_vqa_manifest(manifest) if task == "vqa"
                                          else load_retrieval_manifest(manifest)).subset(limit, seed)
    chosen = np.asarray(images, dtype=np.int64)
    clean = _decode([m.images[i] for i in chosen], image_size)
    cell = next((c for c in cells_of(domain) if (c.corruption, c.severity) == (corruption, severity)), None)
    if cell is None:
        raise UserInputError(f"the run's plan has no cell {corruption}/{severity}")
    if cell.corruption == CLEAN:
        return clean, clean
    origin = chosen if m.origin is None else m.origin[chosen]
    return clean, run_job(cell.job(0), clean, origin, seed).images


@dataclass
class _Unit:
    model: str
    corruption: str
    severity: int
    head: dict[str, Any]
    outcomes: dict[str, list[list[float]]]
    predictions: list[dict[str, Any]]


def _vqa_answers(model: Any, pixels: np.ndarray, m: VQAManifest, batch_size: int, max_new_tokens: int) -> list[str]:
    asks = [Ask(int(m.image_of[q]), r.question, r.choices, is_yes_no(r)) for q, r in enumerate(m.rows)]
    return answer_questions(model, pixels, asks, batch_size, max_new_tokens)


def _vqa_predictions(model: str, corruption: str, severity: int, m: VQAManifest, answers: list[str],
                     scores: VQAScores, clean: list[str]) -> list[dict[str, Any]]:
    rows = []
    for q, (r, answer) in enumerate(zip(m.rows, answers)):
        acc = scores.accuracy[q]
        rows.append({"model": model, "corruption": corruption, "severity": severity, "image": int(m.image_of[q]),
                     "path": str(m.images[m.image_of[q]]), "question": r.question,
                     "references": list(r.answers) if r.answers else None, "answer": answer,
                     "answer_normalised": normalize_answer(answer), "correct": None if np.isnan(acc) else float(acc),
                     "clean_answer": clean[q],
                     "flipped": None if scores.flipped is None else bool(scores.flipped[q])})
    return rows


def _retrieval_predictions(model: str, corruption: str, severity: int, m: RetrievalManifest, s: RetrievalScores,
                           clean: RetrievalScores) -> list[dict[str, Any]]:
    by_caption, by_image = s.top1_changes(clean)
    captions = m.captions
    rows = [{"model": model, "corruption": corruption, "severity": severity, "query": "caption", "text": captions[t],
             "image": int(s.caption_image[t]), "path": str(m.images[s.caption_image[t]]),
             "rank": int(s.caption_ranks[t]) + 1, "top1": int(s.caption_top1[t]), "top1_changed": bool(by_caption[t])}
            for t in range(len(captions))]
    rows += [{"model": model, "corruption": corruption, "severity": severity, "query": "image", "text": None,
              "image": i, "path": str(m.images[i]), "rank": int(s.image_ranks[i]) + 1, "top1": int(s.image_top1[i]),
              "top1_changed": bool(by_image[i])} for i in range(len(m.images))]
    return rows


__all__ = ["TASKS", "TaskInputs", "TaskResult", "cell_pixels", "check_task", "evaluate_cell", "evaluate_task",
           "gallery_pixels", "prepare_task", "task_rows", "unit_outcomes"]

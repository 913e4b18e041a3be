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
    retrieval_row,
    vqa_outcomes,
    vqa_row,
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


def evaluate_task(domain: DomainConfig, task: str, manifest: str | Path, models: Sequence[str], *,
                  limit: int | None = None, seed: int = 0, batch_size: int = 8,
                  max_new_tokens: int = MAX_NEW_TOKENS, device: str = "cpu", image_size: int = 224,
                  confidence: float = DEFAULT_CONFIDENCE, resamples: int = DEFAULT_RESAMPLES) -> TaskResult:
    """Evaluate ``models`` on a task manifest under every cell of ``domain`` (module docstring)."""
    task = check_task(task)
    check_confidence(confidence)
    check_max_new_tokens(max_new_tokens)
    if not models:
        raise UserInputError("give at least one model with --models")
    m: VQAManifest | RetrievalManifest = (load_vqa_manifest(manifest) if task == "vqa"
                                          else load_retrieval_manifest(manifest)).subset(limit, seed)
    open_questions = _open_questions(m) if isinstance(m, VQAManifest) else []
    for name in models:  # every refusal before a model loads or an image decodes
        check_model_for_task(name, kind_of(name) == "generative", task, open_questions)
    from domainbench.models import create_model

    images = _decode(m.images, image_size)
    indices = np.arange(len(m.images)) if m.origin is None else m.origin
    loaded = {name: create_model(name, device) for name in models}
    cells = cells_of(domain)
    result = TaskResult(task, m.fingerprint())
    outcomes: dict[tuple[str, str, int], dict[str, tuple[np.ndarray, np.ndarray]]] = {}
    clean_state: dict[str, Any] = {}
    for cell in cells:
        pixels = images if cell.corruption == CLEAN else run_job(cell.job(0), images, indices, seed).images
        for name, model in loaded.items():
            key = (name, cell.corruption, cell.severity)
            if isinstance(m, VQAManifest):
                answers = _vqa_answers(model, pixels, m, batch_size, max_new_tokens)
                clean = clean_state.get(name)
                scores = score_vqa(answers, [r.answers for r in m.rows], [is_yes_no(r) for r in m.rows],
                                   [bool(r.choices) for r in m.rows], clean_answers=clean)
                if cell.corruption == CLEAN:
                    clean_state[name] = answers
                result.rows.append(vqa_row(name, cell.corruption, cell.severity, scores, m.image_of, confidence,
                                           resamples, seed))
                result.predictions += _vqa_predictions(name, cell.corruption, cell.severity, m, answers, scores,
                                                       clean_state[name])
                outcomes[key] = vqa_outcomes(scores, m.image_of)
            else:
                image_emb, caption_emb = embed_for_retrieval(model, pixels, m.captions, batch_size)
                rscores = score_retrieval(image_emb, caption_emb, m.caption_image)
                clean_r = clean_state.get(name)
                if cell.corruption == CLEAN:
                    clean_state[name] = rscores
                result.rows.append(retrieval_row(name, cell.corruption, cell.severity, rscores, clean_r, confidence,
                                                 resamples, seed))
                result.predictions += _retrieval_predictions(name, cell.corruption, cell.severity, m, rscores,
                                                             clean_state[name])
                outcomes[key] = retrieval_outcomes(rscores, clean_r)
    for metric in VQA_METRICS if task == "vqa" else RETRIEVAL_METRICS:
        result.paired += paired_tests(outcomes, metric)
    return result


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


__all__ = ["TASKS", "TaskResult", "check_task", "evaluate_task"]

"""What a generative model's result adds to a stored unit (the ``vlm`` field of UnitRecord)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from domainbench.models.generative import VLMResult


def vlm_unit_fields(vlm: VLMResult | None) -> dict[str, Any]:
    """UnitRecord keyword arguments for a generative model's result; none for a dual encoder."""
    if vlm is None:
        return {}
    extras: dict[str, Any] = {"unparsed": vlm.unparsed}
    if vlm.answers is not None:
        extras["answers"] = list(vlm.answers)
    if vlm.per_question is not None:
        extras["question_preds"] = vlm.per_question.tolist()
    return {"vlm": extras}


def unparseable_rates(units: Iterable[Any]) -> dict[tuple[str, str, int], float]:
    """(model, corruption, severity) -> fraction of answers that named no class, for every cell a
    generative model answered freely (--vlm-mode generate); empty for runs without such models."""
    unparsed: dict[tuple[str, str, int], int] = {}
    counts: dict[tuple[str, str, int], int] = {}
    for u in units:
        if u.vlm is None or u.vlm.answers is None:
            continue
        key = (u.model, u.corruption, u.severity)
        unparsed[key] = unparsed.get(key, 0) + u.vlm.unparsed
        counts[key] = counts.get(key, 0) + u.n
    return {k: unparsed[k] / counts[k] for k in counts if counts[k]}


def load_unparseable_rates(store: Any, run_id: str) -> dict[tuple[str, str, int], float]:
    """The run's unparseable rates; its units are read only when it asked for free answers."""
    run = store.get_run(run_id)
    if run is None or not any(opts.get("mode") == "generate" for opts in run.config.model_args.values()):
        return {}
    return unparseable_rates(store.units(run_id))


def question_spread(store: Any, run_id: str) -> tuple[list[str], list[dict[str, Any]]]:
    """Prompt sensitivity of a run asked several --question: per model and cell, the top-1 accuracy
    under each question alone and their spread (max - min). ([], []) when it does not apply
    (one question, or unlabelled images)."""
    run = store.get_run(run_id)
    # the questions are per-model options: the first model asked several gives the list shown
    asked = [list(opts.get("questions") or []) for opts in run.config.model_args.values()] if run is not None else []
    questions = next((q for q in asked if len(q) >= 2), [])
    if len(questions) < 2:
        return [], []
    units = store.units(run_id)
    labels: dict[tuple[str, int], int] = {}
    for u in units:
        if u.labels is not None and u.corruption == "clean":
            for i, y in zip(np.asarray(u.indices).tolist(), np.asarray(u.labels).tolist()):
                labels[(u.model, i)] = y
    correct: dict[tuple[str, str, int], np.ndarray] = {}
    seen: dict[tuple[str, str, int], int] = {}
    for u in units:
        if u.vlm is None or u.vlm.question_preds is None:
            continue
        ys = [labels.get((u.model, i)) for i in np.asarray(u.indices).tolist()]
        if any(y is None for y in ys):
            continue
        key = (u.model, u.corruption, u.severity)
        hits = (np.asarray(u.vlm.question_preds) == np.asarray(ys)[None, :]).sum(axis=1)
        correct[key] = correct.get(key, 0) + hits
        seen[key] = seen.get(key, 0) + len(ys)
    rows = []
    for key in sorted(correct, key=lambda k: (k[0], k[1] != "clean", k[1], k[2])):
        acc = (correct[key] / seen[key]).tolist()
        rows.append({"model": key[0], "corruption": key[1], "severity": key[2], "accuracy": acc,
                     "spread": max(acc) - min(acc)})
    return questions, rows

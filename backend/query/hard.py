"""The images most models get wrong under the domain's corruptions (``domainbench export RUN --hard -o hard/``).

For labelling or fine-tuning: per image, its *hardness* is the share of (model, corrupted cell) pairs whose
prediction is wrong (on an unlabelled dataset: differs from that model's clean prediction, a flip). An image is
hard when that share is at least ``threshold`` (default one half: most models get it wrong under most of the
domain's corruptions). The folder gets ``hard.csv`` (one row per hard image, hardest first, with why: the share,
how many models are wrong on it clean and under corruption, its worst cells and the commonest wrong answer) and
``files.txt`` (the clean image files, one a line; for an in-memory dataset such as the bundled sample, their
indices). ``export --hard`` also writes each hard image as its worst cells made it (``corrupted/``, listed in
``corrupted.csv``): remade by the engine's own job from the run's seed (``query.recreate``), so the pixels are
those the models saw.
"""

from __future__ import annotations

import csv
import io
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from domainbench.query.confidence import load_outcomes
from domainbench.errors import UserInputError
from domainbench.metrics.classification import MetricInputError
from domainbench.metrics.outcomes import MISSING
from domainbench.store import Store

CLEAN = "clean"
COLUMNS = {
    "image": "index of the image in the run's dataset",
    "path": "the clean image file (empty for an in-memory dataset such as the sample)",
    "label": "true class (empty when unlabelled)",
    "hardness": "share of (model, corrupted cell) pairs that get it wrong (unlabelled: that flip it)",
    "pairs": "(model, corrupted cell) pairs that evaluated it",
    "models_wrong_clean": "models wrong on the clean image (unlabelled: empty)",
    "models_mostly_wrong": "models wrong (flipping) in at least half of the corrupted cells",
    "worst_cells": "the corrupted cells where most models are wrong on it, most first",
    "common_answer": "the commonest wrong (flipped-to) answer under corruption",
}


@dataclass(frozen=True)
class HardImages:
    rows: list[dict[str, object]]
    files: list[str]
    n_images: int
    threshold: float
    #: per row, the (corruption, severity) of its worst cells (``worst_cells``), for their corrupted copies
    cells: list[list[tuple[str, int]]] = field(default_factory=list)


def hard_images(store: Store, run_id: str, threshold: float = 0.5) -> HardImages:
    """The run's hard images (see the module); ``UserInputError`` for an unknown run or one without outcomes."""
    if not 0 < threshold <= 1:
        raise UserInputError(f"--hard-threshold {threshold:g} must lie in (0, 1]: the share of model × cell pairs "
                             "that get an image wrong")
    run = store.get_run(run_id)
    if run is None:
        raise UserInputError(f"no run {run_id!r} in {store.description}; see `domainbench ls`")
    try:
        out = load_outcomes(store, run_id)
    except MetricInputError as e:
        raise UserInputError(f"run {run_id}: {e}") from None
    classes = list(run.dataset.classes) if run.dataset is not None else []
    models = out.models()
    cells = sorted({(c, s) for (_, c, s) in out.preds if c != CLEAN})
    if not cells:
        raise UserInputError(f"run {run_id} has no corrupted cell with per-image outcomes: nothing is hard under it")
    labelled = out.labels is not None
    wrong = np.zeros(out.n)
    pairs = np.zeros(out.n)
    mostly = np.zeros(out.n, dtype=int)
    clean_wrong = np.zeros(out.n, dtype=int)
    per_cell: dict[str, np.ndarray] = {}
    cell_of = {f"{c}@{s}": (c, s) for c, s in cells}
    answers: list[Counter[int]] = [Counter() for _ in range(out.n)]
    for m in models:
        m_wrong = np.zeros(out.n)
        m_pairs = np.zeros(out.n)
        if labelled and (m, CLEAN, 0) in out.preds:
            clean_wrong += (~out.correct(m, CLEAN, 0) & out.present(m, CLEAN, 0)).astype(int)
        for c, s in cells:
            if (m, c, s) not in out.preds:
                continue
            here = out.present(m, c, s)
            bad = (~out.correct(m, c, s) if labelled else out.flipped(m, c, s)) & here
            m_wrong += bad
            m_pairs += here
            per_cell.setdefault(f"{c}@{s}", np.zeros(out.n))
            per_cell[f"{c}@{s}"] += bad
            pred = out.cell(m, c, s)
            for i in np.flatnonzero(bad):
                if pred[i] != MISSING:
                    answers[i][int(pred[i])] += 1
        wrong += m_wrong
        pairs += m_pairs
        mostly += ((m_pairs > 0) & (m_wrong >= m_pairs / 2)).astype(int)
    hardness = np.divide(wrong, pairs, out=np.zeros(out.n), where=pairs > 0)
    chosen = np.flatnonzero((pairs > 0) & (hardness >= threshold - 1e-12))
    chosen = chosen[np.lexsort((out.indices[chosen], -hardness[chosen]))]
    paths = _paths(run)
    rows, files, worst_cells = [], [], []
    for i in chosen:
        idx = int(out.indices[i])
        path = paths[idx] if paths is not None and idx < len(paths) else ""
        worst = sorted(((int(v[i]), name) for name, v in per_cell.items() if v[i] > 0), key=lambda t: (-t[0], t[1]))
        common = answers[i].most_common(1)
        rows.append({
            "image": idx, "path": path,
            "label": classes[int(out.labels[i])] if labelled and classes else "",
            "hardness": float(hardness[i]), "pairs": int(pairs[i]),
            "models_wrong_clean": int(clean_wrong[i]) if labelled else "",
            "models_mostly_wrong": int(mostly[i]),
            "worst_cells": " ".join(f"{name}:{k}" for k, name in worst[:3]),
            "common_answer": classes[common[0][0]] if common and classes else "",
        })
        files.append(path or str(idx))
        worst_cells.append([cell_of[name] for _, name in worst[:3]])
    return HardImages(rows, files, out.n, threshold, worst_cells)


def _paths(run: object) -> list[str] | None:
    from domainbench.query.predictions import _dataset

    ds = _dataset(run)  # refuses a dataset that changed since the run: its indices would name other files
    return None if ds is None or ds.paths is None else [str(p) for p in ds.paths]


def hard_csv(hard: HardImages) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(COLUMNS))
    w.writeheader()
    w.writerows(hard.rows)
    return buf.getvalue()

"""Which synthetic cell behaves like the user's real shift (a ``shift:NAME`` cell), per model and across models.

The measure is the accuracy drop in points, ``100 * (clean balanced accuracy - cell balanced
accuracy)``, for a labelled shift; for an unlabelled (paired) shift, or a dataset without labels,
it is the flip rate in percent, ``100 * flips / n`` (the drop needs labels on both sides).

- **Per model**: the synthetic cell whose value is closest to the shift's (smallest absolute
  difference; ties go to the first cell in (corruption, severity) order). This is the one meaning of "the
  synthetic cell that behaves most like the real images": ``query.shift``'s sentence and the run page's
  table both say it (an average over the models named another cell than each model's own and was dropped).
- **Ranking** (at least 3 models with a value): per synthetic cell, Spearman's ρ
  (``scipy.stats.spearmanr``) between the models' values under the cell and under the shift; the
  cell with the largest ρ ranks the models most like the real shift. The plan as a whole ranks
  models by their mean value over the plan's common cells; its ρ says whether the plan's ranking
  agrees with the real shift. A constant series has no ρ (left out).

Real-shift and composed cells are never candidates: only the plan's single corruptions are.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from domainbench.records.config import COMPOSITION_PREFIX, SHIFT_PREFIX
from domainbench.records.results import CellSummary, ModelSummary, RunSummary

Cell = tuple[str, int]
#: fewer models cannot be ranked meaningfully (ρ of two points is always ±1)
MIN_MODELS_TO_RANK = 3


@dataclass(frozen=True)
class ModelMatch:
    model: str
    real: float  # the shift's value (points)
    cell: Cell  # the closest synthetic cell
    synthetic: float  # that cell's value (points)


@dataclass(frozen=True)
class ShiftMatch:
    shift: str  # the cell name, shift:NAME
    measure: str  # "accuracy drop" or "flip rate"
    per_model: list[ModelMatch]
    #: the cell whose values rank the models most like the shift, and its ρ (None: fewer than 3 models)
    ranking_cell: Cell | None
    ranking_rho: float | None
    #: ρ between the plan's mean values and the shift's (None: fewer than 3 models or a constant series)
    plan_rho: float | None
    sentence: str

    @property
    def name(self) -> str:
        return self.shift[len(SHIFT_PREFIX):]


def _is_candidate(corruption: str) -> bool:
    return corruption != "clean" and not corruption.startswith((SHIFT_PREFIX, COMPOSITION_PREFIX))


def _value(m: ModelSummary, c: CellSummary, measure: str) -> float | None:
    if measure == "flip rate":
        return 100.0 * c.lfp if c.n and c.lfp is not None else None
    if m.clean_accuracy is None or c.accuracy is None:
        return None
    return 100.0 * (m.clean_accuracy - c.accuracy)


def _measure(summary: RunSummary, shift: str) -> str:
    labelled = all(c.accuracy is not None and m.clean_accuracy is not None
                   for m in summary.models for c in m.cells if c.corruption == shift)
    return "accuracy drop" if labelled else "flip rate"


def _gap(a: float, b: float) -> float:
    # rounded: differences of accuracies in binary floating point must not break a tie at random
    return round(abs(a - b), 9)


def _rho(a: list[float], b: list[float]) -> float | None:
    if len(a) < MIN_MODELS_TO_RANK or len(set(a)) < 2 or len(set(b)) < 2:
        return None
    from scipy.stats import spearmanr  # scipy.stats takes ~1 s to import: only runs with shift cells use it

    rho = float(spearmanr(a, b).statistic)
    return None if math.isnan(rho) else rho


def shift_matches(summary: RunSummary) -> list[ShiftMatch]:
    """One match per real-shift cell of ``summary`` (empty when the run has none)."""
    shifts = sorted({c.corruption for m in summary.models for c in m.cells if c.corruption.startswith(SHIFT_PREFIX)})
    return [match_shift(summary, s) for s in shifts]


def match_shift(summary: RunSummary, shift: str) -> ShiftMatch:
    measure = _measure(summary, shift)
    real: dict[str, float] = {}
    synthetic: dict[str, dict[Cell, float]] = {}
    for m in summary.models:
        values = {(c.corruption, c.severity): _value(m, c, measure) for c in m.cells}
        mine = next((v for (corr, _), v in values.items() if corr == shift), None)
        if mine is None:
            continue
        real[m.model] = mine
        synthetic[m.model] = {k: v for k, v in values.items() if _is_candidate(k[0]) and v is not None}
    models = sorted(real)
    per_model = []
    for name in models:
        if synthetic[name]:
            cell = min(sorted(synthetic[name]), key=lambda k: _gap(synthetic[name][k], real[name]))
            per_model.append(ModelMatch(name, real[name], cell, synthetic[name][cell]))
    shared = sorted(set.intersection(*(set(synthetic[m]) for m in models))) if models else []
    ranking_cell = ranking_rho = plan_rho = None
    if len(models) >= MIN_MODELS_TO_RANK and shared:
        reals = [real[m] for m in models]
        rhos = {k: r for k in shared if (r := _rho([synthetic[m][k] for m in models], reals)) is not None}
        if rhos:
            ranking_cell = max(shared, key=lambda k: rhos.get(k, -math.inf))
            ranking_rho = rhos[ranking_cell]
        common = [tuple(k) for k in summary.common_cells if _is_candidate(k[0]) and all(tuple(k) in synthetic[m] for m in models)]
        if common:
            plan_rho = _rho([float(np.mean([synthetic[m][k] for k in common])) for m in models], reals)
    match = ShiftMatch(shift, measure, per_model, ranking_cell, ranking_rho, plan_rho, "")
    return ShiftMatch(**{**match.__dict__, "sentence": sentence(match, len(models))})


def matches_section(matches: list[ShiftMatch]) -> dict[str, object]:
    """The JSON export's ``shift_matches`` (only for a run with real shifts)."""
    if not matches:
        return {}
    return {"shift_matches": [{
        "shift": m.shift, "measure": m.measure, "sentence": m.sentence,
        "ranking": None if m.ranking_cell is None else {"corruption": m.ranking_cell[0], "severity": m.ranking_cell[1],
                                                         "rho": m.ranking_rho},
        "plan_rho": m.plan_rho,
        "per_model": [{"model": p.model, "real": p.real, "corruption": p.cell[0], "severity": p.cell[1],
                       "synthetic": p.synthetic} for p in m.per_model],
    } for m in matches]}


def _agreement(rho: float) -> str:
    if rho >= 0.7:
        return "agrees with"
    if rho >= 0.3:
        return "partly agrees with"
    if rho > -0.3:
        return "does not predict"
    return "reverses"


def sentence(match: ShiftMatch, n_models: int) -> str:
    """Whether the plan ranks the models as the real shift does (3 or more models), in words; empty otherwise.

    Which synthetic cell behaves most like the shift, per model, is said by ``query.shift``'s sentence."""
    if n_models < MIN_MODELS_TO_RANK:
        return ""
    what = f"On your `{match.name}` images, by {match.measure}"
    parts = []
    if match.plan_rho is not None:
        parts.append(f"the plan's ranking of models {_agreement(match.plan_rho)} the real shift (ρ = {match.plan_rho:.2f})")
    if match.ranking_cell is not None and match.ranking_rho is not None:
        rc, rs = match.ranking_cell
        parts.append(f"`{rc}` at severity {rs} ranks them most like it (ρ = {match.ranking_rho:.2f})")
    if not parts:
        return f"{what}, the models' values do not vary enough to rank them."
    return f"{what}: " + "; ".join(parts) + "."

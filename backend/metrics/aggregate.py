"""From stored unit documents (sufficient statistics) to per-model robustness summaries.

A *unit* is one (run_id, model, corruption, severity, shard) piece of work. The engine
stores for it only sums — a sparse confusion matrix (its nonzero cells, from which per-class
support and correct counts follow) and a flip count — so shards merge by addition in any order, a run can resume, and the baseline model can be changed after the
run without touching images: :func:`summarize` takes the baseline as a parameter.

Conventions (documented choices, all tested):

- ``n`` counts the images that were evaluated in the unit; images that could not be read
  are counted in ``n_unreadable`` and are not part of ``n``. A labelled unit's confusion
  matrix therefore sums to ``n``.
- The clean pass is ``corruption == "clean"`` with ``severity == 0`` and ``flips == 0``;
  every other corruption has ``severity >= 1``.
- Every aggregate number of a summary (mean corrupted accuracy, mCE, rCE, mFR, Pearson)
  uses the *common cells*: the (corruption, severity) cells that every model of the
  summary has. Cells outside them still appear in each model's per-cell list (flagged
  ``in_common=False``) and are listed in ``RunSummary.dropped_cells`` — never silently.
- Labels are optional. Without confusion matrices, accuracy-based numbers are ``None``
  (not applicable, never 0); LFP and mFR still work.
- A per-corruption term whose baseline does not degrade is ``None``; the mean is over the
  defined terms (see :mod:`domainbench.metrics.classification`), and each model's ``notes``
  names the corruptions left out.
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError

from domainbench.records.config import SHIFT_PREFIX
from domainbench.records.confusion import SparseConfusion
from domainbench.metrics.classification import (
    MetricInputError,
    balanced_accuracy_from_counts,
    ce_per_corruption,
    fr_per_corruption,
    label_flip_probability,
    mean_defined,
    pearson_acc_lfp,
    rce_per_corruption,
)
# the typed results live below the store (domainbench.records.results); they are this module's vocabulary too
from domainbench.records.results import CLEAN, CellKey, CellSummary, ModelSummary, RunSummary, UnitDocument
from domainbench.records.unit_sums import CalibrationCounts, DamageSums

# --------------------------------------------------------------------------- unit documents


def _describe(raw: Any) -> str:
    if isinstance(raw, Mapping):
        keys = ("run_id", "model", "corruption", "severity", "shard")
        return "(" + ", ".join(f"{k}={raw.get(k)!r}" for k in keys) + ")"
    return repr(raw)[:120]


def _parse(raw: UnitDocument | Mapping[str, Any]) -> UnitDocument:
    if isinstance(raw, UnitDocument):
        return raw
    if not isinstance(raw, Mapping):
        raise MetricInputError(f"a unit must be a dict (a stored unit document), got {type(raw).__name__}")
    try:
        return UnitDocument.model_validate(dict(raw))
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'unit'}: {e['msg']}" for e in exc.errors()
        )
        raise MetricInputError(f"unit {_describe(raw)} is invalid: {problems}") from None


# --------------------------------------------------------------------------- merged cells


class CellStats(BaseModel):
    """The sufficient statistics of one (model, corruption, severity) cell, summed over shards."""

    model_config = ConfigDict(frozen=True)

    model: str
    corruption: str
    severity: int
    classes: list[str]
    n: int
    flips: int
    n_unreadable: int
    confusion: SparseConfusion | None
    shards: list[int]
    run_ids: list[str]
    #: summed over the shards; None when any shard lacks them
    calibration: CalibrationCounts | None = None
    damage: DamageSums | None = None
    #: False for a real-shift cell whose images have no paired clean image: its flips mean nothing
    paired: bool = True

    @property
    def labeled(self) -> bool:
        return self.confusion is not None

    def balanced_accuracy(self) -> float | None:
        """``None`` when unlabeled; raises when the cell holds no image."""
        if self.confusion is None:
            return None
        if self.n == 0:
            raise MetricInputError(f"cell {self._key_text()} holds no evaluated image")
        return balanced_accuracy_from_counts(self.confusion.support(), self.confusion.correct())

    def error(self) -> float:
        """1 − balanced accuracy; only for labelled cells."""
        acc = self.balanced_accuracy()
        if acc is None:
            raise MetricInputError(f"cell {self._key_text()} is unlabelled: no error rate")
        return 1.0 - acc

    def lfp(self) -> float:
        if self.n == 0:
            raise MetricInputError(f"cell {self._key_text()} holds no evaluated image")
        return label_flip_probability(self.flips, self.n)

    def _key_text(self) -> str:
        return f"(model={self.model!r}, corruption={self.corruption!r}, severity={self.severity})"


def merge_units(
    units: Iterable[UnitDocument | Mapping[str, Any]],
) -> dict[CellKey, CellStats]:
    """Sum confusion matrices, flips and counts over the shards of every cell.

    Order-independent (integer sums; shards and run ids are reported sorted). A unit key
    that appears twice must carry identical statistics (a re-written upsert); otherwise the
    store holds conflicting results and this raises. Shards of one cell must agree on the
    class list and on whether they are labelled.
    """
    by_unit: dict[tuple[str, str, str, int, int], UnitDocument] = {}
    for raw in units:
        u = _parse(raw)
        key = (u.run_id, u.model, u.corruption, u.severity, u.shard)
        prev = by_unit.get(key)
        if prev is not None and _stats(prev) != _stats(u):
            raise MetricInputError(
                f"unit {_describe(u.model_dump())} appears twice with different results; "
                "re-run it or delete one copy from the store"
            )
        by_unit[key] = u

    groups: dict[CellKey, list[UnitDocument]] = {}
    for u in by_unit.values():
        groups.setdefault(u.cell, []).append(u)

    cells: dict[CellKey, CellStats] = {}
    for key in sorted(groups):
        members = groups[key]
        first = members[0]
        where = f"(model={key[0]!r}, corruption={key[1]!r}, severity={key[2]})"
        for u in members[1:]:
            if u.classes != first.classes:
                raise MetricInputError(
                    f"shards of cell {where} disagree on the class list "
                    f"({first.classes} vs {u.classes}); all shards must use the same classes"
                )
            if (u.confusion is None) != (first.confusion is None):
                raise MetricInputError(
                    f"shards of cell {where} mix labelled and unlabelled units; "
                    "re-run the cell with one dataset"
                )
        confusion: SparseConfusion | None = None
        if first.confusion is not None:
            confusion = SparseConfusion.total_of([u.confusion for u in members])  # type: ignore[misc]
        cells[key] = CellStats(
            model=key[0],
            corruption=key[1],
            severity=key[2],
            classes=list(first.classes),
            n=sum(u.n for u in members),
            flips=sum(u.flips for u in members),
            n_unreadable=sum(u.n_unreadable for u in members),
            confusion=confusion,
            shards=sorted(u.shard for u in members),
            run_ids=sorted({u.run_id for u in members}),
            calibration=_total([u.calibration for u in members]),
            damage=_total([u.damage for u in members]),
            paired=all(u.params.get("paired", True) for u in members),
        )
    return cells


def _total(parts: list[Any]) -> Any:
    """The sum of every shard's sums; None unless every shard has them (a cell is never partly measured)."""
    if not parts or any(p is None for p in parts):
        return None
    return functools.reduce(lambda a, b: a + b, parts)


def _stats(u: UnitDocument) -> tuple[Any, ...]:
    return (u.n, u.flips, u.n_unreadable, u.confusion, u.classes)


# --------------------------------------------------------------------------- summaries


def _cell_summary(cell: CellStats, in_common: bool) -> CellSummary:
    return CellSummary(
        corruption=cell.corruption,
        severity=cell.severity,
        n=cell.n,
        n_unreadable=cell.n_unreadable,
        flips=cell.flips,
        lfp=cell.lfp() if cell.paired else None,
        accuracy=cell.balanced_accuracy(),
        confusion=cell.confusion,
        in_common=in_common,
        calibration=cell.calibration,
        damage=cell.damage,
    )


def _undefined_note(metric: str, terms: dict[str, float | None]) -> str | None:
    missing = [c for c, t in terms.items() if t is None]
    if not missing:
        return None
    if len(missing) == len(terms):
        return f"{metric} undefined: the baseline does not degrade on any common corruption"
    return (
        f"{metric} averages {len(terms) - len(missing)} of {len(terms)} corruptions; "
        f"undefined (baseline does not degrade): {', '.join(missing)}"
    )


def summarize(
    units: Iterable[UnitDocument | Mapping[str, Any]] | Mapping[CellKey, CellStats],
    baseline: str,
) -> RunSummary:
    """Per-model robustness summary against ``baseline`` (any model of the units).

    ``units`` are stored unit documents (or the output of :func:`merge_units`). Changing
    the baseline only re-runs this function; the baseline's own mCE, rCE and mFR are 1.0
    wherever defined.
    """
    if isinstance(units, Mapping):
        if not all(isinstance(v, CellStats) for v in units.values()):
            raise MetricInputError(
                "summarize takes a list of unit documents (or merge_units' output), "
                "got a single dict; wrap it in a list"
            )
        cells = dict(units)
    else:
        cells = merge_units(units)
    if not cells:
        raise MetricInputError("no units to summarize; run the evaluation first")

    classes = next(iter(cells.values())).classes
    for cell in cells.values():
        if cell.classes != classes:
            raise MetricInputError(
                f"models were evaluated with different class lists ({classes} vs "
                f"{cell.classes} for {cell.model!r}); compare only runs on the same dataset"
            )

    models = sorted({k[0] for k in cells})
    if baseline not in models:
        low = baseline.lower()
        close = [m for m in models if low in m.lower() or m.lower() in low]
        close += [
            m for m in difflib.get_close_matches(baseline, models, n=3, cutoff=0.5) if m not in close
        ]
        hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
        raise MetricInputError(
            f"baseline {baseline!r} is not among the evaluated models "
            f"({', '.join(models)}).{hint}"
        )

    own: dict[str, dict[tuple[str, int], CellStats]] = {m: {} for m in models}
    # real-shift cells (the user's own images) are listed but stay out of the plan's aggregates
    real: dict[str, dict[tuple[str, int], CellStats]] = {m: {} for m in models}
    clean: dict[str, CellStats] = {}
    for (m, corr, sev), cell in cells.items():
        if corr == CLEAN:
            clean[m] = cell
        else:
            (real if corr.startswith(SHIFT_PREFIX) else own)[m][(corr, sev)] = cell

    for m in models:
        kinds = {c.labeled for c in own[m].values()} | ({clean[m].labeled} if m in clean else set())
        if len(kinds) > 1:
            raise MetricInputError(
                f"model {m!r} has labelled and unlabelled cells; all cells of a model must "
                "come from the same dataset"
            )

    common = sorted(set.intersection(*(set(own[m]) for m in models)))
    common_set = set(common)
    by_corruption: dict[str, list[int]] = {}
    for corr, sev in common:
        by_corruption.setdefault(corr, []).append(sev)

    def labeled(m: str) -> bool:
        cs = list(own[m].values()) or ([clean[m]] if m in clean else [])
        return bool(cs) and cs[0].labeled

    def grid(m: str, value: Callable[[CellStats], float]) -> dict[str, np.ndarray]:
        """Per corruption a (1, severities) array: corruptions may have different ladders."""
        return {
            corr: np.asarray([[value(own[m][(corr, s)]) for s in sevs]])
            for corr, sevs in by_corruption.items()
        }

    lfp = {m: grid(m, CellStats.lfp) for m in models}
    err = {m: grid(m, CellStats.error) for m in models if labeled(m)}
    clean_err = {m: clean[m].error() for m in models if m in clean and labeled(m)}

    summaries: list[ModelSummary] = []
    for m in models:
        notes: list[str] = []
        is_labeled = labeled(m)
        if not common:
            notes.append("no (corruption, severity) cell is shared by all models: no aggregates")

        fr = {c: fr_per_corruption(lfp[m][c], lfp[baseline][c])[0] for c in by_corruption}
        ce: dict[str, float | None]
        rc: dict[str, float | None]
        if is_labeled and baseline in err:
            ce = {c: ce_per_corruption(err[m][c], err[baseline][c])[0] for c in by_corruption}
        else:
            ce = {c: None for c in by_corruption}
            if not is_labeled:
                notes.append("unlabelled data: accuracy, mCE, rCE and the correlation do not apply")
            else:
                notes.append(f"baseline {baseline!r} is unlabelled: mCE and rCE do not apply")
        if m in clean_err and baseline in clean_err:
            rc = {
                c: rce_per_corruption(err[m][c], clean_err[m], err[baseline][c], clean_err[baseline])[0]
                for c in by_corruption
            }
        else:
            rc = {c: None for c in by_corruption}
            if is_labeled and baseline in err:
                who = m if m not in clean_err else baseline
                notes.append(f"no clean pass for {who!r}: rCE undefined")

        for name, terms, applicable in (
            ("mCE", ce, is_labeled and baseline in err),
            ("rCE", rc, m in clean_err and baseline in clean_err),
            ("mFR", fr, True),
        ):
            note = _undefined_note(name, terms) if applicable and terms else None
            if note:
                notes.append(note)

        accs = [a for k in common if (a := own[m][k].balanced_accuracy()) is not None]
        pearson = None
        if is_labeled and common:
            pearson = pearson_acc_lfp(accs, [own[m][k].lfp() for k in common])
            if pearson is None:
                notes.append("correlation undefined: fewer than 3 common cells or a constant series")

        summaries.append(
            ModelSummary(
                model=m,
                is_baseline=m == baseline,
                labeled=is_labeled,
                clean_accuracy=clean[m].balanced_accuracy() if m in clean else None,
                clean=_cell_summary(clean[m], True) if m in clean else None,
                cells=[_cell_summary(c, k in common_set) for k, c in sorted((own[m] | real[m]).items())],
                mean_corrupted_accuracy=mean_defined(accs) if accs else None,
                mce=mean_defined(list(ce.values())),
                rce=mean_defined(list(rc.values())),
                mfr=mean_defined(list(fr.values())),
                pearson_acc_lfp=pearson,
                ce_per_corruption=ce,
                rce_per_corruption=rc,
                fr_per_corruption=fr,
                notes=notes,
            )
        )

    return RunSummary(
        baseline=baseline,
        classes=list(classes),
        run_ids=sorted({r for c in cells.values() for r in c.run_ids}),
        common_cells=common,
        dropped_cells={m: sorted(set(own[m]) - common_set) for m in models if set(own[m]) - common_set},
        models=summaries,
    )


def summary_table(summary: RunSummary) -> list[dict[str, Any]]:
    """The product paper's table (Acc, mCE, rCE, mFR, correlation), one row per model.

    Values are floats or ``None`` (not applicable / undefined), ready for printing or CSV.
    """
    return [
        {
            "model": m.model,
            "baseline": m.is_baseline,
            "acc": m.clean_accuracy,
            "mce": m.mce,
            "rce": m.rce,
            "mfr": m.mfr,
            "corr": m.pearson_acc_lfp,
            "mean_corrupted_acc": m.mean_corrupted_accuracy,
            "cells": len(summary.common_cells),
        }
        for m in summary.models
    ]

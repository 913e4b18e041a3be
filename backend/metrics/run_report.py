"""A run's report from its stored records: classification, PD threat, stability and their link.

Pure functions of the records (no store, no images, no models), so the report can be rebuilt
at any time, against any baseline, and tested on hand-made records.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from domainbench.metrics.aggregate import CellStats, summarize
from domainbench.metrics.registry import metrics_of
from domainbench.metrics.threat import pd_safety, safe_accuracy, share_interval
from domainbench.records.report import (
    DropCorrelationReport,
    LinkEntry,
    RadiusBinReport,
    RegressionReport,
    RunReport,
    StabilityLink,
    StabilityMean,
    ThreatCell,
    Versions,
)

if TYPE_CHECKING:
    from domainbench.records.report import FmrReport
    from domainbench.store.records import FmrUnitRecord, RunRecord, StabilityRecord, ThreatRecord, UnitRecord

#: the PD threat is normalised so that moving all the way onto another class's anchor scores
#: 2 (β = 1/2); at or below 1 a perturbation stays within half-way: label-preserving ("safe")
SAFE_THREAT = 1.0
#: the per-image stability metrics a StabilityRecord holds (the registry's image metrics)
STABILITY_METRICS = tuple(m.name for m in metrics_of("image"))


def threat_cells(records: Sequence[ThreatRecord]) -> list[ThreatCell]:
    """Per (corruption, severity): the shards' threat sums pooled, with the safety verdict (``pd_safety``)."""
    acc: dict[tuple[str, int], dict[str, float]] = defaultdict(lambda: {"n": 0, "sum": 0.0, "sum_sq": 0.0, "n_above_1": 0, "max": 0.0})
    for d in records:
        a = acc[(d.corruption, d.severity)]
        a["n"] += d.n
        a["sum"] += d.sum
        a["sum_sq"] += d.sum_sq
        a["n_above_1"] += d.n_above_1
        a["max"] = max(a["max"], d.max)
    cells = []
    for key, a in sorted(acc.items()):
        n, above = int(a["n"]), int(a["n_above_1"])
        mean = a["sum"] / n if n else None
        low, high = share_interval(above, n) if n else (None, None)
        cells.append(ThreatCell(
            corruption=key[0],
            severity=key[1],
            n=n,
            mean_threat=mean,
            std_threat=float(np.sqrt(max(a["sum_sq"] / n - mean**2, 0.0))) if n else None,
            frac_unsafe_images=above / n if n else None,
            frac_unsafe_ci_low=low,
            frac_unsafe_ci_high=high,
            max_threat=a["max"],
            # a cell without images cannot show it is safe
            safety=pd_safety(above, n) if n else "borderline",
        ))
    return cells


def stability_means(records: Sequence[StabilityRecord]) -> list[StabilityMean]:
    """Mean DivergenceRadius / cosine / Euclidean robustness per model × corruption."""
    groups: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(lambda: {k: [] for k in STABILITY_METRICS})
    for d in records:
        g = groups[(d.model, d.corruption)]
        for k in STABILITY_METRICS:
            g[k] += getattr(d, k)
    return [
        StabilityMean(model=m, corruption=c, n_images=len(g["divergence_radius"]),
                      **{k: float(np.mean(v)) if v else None for k, v in g.items()})
        for (m, c), g in sorted(groups.items())
    ]


def stability_link(units: Sequence[UnitRecord], records: Sequence[StabilityRecord], seed: int = 0) -> list[StabilityLink]:
    """Per model: does DivergenceRadius predict accuracy under perturbation? (stability paper §5)

    An image's ACC_p for a corruption is the fraction of its evaluated severities classified
    correctly; it is related to the image's radius by quantile bins and a half/half linear
    regression, and across corruptions the accuracy drop is correlated with the mean radius.
    """
    from domainbench.metrics.stability_link import (
        StabilityLinkInputError,
        accuracy_by_radius_quantile,
        drop_robustness_correlation,
        fit_accuracy_regression,
    )

    labels: dict[int, int] = {}
    for u in units:
        if u.corruption == "clean" and u.labels is not None:
            labels.update(zip(u.indices, u.labels))
    if not labels:
        return []
    radius: dict[tuple[str, str], dict[int, float]] = defaultdict(dict)
    for d in records:
        if d.corruption.startswith("shift:"):  # the user's own images: not a corruption of the plan
            continue
        radius[(d.model, d.corruption)].update(zip(d.indices, d.divergence_radius))
    # only the images with a radius are joined: a unit's other images are never decoded one by one
    wanted: dict[tuple[str, str], np.ndarray] = {k: np.fromiter(v, dtype=np.int64) for k, v in radius.items()}
    for model in {m for m, _ in radius}:
        wanted[(model, "clean")] = np.unique(np.concatenate([v for (m, _), v in wanted.items() if m == model]))
    correct: dict[tuple[str, str], dict[int, list[bool]]] = defaultdict(lambda: defaultdict(list))
    for u in units:
        want = wanted.get((u.model, u.corruption))
        if want is None:
            continue
        idx = np.asarray(u.indices, dtype=np.int64)
        keep = np.isin(idx, want)
        hits = _hits(u, idx, keep, labels)
        for i, ok in zip(idx[keep].tolist(), hits):
            if i in labels:
                correct[(u.model, u.corruption)][i].append(ok)
    out = []
    for model in sorted({m for m, _ in radius}):
        per: dict[str, LinkEntry] = {}
        drop, mean_r = {}, {}
        clean = correct.get((model, "clean"), {})
        for (m, corr), rad in sorted(radius.items()):
            if m != model:
                continue
            idx = [i for i in rad if i in correct.get((m, corr), {}) and i in clean]
            if len(idx) < 4:
                continue
            r = np.array([rad[i] for i in idx])
            acc_p = np.array([np.mean(correct[(m, corr)][i]) for i in idx])
            acc = np.array([float(clean[i][0]) for i in idx])
            entry: dict[str, Any] = {"n_images": len(idx), "mean_radius": float(r.mean()),
                                     "accuracy_clean": float(acc.mean()), "accuracy_perturbed": float(acc_p.mean())}
            try:
                entry["bins"] = [RadiusBinReport(**b._asdict()) for b in accuracy_by_radius_quantile(r, acc_p, n_bins=5)]
                reg = fit_accuracy_regression(r, acc_p, seed=seed)
                entry["regression"] = RegressionReport(slope=reg.slope, intercept=reg.intercept, mse=reg.mse, n_test=reg.n_test)
            except StabilityLinkInputError as e:
                entry["note"] = str(e)
            per[corr] = LinkEntry(**entry)
            drop[corr] = entry["accuracy_clean"] - entry["accuracy_perturbed"]
            mean_r[corr] = entry["mean_radius"]
        dc = drop_robustness_correlation(drop, mean_r) if drop else None
        out.append(StabilityLink(
            model=model, per_corruption=per,
            drop_correlation=None if dc is None else DropCorrelationReport(r=dc.r, p_value=dc.p_value, n_corruptions=dc.n_corruptions),
        ))
    return out


def _hits(u: UnitRecord, idx: np.ndarray, keep: np.ndarray, labels: dict[int, int]) -> list[bool]:
    """Whether each kept image of ``u`` is classified correctly: its stored correctness bits, or
    (units stored before those existed) its predictions against the clean pass's labels."""
    if u.hits is not None:
        return (np.asarray(u.hits)[keep] == 1).tolist()
    preds = np.asarray(u.preds, dtype=np.int64)[keep]
    return [p == labels.get(i, -1) for i, p in zip(idx[keep].tolist(), preds.tolist())]


def build_report(
    run: RunRecord,
    units: Sequence[UnitRecord],
    threat: Sequence[ThreatRecord],
    stability: Sequence[StabilityRecord],
    baseline: str,
    version: str,
    fmr: Sequence[FmrUnitRecord] = (),
) -> RunReport:
    """Everything a reader needs about a run, against ``baseline`` (a model of the run)."""
    summary = summarize(units, baseline=baseline)
    cells = threat_cells(threat)
    safety = {(t.corruption, t.severity): t.safe for t in cells}
    safe_acc = {}
    for m in summary.models:
        accs = {(c.corruption, c.severity): c.accuracy for c in m.cells
                if c.accuracy is not None and (c.corruption, c.severity) in safety}
        safe_acc[m.model] = safe_accuracy(accs, safety)
    return RunReport(
        run_id=run.run_id,
        baseline=baseline,
        seed=run.config.seed,
        classification=summary,
        threat=cells,
        different_class_threat=run.different_class_threat,
        safe_accuracy=safe_acc,
        stability=stability_means(stability),
        stability_link=stability_link(units, stability, seed=run.config.seed),
        fmr=_fmr_section(run, fmr),
        versions=Versions(domainbench=version),
    )


def _fmr_section(run: RunRecord, records: Sequence[FmrUnitRecord]) -> FmrReport | None:
    if run.fmr is None or not records:
        return None
    from domainbench.metrics.fmr import fmr_report

    classes = run.dataset.classes if run.dataset is not None else [str(c) for c in range(1 + max(max(r.labels, default=0) for r in records))]
    return fmr_report(run.fmr, classes, records)


def rebaseline(report: RunReport, baseline: str) -> RunReport:
    """``report`` against another baseline, from the cell statistics it holds (no unit is read).

    Only the classification depends on the baseline. Each cell of the report keeps the sums
    the units add up to (confusion matrix, flips, counts), so summarising them again gives
    exactly the numbers a rebuild from the units gives.
    """
    summary = report.classification
    cells = {
        (m.model, c.corruption, c.severity): CellStats(
            model=m.model, corruption=c.corruption, severity=c.severity, classes=summary.classes, n=c.n,
            flips=c.flips, n_unreadable=c.n_unreadable, confusion=c.confusion, shards=[], run_ids=summary.run_ids,
        )
        for m, c in report.all_cells()
    }
    return report.model_copy(update={"baseline": baseline, "classification": summarize(cells, baseline)})

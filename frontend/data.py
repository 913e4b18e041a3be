"""Data access for the browser UI: store records and run reports -> plain frames and arrays.

Nothing here imports Streamlit, so every function is testable against a temporary store.
A finished run is drawn from the report the engine stored as it finished; another baseline
is derived from that report's cell statistics (no unit document is read). A run that is not
finished gets a report built from the units stored so far, and :class:`RunView` says so
(``partial``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from domainbench.records.config import COMPOSITION_PREFIX, SHIFT_PREFIX, DomainConfig
from domainbench.errors import UserInputError
from domainbench.metrics.registry import Metric, metric, metrics_of, summary_metrics, summary_rows
from domainbench.records.model_backends import kind_of
from domainbench.query import (FINISHED, cell_fields, cell_rows, cell_units, clean_units, comparison, done_cells,
                               expected_cells, export_csv, export_json, get_run, recreate_images, report_of,
                               run_fingerprint, stability_records, stored_domain, stored_domains, stored_units)
from domainbench.query import intervals as intervals_of
from domainbench.metrics.compare_intervals import RunDraws
from domainbench.records.report import RunReport
from domainbench.stats import mean_draws, percentile_interval
from domainbench.stats.bootstrap import DEFAULT_RESAMPLES, DEFAULT_SEED, shared_bootstrap_weights
from domainbench import query
from domainbench.query import RunRecord, StabilityRecord, Store, run_status

#: stability metric -> its label (the metric registry's image metrics)
STABILITY_METRICS = {m.name: m.display for m in metrics_of("image")}
#: metrics the Compare page can plot: field of a report's ``SummaryRow`` -> (label, lower is better);
#: the relative metrics (ratios to the baseline) first, so the page opens on mCE
COMPARE_METRICS: dict[str, tuple[str, bool]] = {
    m.field: (m.display, m.lower_is_better)
    for m in sorted(metrics_of("model"), key=lambda m: m.unit != "ratio") if m.field
}


# --------------------------------------------------------------------------- runs


def short_text(text: str, n: int = 48) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 1].rstrip() + "…"


RUN_COLUMNS = ["run", "status", "kind", "progress", "units", "created", "dataset", "images", "domain", "models",
               "domain_id"]


def run_kind(run: RunRecord) -> str:
    """What the run measures, in a word or two: "FMR" or "corruption", plus "adaptive" (cells stopped early), "real
    shift" (the user's own images beside the plan) and "composed" (stacked corruptions)."""
    if run.fmr is not None:
        return "FMR"
    if run.kind in ("vqa", "retrieval"):
        return "VQA" if run.kind == "vqa" else "image-text retrieval"
    if run.kind == "clip":
        return "clips"
    parts = ["corruption"]
    if run.config.adaptive:
        parts.append("adaptive")
    if run.domain.shift:
        parts.append("real shift")
    if run.domain.compositions:
        parts.append("composed")
    return " + ".join(parts)


def runs_frame(store: Store, runs: list[RunRecord] | None = None) -> pd.DataFrame:
    """One row per stored run, newest first, with its live status and progress (share of units stored:
    a cell with some of its shards stored is not done).

    Only a run that is not finished has its unit keys counted (a finished run is complete by
    definition), so the list costs one key query per unfinished run, never a unit document.
    """
    from domainbench.frontend.progress import unit_progress

    runs = query.list_runs(store) if runs is None else runs
    rows = []
    for r in runs:
        status = run_status(r)
        units = None if status == FINISHED else unit_progress(store, r)
        rows.append({
            "run": r.run_id,
            "status": status,
            "kind": run_kind(r),
            "progress": 1.0 if units is None else units.share,
            "units": "all" if units is None else units.text(),
            "created": r.created_at,
            "dataset": r.dataset.name if r.dataset else r.config.dataset,
            "images": r.dataset.size if r.dataset else None,
            "domain": short_text(r.domain.domain, 80),
            "models": ", ".join(r.config.models),
            "domain_id": r.domain_id,
        })
    return pd.DataFrame(rows, columns=RUN_COLUMNS)


def filter_runs(frame: pd.DataFrame, search: str = "", statuses: list[str] | None = None,
                datasets: list[str] | None = None, domain_id: str | None = None) -> pd.DataFrame:
    """The rows matching every given filter; ``search`` is a case-insensitive substring of the
    run id, domain, models or dataset (all words must match)."""
    keep = pd.Series(True, index=frame.index)
    if statuses:
        keep &= frame["status"].isin(statuses)
    if datasets:
        keep &= frame["dataset"].isin(datasets)
    if domain_id:
        keep &= frame["domain_id"] == domain_id
    haystack = (frame["run"] + " " + frame["domain"] + " " + frame["models"] + " " + frame["dataset"].astype(str)).str.lower()
    for word in search.lower().split():
        keep &= haystack.str.contains(word, regex=False)
    return frame[keep].reset_index(drop=True)


def domains_frame(runs: list[RunRecord]) -> pd.DataFrame:
    """One row per domain that has runs: its description, its plan in brief, and how many runs it has."""
    by_domain: dict[str, list[RunRecord]] = {}
    for r in runs:
        by_domain.setdefault(r.domain_id, []).append(r)
    rows = []
    for did, rs in by_domain.items():
        plan = rs[0].domain
        rows.append({
            "domain_id": did,
            "domain": short_text(plan.domain or "?", 80),
            "corruptions": ", ".join(f"{c.name} ({','.join(map(str, c.severities))})" for c in plan.corruptions),
            "runs": len(rs),
            "latest": max(r.created_at for r in rs),
        })
    cols = ["domain_id", "domain", "corruptions", "runs", "latest"]
    return pd.DataFrame(rows, columns=cols).sort_values("latest", ascending=False, kind="stable").reset_index(drop=True)


def plan_frame(plan: DomainConfig) -> pd.DataFrame:
    """A domain's plan: corruption, severities, the planner's reason and selection frequency.

    (No corruption family here: looking one up loads every corruption kernel, and with them
    albumentations and torch, 10 s and more on a cold server.)
    """
    freq = plan.planner.frequencies
    rows = [{"corruption": c.name, "severities": ", ".join(map(str, c.severities)), "reason": c.reason,
             "selected in %": None if c.name not in freq else 100.0 * float(freq[c.name])}
            for c in plan.corruptions]
    return pd.DataFrame(rows, columns=["corruption", "severities", "reason", "selected in %"])


#: Compare's family of a composition: stacked corruptions belong to no one family, so they get a row of their own
COMPOSED = "composed"
#: Compare's section of the real-shift cells: the user's own images, never averaged into a corruption family
REAL_SHIFT = "real shift"


def family_of(name: str) -> str:
    """The corruption's family from the registry (the first call loads every kernel module); a composition is
    ``COMPOSED``, a real-shift cell ``REAL_SHIFT``, and a plugin corruption no longer installed its own name (a
    family of one: the registry no longer says which family it had)."""
    from domainbench import corruptions
    if name.startswith(COMPOSITION_PREFIX):
        return COMPOSED
    if name.startswith(SHIFT_PREFIX):
        return REAL_SHIFT
    try:
        return str(corruptions.get(name).family)
    except corruptions.CorruptionError:
        return name


@dataclass
class RunView:
    """A run record with its report (or the reason there is none) and its progress."""

    run: RunRecord
    report: RunReport | None
    n_units: int
    done_cells: int
    total_cells: int
    error: str | None = None

    @property
    def run_id(self) -> str:
        return self.run.run_id

    @property
    def status(self) -> str:
        return run_status(self.run)

    @property
    def partial(self) -> bool:
        """True when the numbers cover only part of the planned work."""
        return self.status != FINISHED or self.done_cells < self.total_cells

    @property
    def models(self) -> list[str]:
        return list(self.run.config.models)


def load_run_view(store: Store, run_id: str, baseline: str | None = None) -> RunView:
    """The run and its report against ``baseline`` (default: the run's own baseline).

    Raises :class:`UserInputError` for an unknown run or baseline; a run whose report cannot
    be built yet (no units, or the baseline has no cell yet) comes back with ``report=None``
    and ``error``. Only unit keys are counted here, never unit documents loaded.
    """
    run = get_run(store, run_id)
    if baseline is not None and baseline not in run.config.models:
        raise UserInputError(f"baseline {baseline!r} is not a model of run {run_id}; choose one of {run.config.models}")
    n_units, done = query.unit_counts(store, run)
    view = RunView(run=run, report=None, n_units=n_units, done_cells=done, total_cells=expected_cells(run))
    if not n_units:
        view.error = (
            "no finished units yet: the run has just started"
            if view.status == "running"
            else "the run is queued: it starts when a worker takes it (see Workers in the sidebar)"
            if view.status == "queued"
            else f"the run stored no units (status {view.status}); resume it with "
            f"`domainbench {'fmr' if run.fmr is not None else 'run'} --resume {run_id}`"
        )
        return view
    try:
        view.report = report_of(store, run, baseline)
    except ValueError as e:  # UserInputError / MetricInputError: partial data the metrics cannot use yet
        view.error = str(e)
    return view


def run_label(run: RunRecord) -> str:
    return f"{short_text(run.domain.domain or '?', 40)} · {run.run_id[-4:]}"


# --------------------------------------------------------------------------- report frames


def summary_frame(report: RunReport) -> pd.DataFrame:
    """The product paper's table with the safe-cell accuracy: one row per model.

    Accuracies are percentages; ``None`` (not applicable / undefined) stays missing, never 0.
    """
    columns = summary_metrics()
    rows = [
        {"model": row.model, "kind": kind_of(row.model), "baseline": row.baseline,
         **{m.table_header: _pct(m.read(row)) if m.percent else m.read(row) for m in columns}}
        for row in summary_rows(report)
    ]
    if not rows:
        return pd.DataFrame()
    # float64 throughout, so a column of Nones is NaN ("n/a"), not an object column
    return pd.DataFrame(rows).astype({c: "float64" for c in rows[0] if c not in ("model", "kind", "baseline")})


def _pct(v: float | None) -> float | None:
    return None if v is None else 100.0 * float(v)


def cells_frame(report: RunReport) -> pd.DataFrame:
    """Long form, one row per model × (corruption, severity) including the clean pass.

    Columns: ``domainbench.query.export.cell_fields()`` (described in ``cell_columns()``).
    """
    return pd.DataFrame(cell_rows(report), columns=cell_fields())


def model_notes(report: RunReport) -> dict[str, list[str]]:
    return {m.model: list(m.notes) for m in report.models if m.notes}


#: the per-corruption frame's metric columns -> their metric (the accuracy: the mean of the severities' cells')
PER_CORRUPTION_METRICS: dict[str, Metric] = {
    **{m.field: m for m in metrics_of("corruption") if m.field}, "accuracy": metric("balanced_accuracy"),
}


def per_corruption_frame(report: RunReport) -> pd.DataFrame:
    """One row per model × corruption: CE, rCE, FR (what mCE / rCE / mFR average) and accuracy.

    CE / rCE / FR are the report's own per-corruption values; accuracy is the mean balanced
    accuracy over the corruption's severities (0..1). Undefined values stay missing.
    """
    rows = []
    for m in report.models:
        for name in report.corruption_names():
            accs = [c.accuracy for c in m.cells if c.corruption == name and c.accuracy is not None]
            rows.append({
                "model": m.model, "corruption": name,
                "ce": m.ce_per_corruption.get(name), "rce": m.rce_per_corruption.get(name),
                "fr": m.fr_per_corruption.get(name), "accuracy": float(np.mean(accs)) if accs else None,
            })
    frame = pd.DataFrame(rows, columns=["model", "corruption", "ce", "rce", "fr", "accuracy"])
    return frame.astype({c: "float64" for c in ("ce", "rce", "fr", "accuracy")})


def link_bins_frame(report: RunReport) -> pd.DataFrame:
    """Accuracy under perturbation per DivergenceRadius quantile bin: model, corruption, bin, accuracy."""
    rows = [
        {"model": link.model, "corruption": corr, "bin": i, "bin_lo": b.bin_lo, "bin_hi": b.bin_hi,
         "mean_radius": b.mean_radius, "accuracy": b.accuracy, "count": b.count}
        for link in report.stability_link for corr, entry in sorted(link.per_corruption.items())
        for i, b in enumerate(entry.bins or [])
    ]
    return pd.DataFrame(rows, columns=["model", "corruption", "bin", "bin_lo", "bin_hi", "mean_radius", "accuracy", "count"])


def link_summary_frame(report: RunReport) -> pd.DataFrame:
    """Per model × corruption: mean radius, clean and perturbed accuracy, the regression, and the
    model's drop correlation (accuracy drop vs mean radius across corruptions)."""
    rows = []
    for link in report.stability_link:
        dc = link.drop_correlation
        for corr, e in sorted(link.per_corruption.items()):
            reg = e.regression
            rows.append({
                "model": link.model, "corruption": corr, "images": e.n_images, "mean_radius": e.mean_radius,
                "accuracy_clean": e.accuracy_clean, "accuracy_perturbed": e.accuracy_perturbed,
                "slope": None if reg is None else reg.slope, "intercept": None if reg is None else reg.intercept,
                "mse": None if reg is None else reg.mse, "drop_corr_r": None if dc is None else dc.r,
                "drop_corr_p": None if dc is None else dc.p_value, "note": e.note or "",
            })
    cols = ["model", "corruption", "images", "mean_radius", "accuracy_clean", "accuracy_perturbed", "slope",
            "intercept", "mse", "drop_corr_r", "drop_corr_p", "note"]
    return pd.DataFrame(rows, columns=cols)


def confusion_of(report: RunReport, model: str, corruption: str, severity: int) -> np.ndarray | None:
    """The summed confusion matrix (rows true, columns predicted) of one cell; None if unlabelled."""
    if model not in report.model_names:
        raise UserInputError(f"model {model!r} is not in this run's report")
    try:
        cell = report.cell(model, corruption, severity)
    except KeyError:
        raise UserInputError(f"model {model!r} has no cell ({corruption}, severity {severity}) in this run") from None
    return None if cell.confusion is None else np.asarray(cell.confusion, dtype=np.int64)


def stability_frame(store: Store, run_id: str) -> pd.DataFrame:
    """Per-image stability values, long form: model, corruption, shard, index, and one column per metric.

    Loads every stability record of the run: only for the page that draws per-image values.
    """
    rows = [row for record in stability_records(store, run_id) for row in _stability_rows(record)]
    frame = pd.DataFrame(rows, columns=["model", "corruption", "shard", "index", *STABILITY_METRICS])
    return frame.sort_values(["model", "corruption", "shard", "index"], kind="stable").reset_index(drop=True)


def stability_mean_bounds(frame: pd.DataFrame, metric: str, resamples: int = DEFAULT_RESAMPLES,
                          seed: int = DEFAULT_SEED) -> dict[tuple[str, str], tuple[float, float] | None]:
    """(model, corruption) -> the 95 % percentile-bootstrap interval of the mean of ``metric`` over its images
    (:func:`stability_frame`'s rows): the stored means (``StabilityMean``) have none. Each resample draws the
    images with replacement (``stats.bootstrap``); images of one size share the draws, so the models' intervals
    resample the same images."""
    out: dict[tuple[str, str], tuple[float, float] | None] = {}
    for (model, corruption), part in frame.groupby(["model", "corruption"], sort=True):
        values = part[metric].to_numpy(dtype=float)
        values = values[np.isfinite(values)]
        if values.size < 2:  # one image: no spread to resample
            out[(model, corruption)] = None
            continue
        weights = shared_bootstrap_weights(values.size, None, resamples, seed)
        out[(model, corruption)] = percentile_interval(weights @ values / values.size)
    return out


def _stability_rows(record: StabilityRecord) -> Iterator[dict[str, Any]]:
    # the record guarantees one value per image for every metric; indices are best effort
    values = zip(record.divergence_radius, record.cosine, record.euclidean, strict=True)
    for i, per_metric in enumerate(values):
        yield {
            "model": record.model,
            "corruption": record.corruption,
            "shard": record.shard,
            "index": record.indices[i] if i < len(record.indices) else i,
            **dict(zip(STABILITY_METRICS, per_metric, strict=True)),
        }


# --------------------------------------------------------------------------- per-image drill-down


#: what the gallery shows for a generative model's answer that named no class
NO_CLASS = "(no class)"


def cell_predictions(store: Store, run: RunRecord, corruption: str, severity: int) -> pd.DataFrame:
    """Per image × model of one cell: label, clean and corrupted prediction, flipped, correct, and a
    generative model's free answer (None for other models and likelihood scoring).

    Reads only the units of that one cell and of the clean pass (one document per model and
    shard), never the run's other units. Class indices are turned into names.
    """
    if corruption == "clean" or severity < 1:
        raise UserInputError("choose a corrupted cell (a corruption and a severity from 1)")
    units = cell_units(store, run.run_id, corruption, severity)
    if not units:
        raise UserInputError(f"run {run.run_id} has no stored units for {corruption} severity {severity} yet")
    clean_pass = clean_units(store, run.run_id)
    labels: dict[int, int] = {}
    clean: dict[tuple[str, int], int] = {}
    for u in clean_pass:
        clean.update({(u.model, i): p for i, p in zip(u.indices, u.preds, strict=False)})
        if u.labels is not None:
            labels.update(zip(u.indices, u.labels, strict=False))
    classes = units[0].classes

    def name(p: int | None) -> str | None:  # a generative model's unparsed answer (-1) names no class
        return None if p is None else classes[p] if p >= 0 else NO_CLASS

    rows = []
    for u in units:
        answers = (u.vlm.answers if getattr(u, "vlm", None) is not None else None) or [None] * len(u.indices)
        for i, p, answer in zip(u.indices, u.preds, answers, strict=False):
            c, y = clean.get((u.model, i)), labels.get(i)
            rows.append({
                "index": int(i), "model": u.model, "label": None if y is None else classes[y],
                "clean_pred": name(c), "pred": name(p),
                "flipped": c is not None and c != p, "correct": None if y is None else p == y, "answer": answer,
            })
    frame = pd.DataFrame(rows, columns=["index", "model", "label", "clean_pred", "pred", "flipped", "correct",
                                        "answer"])
    return frame.sort_values(["index", "model"], kind="stable").reset_index(drop=True)


def flip_differences(predictions: pd.DataFrame) -> pd.DataFrame:
    """Images that flip for at least one model but not for another: index, label, who flipped, who kept."""
    rows = []
    for index, part in predictions.groupby("index", sort=True):
        flipped = part.loc[part["flipped"], "model"].tolist()
        kept = part.loc[~part["flipped"], "model"].tolist()
        if flipped and kept:
            preds = "; ".join(f"{m}: {c} → {p}" for m, c, p in zip(part["model"], part["clean_pred"], part["pred"], strict=True))
            rows.append({"index": int(index), "label": part["label"].iloc[0], "flipped for": ", ".join(flipped),
                         "kept by": ", ".join(kept), "clean → corrupted": preds})
    return pd.DataFrame(rows, columns=["index", "label", "flipped for", "kept by", "clean → corrupted"])


def flip_matrix(predictions: pd.DataFrame) -> pd.DataFrame:
    """Models × models: images the row model flips and the column model does not."""
    models = list(dict.fromkeys(predictions["model"]))
    wide = predictions.pivot_table(index="index", columns="model", values="flipped", aggfunc="first")
    counts = {a: {b: int((wide[a].astype(bool) & ~wide[b].astype(bool)).sum()) for b in models} for a in models}
    return pd.DataFrame(counts).T.loc[models, models]


def gallery_indices(predictions: pd.DataFrame, only: str = "all", limit: int = 8) -> list[int]:
    """The first ``limit`` image indices of the cell: every image, the flipped ones (for any
    model), or those that flip for one model but not another."""
    if only == "flipped":
        pool = predictions.loc[predictions["flipped"], "index"]
    elif only == "differ":
        pool = flip_differences(predictions)["index"]
    else:
        pool = predictions["index"]
    return list(dict.fromkeys(int(i) for i in pool))[:limit]


def enlarge(image: np.ndarray, size: int = 112) -> np.ndarray:
    """A small image enlarged (nearest neighbour) so a corruption's pixels stay visible."""
    import cv2

    if image.shape[0] >= size:
        return image
    return cv2.resize(image, (size, size), interpolation=cv2.INTER_NEAREST)


def verdicts_of(store: Store, run_ids: list[str], confidence: float = 0.95, models: list[str] | None = None) -> Any:
    """The paired comparison of the runs' models (``domainbench.metrics.comparison.Comparison``): its
    ``verdicts[i].sentence`` are the plain verdicts ``compare`` and ``show`` print, ``pairs`` the per-cell tests."""
    return comparison(store, run_ids, models, confidence)


# --------------------------------------------------------------------------- compare

#: (run_id, baseline or None) -> the run's view; the Compare page passes a cached one
ViewLoader = Callable[[str, str | None], RunView]


@dataclass
class Comparison:
    """What the Compare page draws from a set of runs."""

    #: per run × model: run facts, the column (group) it belongs to, and every COMPARE_METRICS value
    frame: pd.DataFrame
    #: per run × model × corruption: family, CE, rCE, FR, accuracy
    per_corruption: pd.DataFrame
    #: runs left out (unknown, no results yet), as messages
    problems: list[str]
    #: per run that differs from the majority's dataset, image count or model set: how
    flagged: dict[str, str]
    #: per run, the report its rows come from (against the chosen baseline)
    reports: dict[str, RunReport] = field(default_factory=dict)


COMPARE_COLUMNS = ["run", "group", "domain", "domain_text", "domain_id", "dataset", "images", "status", "partial",
                   "baseline", "model", *COMPARE_METRICS]


def compare_runs(
    store: Store, run_ids: list[str], baseline: str | None = None, load_view: ViewLoader | None = None,
) -> Comparison:
    """Every chosen run's report, in rows the Compare page groups by domain.

    Runs of one domain on the same dataset and image count form one group (one heatmap column,
    their values averaged); a run on another dataset or image count is its own group, named so,
    and every run that differs from the majority (dataset, images, models) is listed in
    ``flagged``, so nothing is mixed silently. ``baseline`` (a model shared by the runs)
    recomputes each run's mCE / rCE / mFR against it.
    """
    load_view = load_view or partial(load_run_view, store)
    views: list[RunView] = []
    problems: list[str] = []
    for rid in dict.fromkeys(run_ids):
        try:
            view = load_view(rid, _baseline_for(store, rid, baseline))
        except UserInputError as e:
            problems.append(str(e))
            continue
        if view.report is None:
            problems.append(f"{rid}: {view.error}")
            continue
        views.append(view)
    groups = _group_labels([v.run for v in views])
    rows, per_corr = [], []
    for v in views:
        assert v.report is not None
        rows += _compare_rows(v, v.report, groups[v.run_id])
        per = per_corruption_frame(v.report)
        per.insert(2, "family", [family_of(n) for n in per["corruption"]])
        per.insert(0, "baseline", v.report.baseline)
        per.insert(0, "group", groups[v.run_id])
        per.insert(0, "run", v.run_id)
        per_corr.append(per)
    per_corruption = pd.concat(per_corr, ignore_index=True) if per_corr else pd.DataFrame(
        columns=["run", "group", "baseline", "model", "corruption", "family", "ce", "rce", "fr", "accuracy"])
    return Comparison(pd.DataFrame(rows, columns=COMPARE_COLUMNS), per_corruption, problems,
                      comparability([v.run for v in views]), {v.run_id: v.report for v in views if v.report is not None})


def compare_frame(
    store: Store, run_ids: list[str], baseline: str | None = None, load_view: ViewLoader | None = None,
) -> tuple[pd.DataFrame, list[str]]:
    """Per run × model rows of :func:`compare_runs` and the runs left out."""
    c = compare_runs(store, run_ids, baseline, load_view)
    return c.frame, c.problems


def _setup(run: RunRecord) -> tuple[str, int | None, tuple[str, ...]]:
    """What must agree for two runs' numbers to be comparable: dataset, image count, model set."""
    dataset = run.dataset.name if run.dataset else run.config.dataset
    return dataset, run.dataset.size if run.dataset else None, tuple(sorted(run.config.models))


def _ladder_differences(run: RunRecord, ref: RunRecord) -> list[str]:
    """Shared corruptions whose severities were defined by another ladder version than ``ref``'s."""
    shared = sorted({c.name for c in run.domain.corruptions} & {c.name for c in ref.domain.corruptions})
    return [f"{n} severities of ladder v{run.ladder_version(n)} (v{ref.ladder_version(n)} in {ref.run_id})"
            for n in shared if run.ladder_version(n) != ref.ladder_version(n)]


def comparability(runs: list[RunRecord]) -> dict[str, str]:
    """Run id -> how it differs from the most common (dataset, images, models) of ``runs``, or in
    the severity-ladder version of a corruption it shares with the reference run."""
    if len(runs) < 2:
        return {}
    setups = {r.run_id: _setup(r) for r in runs}
    counts: dict[tuple[Any, ...], int] = {}
    for st_ in setups.values():
        counts[st_] = counts.get(st_, 0) + 1
    ref = max(counts, key=lambda k: counts[k])  # ties: the first seen (the newest run chosen first)
    by_id = {r.run_id: r for r in runs}
    ref_run = next(r for r in runs if setups[r.run_id] == ref)
    flagged = {}
    for rid, (dataset, images, models) in setups.items():
        why = []
        if dataset != ref[0]:
            why.append(f"dataset {dataset} (most runs: {ref[0]})")
        if images != ref[1]:
            why.append(f"{images} images (most runs: {ref[1]})")
        if models != ref[2]:
            why.append(f"models {', '.join(models)} (most runs: {', '.join(ref[2])})")
        why += _ladder_differences(by_id[rid], ref_run)
        if why:
            flagged[rid] = "; ".join(why)
    return flagged


def _labelled(run: RunRecord) -> bool | None:
    return run.dataset.labelled if run.dataset else None


def _comparable_setup(run: RunRecord) -> tuple[Any, ...]:
    """What must agree for runs to share a default comparison: :func:`_setup` and whether the images are labelled."""
    return (*_setup(run), _labelled(run))


def _completeness(run: RunRecord) -> tuple[Any, ...]:
    """Within one domain and setup, the run to prefer: every cell on every image (not adaptive), then the newest."""
    return (not run.config.adaptive, run.created_at)


@dataclass
class DefaultSelection:
    """Compare's default: one run per domain, every one comparable with the others."""

    runs: list[str]
    #: the setup they share: dataset, image count, models
    setup: tuple[Any, ...] | None
    #: domain text -> why none of its finished runs is in the default
    left_out: dict[str, str] = field(default_factory=dict)


def default_selection(runs: list[RunRecord], limit: int = 8) -> DefaultSelection:
    """Per domain the most complete comparable run, never a run the page would then flag as not comparable.

    Candidates are finished corruption runs (never FMR: another measurement, compared in its own section). Runs
    are grouped by setup (dataset, image count, model set, labelled or not); the setup that the most domains
    have wins (the page compares domains), ties going to more images, then more models, then the newest run.
    Within it each domain contributes its most complete run (all images in every cell rather than an adaptive
    run, then the newest). A run whose severity ladder differs from the others' is dropped (``comparability``
    would flag it). At most ``limit`` domains, the newest first; a domain without a run of that setup is named
    in ``left_out`` with the reason.
    """
    candidates = [r for r in runs if r.fmr is None and run_status(r) == FINISHED]
    if not candidates:
        return DefaultSelection([], None)
    by_setup: dict[tuple[Any, ...], dict[str, RunRecord]] = {}
    for r in candidates:
        best = by_setup.setdefault(_comparable_setup(r), {})
        if r.domain_id not in best or _completeness(r) > _completeness(best[r.domain_id]):
            best[r.domain_id] = r

    def strength(setup: tuple[Any, ...]) -> tuple[Any, ...]:
        _, images, models, _ = setup
        return (len(by_setup[setup]), images or 0, len(models), max(r.created_at for r in by_setup[setup].values()))

    setup = max(by_setup, key=strength)
    chosen = sorted(by_setup[setup].values(), key=lambda r: r.created_at, reverse=True)[:limit]
    ladder: set[str] = set()
    while (flagged := comparability(chosen)):  # a severity ladder apart from the reference run's
        ladder |= {r.domain_id for r in chosen if r.run_id in flagged}
        chosen = [r for r in chosen if r.run_id not in flagged]
    dataset, images, models, _ = setup
    taken = {r.domain_id for r in chosen}
    left_out: dict[str, str] = {}
    for r in candidates:
        if r.domain_id in taken:
            continue
        left_out.setdefault(short_text(r.domain.domain or "?", 60), (
            f"no finished run on {dataset} with {images} images and models {', '.join(models)}"
            if r.domain_id not in by_setup[setup] else "its run's severity ladder differs from the others'"
            if r.domain_id in ladder else f"more than {limit} domains: the newest are chosen"))
    return DefaultSelection([r.run_id for r in chosen], setup[:3], left_out)


def included_runs(records: list[RunRecord], include_flagged: bool) -> tuple[list[RunRecord], dict[str, str]]:
    """The chosen corruption runs the comparison uses, and the runs flagged as not comparable with the rest
    (``comparability``): those are left out unless ``include_flagged``."""
    flagged = comparability(records)
    return (list(records) if include_flagged else [r for r in records if r.run_id not in flagged]), flagged


def shared_of(records: list[RunRecord]) -> list[str]:
    """Models evaluated in every one of ``records`` (candidates for one baseline), in the first run's order."""
    if not records:
        return []
    return [m for m in records[0].config.models if all(m in r.config.models for r in records)]


def default_baseline(records: list[RunRecord], shared: list[str]) -> str | None:
    """One baseline for every included run, by default the one their run pages use: the shared model most of
    ``records`` name as their own baseline (ties: the earlier in ``shared``); None without a shared model."""
    if not shared:
        return None
    votes = [r.config.baseline_model for r in records if r.config.baseline_model in shared]
    return max(shared, key=lambda m: (votes.count(m), -shared.index(m)))


def _group_labels(runs: list[RunRecord]) -> dict[str, str]:
    """Run id -> its column: the domain, plus the setup where one domain has runs on several setups
    (dataset, image count, models), so such runs are never averaged together."""
    keys = {r.run_id: (r.domain_id, *_setup(r)) for r in runs}
    setups_per_domain: dict[str, set[tuple[Any, ...]]] = {}
    for key in keys.values():
        setups_per_domain.setdefault(key[0], set()).add(key[1:])
    labels: dict[tuple[Any, ...], str] = {}
    for r in runs:
        key = keys[r.run_id]
        if key in labels:
            continue
        label = short_text(r.domain.domain or "?", 32)
        if len(setups_per_domain[key[0]]) > 1:
            label += f" [{key[1]}, {key[2]} img, {len(key[3])} models]"
        if label in labels.values():  # two domains with the same short text: told apart by their plan's id
            label += f" (plan {key[0][:6]})"
        labels[key] = label
    return {rid: labels[key] for rid, key in keys.items()}


def _compare_rows(view: RunView, report: RunReport, group: str) -> list[dict[str, Any]]:
    dataset, images, _ = _setup(view.run)
    about_run = {
        "run": view.run_id,
        "group": group,
        "domain": run_label(view.run),
        "domain_text": view.run.domain.domain,
        "domain_id": view.run.domain_id,
        "dataset": dataset,
        "images": images,
        "status": view.status,
        "partial": view.partial,
        "baseline": report.baseline,
    }
    return [{**about_run, "model": row.model, **{k: getattr(row, k) for k in COMPARE_METRICS}} for row in report.table()]


def group_runs(frame: pd.DataFrame) -> dict[str, list[str]]:
    """Group (column) -> the runs averaged in it."""
    return {g: list(dict.fromkeys(part["run"])) for g, part in frame.groupby("group", sort=False)}


#: ratios to a baseline (Compare's model-level and per-corruption fields): never averaged over runs whose
#: baselines differ, since each is relative to its own reference
RATIO_FIELDS = {m.field for level in ("model", "corruption") for m in metrics_of(level) if m.unit == "ratio" and m.field}


def _mixed(frame: pd.DataFrame, metric: str, by: str) -> set[tuple[str, str]]:
    """(model, ``by``) whose rows (with ``metric`` defined) are ratios to more than one baseline: their mean is
    refused. Empty for a metric that is not a ratio."""
    if metric not in RATIO_FIELDS or frame.empty:
        return set()
    defined = frame[frame[metric].notna()]
    n = defined.groupby(["model", by], sort=False)["baseline"].nunique()
    return set(n[n > 1].index)


def mixed_baselines(frame: pd.DataFrame, by: str = "group") -> dict[str, list[str]]:
    """``by`` value (a heatmap column, a family) -> the baselines its runs' ratios are relative to, where there are
    several: a mean of those ratios is not shown (each is relative to another model)."""
    if frame.empty:
        return {}
    out = {k: sorted(set(part["baseline"])) for k, part in frame.groupby(by, sort=False)}
    return {k: v for k, v in out.items() if len(v) > 1}


def metric_matrix(frame: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Models × groups: the metric averaged over the group's runs (NaN where a model was not evaluated, and for a
    ratio whose runs in the group use different baselines: refused, see :func:`mixed_baselines`)."""
    groups = list(dict.fromkeys(frame["group"]))
    models = list(dict.fromkeys(frame["model"]))
    values = frame.astype({metric: "float64"}).groupby(["model", "group"])[metric].mean()
    out = values.unstack("group").reindex(index=models, columns=groups)
    for model, group in _mixed(frame, metric, "group"):
        out.loc[model, group] = np.nan
    return out


def _domain_of_group(frame: pd.DataFrame) -> dict[str, str]:
    return dict(zip(frame["group"], frame["domain_id"], strict=True))


def domain_means(frame: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Models × domains: the mean of :func:`metric_matrix` over each domain's columns (a domain with runs on two
    setups has two columns but counts once)."""
    matrix = metric_matrix(frame, metric)
    domain = _domain_of_group(frame)
    return matrix.T.groupby([domain[g] for g in matrix.columns], sort=False).mean().T


def _one_baseline(frame: pd.DataFrame, metric: str) -> dict[str, bool]:
    """Per model: whether its defined ``metric`` values share one baseline (always, for a metric that is not a ratio)."""
    if metric not in RATIO_FIELDS:
        return {m: True for m in frame["model"]}
    defined = frame[frame[metric].notna()]
    n = defined.groupby("model")["baseline"].nunique()
    return {m: int(n.get(m, 0)) <= 1 for m in dict.fromkeys(frame["model"])}


def ranking_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """Models ranked by clean accuracy and by mean corrupted accuracy (averaged over the domains).

    ``rank change`` = clean rank − corrupted rank: positive when a model climbs under corruption. A domain counts
    once: its columns are averaged first. A model missing from some domains is ranked on the domains it has;
    ``domains`` says on how many and ``note`` marks a model averaged over fewer domains than another. Mean mCE is
    left undefined for a model whose domains use different baselines (ratios to different models).
    """
    clean = domain_means(frame, "acc")
    corrupted = domain_means(frame, "mean_corrupted_acc")
    mce = domain_means(frame, "mce")
    one = _one_baseline(frame, "mce")
    models = list(clean.index)
    domains = corrupted.notna().sum(axis=1).to_numpy()
    most = int(domains.max()) if len(domains) else 0
    out = pd.DataFrame({
        "model": models,
        "kind": [kind_of(m) for m in models],
        "domains": domains,
        "clean acc %": 100.0 * clean.mean(axis=1, skipna=True).to_numpy(),
        "corrupted acc %": 100.0 * corrupted.mean(axis=1, skipna=True).to_numpy(),
        "mean mCE": [v if one[m] else np.nan for m, v in zip(models, mce.mean(axis=1, skipna=True), strict=True)],
    })
    out["clean rank"] = out["clean acc %"].rank(ascending=False, method="min").astype("Int64")
    out["corrupted rank"] = out["corrupted acc %"].rank(ascending=False, method="min").astype("Int64")
    out["rank change"] = out["clean rank"] - out["corrupted rank"]
    out["note"] = [fewer_domains_note(int(d), most) + ("" if one[m] else ("; " if d < most else "") + MIXED_MCE)
                   for m, d in zip(models, domains, strict=True)]
    return out.sort_values(["corrupted rank", "model"], kind="stable", na_position="last").reset_index(drop=True)


#: the ranking's note on a model whose mCE values are ratios to different baselines
MIXED_MCE = "no mean mCE: its domains use different baselines"


def fewer_domains_note(domains: int, most: int) -> str:
    """The ranking's mark on a model averaged over fewer domains than another ("" where it has them all)."""
    return f"averaged over {domains} of {most} domains" if domains < most else ""


def family_rows(per_corruption: pd.DataFrame) -> pd.DataFrame:
    """The per-corruption rows that belong to a corruption family or to the composed row: never a real-shift cell
    (the user's own images stay out of every average, as out of the run's)."""
    return per_corruption[per_corruption["family"] != REAL_SHIFT] if not per_corruption.empty else per_corruption


def shift_rows(per_corruption: pd.DataFrame) -> pd.DataFrame:
    """The real-shift cells (one row per run × model × shift), shown apart with their own intervals."""
    if per_corruption.empty:
        return per_corruption
    return per_corruption[per_corruption["family"] == REAL_SHIFT].reset_index(drop=True)


def family_matrix(per_corruption: pd.DataFrame, metric: str = "accuracy") -> pd.DataFrame:
    """Models × corruption families (and ``COMPOSED``): the metric averaged over the family's corruptions in every
    chosen run; real-shift cells are never part of it, and a ratio whose runs use different baselines is refused."""
    rows = family_rows(per_corruption)
    if rows.empty:
        return pd.DataFrame()
    models = list(dict.fromkeys(rows["model"]))
    values = rows.astype({metric: "float64"}).groupby(["model", "family"])[metric].mean()
    out = values.unstack("family").reindex(index=models)
    for model, family in _mixed(rows, metric, "family"):
        out.loc[model, family] = np.nan
    return out


# --------------------------------------------------------------------------- compare: intervals

#: per run, its numbers under each draw (the multipliers of its images), paired across the runs (``query.draws``), or why none
Draws = dict[str, "RunDraws | str"]
#: Compare's model-level fields that have per-resample values -> their names there (the registry's model metrics
#: declaring an interval: ``confidence.model_interval_metrics``)
DRAWN_METRICS = {m.field: m.name for m in metrics_of("model") if m.interval and m.field}


def _mean_draws(parts: list[np.ndarray | None]) -> np.ndarray | None:
    """The per-resample mean of ``parts`` (see ``stats.mean_draws``); None when one part has no draws."""
    if not parts or any(p is None for p in parts):
        return None
    return mean_draws(parts)  # type: ignore[arg-type]


def _model_draws(draws: Draws, run: str, model: str, metric: str) -> np.ndarray | None:
    d = draws.get(run)
    return None if not isinstance(d, RunDraws) or model not in d.models else d.models[model][DRAWN_METRICS[metric]]


def _grouped_draws(frame: pd.DataFrame, metric: str, by: str,
                   parts: Callable[[str, pd.DataFrame], list[np.ndarray | None]]) -> dict[tuple[str, str], np.ndarray | None]:
    """(model, ``by``) -> the mean of ``parts(model, rows)`` under each resample, over the rows whose ``metric`` is
    defined; None where a part has no draws."""
    defined = frame[frame[metric].notna()]
    return {(m, g): _mean_draws(parts(m, part)) for (m, g), part in defined.groupby(["model", by], sort=False)}


def group_draws(frame: pd.DataFrame, draws: Draws, metric: str) -> dict[tuple[str, str], np.ndarray | None]:
    """(model, group) -> the metric of :func:`metric_matrix` (the mean over the group's runs) under each resample;
    None where a run of the mean has no draws. Cells whose value is undefined are left out."""
    if metric not in DRAWN_METRICS:
        return {}
    mixed = _mixed(frame, metric, "group")
    values = _grouped_draws(frame, metric, "group", lambda m, part: [_model_draws(draws, r, m, metric) for r in part["run"]])
    return {k: v for k, v in values.items() if k not in mixed}


def _bounds(values: dict[Any, np.ndarray | None], confidence: float) -> dict[Any, tuple[float, float] | None]:
    return {k: None if v is None else percentile_interval(v, confidence) for k, v in values.items()}


def _matrix(bounds: dict[tuple[str, str], tuple[float, float] | None], like: pd.DataFrame, side: int) -> pd.DataFrame:
    out = pd.DataFrame(np.nan, index=like.index, columns=like.columns)
    for (row, col), iv in bounds.items():
        if iv is not None and row in out.index and col in out.columns:
            out.loc[row, col] = iv[side]
    return out


def _low_high(values: dict[tuple[str, str], np.ndarray | None], like: pd.DataFrame,
              confidence: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``like``'s shape: the low and the high end of each (row, column)'s percentile interval of ``values``."""
    bounds = _bounds(values, confidence)
    return _matrix(bounds, like, 0), _matrix(bounds, like, 1)


def metric_intervals(frame: pd.DataFrame, draws: Draws, metric: str,
                     confidence: float = 0.95) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Models × groups, as :func:`metric_matrix`: the low and the high end of each mean's percentile
    interval (NaN where it has none: the metric has no draws, or a run of the mean has none)."""
    return _low_high(group_draws(frame, draws, metric), metric_matrix(frame, metric), confidence)


def _over_groups(frame: pd.DataFrame, draws: Draws, metric: str) -> dict[str, np.ndarray | None]:
    """Model -> the ranking's average under each resample: the mean over its domains of the mean over each
    domain's columns of :func:`group_draws` (a domain counts once, as in :func:`ranking_frame`). A model whose ratios
    use different baselines has none."""
    domain = _domain_of_group(frame)
    per: dict[str, dict[str, list[np.ndarray | None]]] = {}
    for (model, group), v in group_draws(frame, draws, metric).items():
        per.setdefault(model, {}).setdefault(domain[group], []).append(v)
    one = _one_baseline(frame, metric)
    return {m: _mean_draws([_mean_draws(parts) for parts in by_domain.values()]) if one[m] else None
            for m, by_domain in per.items()}


def _rank_bounds(values: dict[str, np.ndarray | None], confidence: float) -> dict[str, tuple[float, float] | None]:
    """Per model, the interval of its rank (1 = highest value; ties share the best rank) over the resamples,
    where every model has draws; the ends rounded outwards to whole ranks."""
    if not values or any(v is None for v in values.values()):
        return {m: None for m in values}
    v = np.stack(list(values.values()))  # (models, resamples)
    above = (v[None, :, :] > v[:, None, :]).sum(axis=1)  # per model and resample: models strictly higher
    ranks = np.where(np.isnan(v), np.nan, 1.0 + above)
    out = {}
    for m, r in zip(values, ranks, strict=True):
        iv = percentile_interval(r, confidence)
        out[m] = None if iv is None else (float(np.floor(iv[0])), float(np.ceil(iv[1])))
    return out


#: ``ranking_intervals``' columns: ranking column -> (the Compare field it averages, its low and high column)
RANKING_INTERVALS = {"clean acc %": ("acc", "clean acc low %", "clean acc high %"),
                     "corrupted acc %": ("mean_corrupted_acc", "corrupted acc low %", "corrupted acc high %"),
                     "mean mCE": ("mce", "mean mCE low", "mean mCE high"),
                     "clean rank": ("acc", "clean rank low", "clean rank high"),
                     "corrupted rank": ("mean_corrupted_acc", "corrupted rank low", "corrupted rank high")}


def ranking_intervals(frame: pd.DataFrame, draws: Draws, confidence: float = 0.95) -> pd.DataFrame:
    """Per model (the index), the 95 % intervals of :func:`ranking_frame`'s averages over the groups (accuracies
    in %) and of its ranks: ``RANKING_INTERVALS``' low and high columns, NaN where there is none."""
    models = list(dict.fromkeys(frame["model"]))
    out = pd.DataFrame(index=pd.Index(models, name="model"))
    for column, (metric, low, high) in RANKING_INTERVALS.items():
        values = _over_groups(frame, draws, metric)
        bounds = _rank_bounds(values, confidence) if column.endswith("rank") else _bounds(values, confidence)
        scale = 100.0 if column.endswith("%") else 1.0
        for name, side in ((low, 0), (high, 1)):
            out[name] = [np.nan if (iv := bounds.get(m)) is None else scale * iv[side] for m in models]
    return out


def family_intervals(per_corruption: pd.DataFrame, draws: Draws, metric: str = "accuracy",
                     confidence: float = 0.95) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Models × families, as :func:`family_matrix`: the low and high end of each mean's 95 % interval. A family's
    mean averages its corruptions' values over every chosen run; under each resample the same mean is taken of
    each (run, corruption)'s value under that resample (cells of one run share the resample's images)."""
    like = family_matrix(per_corruption, metric)
    if like.empty:
        return like, like
    rows = family_rows(per_corruption)
    mixed = _mixed(rows, metric, "family")
    values = _grouped_draws(rows, metric, "family", lambda m, part: [
        _corruption_draws(draws, r, m, c, metric) for r, c in zip(part["run"], part["corruption"], strict=True)])
    return _low_high({k: v for k, v in values.items() if k not in mixed}, like, confidence)


def _corruption_draws(draws: Draws, run: str, model: str, corruption: str, metric: str) -> np.ndarray | None:
    d = draws.get(run)
    return d.corruptions.get(model, {}).get(corruption, {}).get(metric) if isinstance(d, RunDraws) else None


Bound = Callable[[Any, str], "tuple[float, float] | None"]


def _with_bounds(frame: pd.DataFrame, columns: list[str], bound: Bound) -> pd.DataFrame:
    """``frame`` plus ``{c}_lo`` / ``{c}_hi`` for each column ``c``: ``bound(row, c)`` where the row's value is
    defined, NaN elsewhere (a value without an interval, an undefined value)."""
    out = frame.copy()
    for c in columns:
        ivs = [None if v != v or v is None else bound(row, c)
               for row, v in zip(frame.itertuples(index=False), frame[c], strict=True)]
        out[f"{c}_lo"] = [np.nan if iv is None else iv[0] for iv in ivs]
        out[f"{c}_hi"] = [np.nan if iv is None else iv[1] for iv in ivs]
    return out


def run_bounds(frame: pd.DataFrame, draws: Draws, confidence: float = 0.95) -> pd.DataFrame:
    """Compare's per run × model ``frame`` plus ``{field}_lo`` / ``{field}_hi`` of each field with per-resample values
    (``DRAWN_METRICS``): the run's own percentile interval, from its draws."""

    def bound(row: Any, field: str) -> tuple[float, float] | None:
        v = _model_draws(draws, row.run, row.model, field)
        return None if v is None else percentile_interval(v, confidence)

    return _with_bounds(frame, [f for f in DRAWN_METRICS if f in frame.columns], bound)


def corruption_bounds(per_corruption: pd.DataFrame, draws: Draws, run: str | None = None, confidence: float = 0.95,
                      cells: dict[tuple[str, str, int], tuple[float, float] | None] | None = None) -> pd.DataFrame:
    """A per-corruption frame (:func:`per_corruption_frame`, or Compare's with a ``run`` column; else each row is
    ``run``'s) plus ``{metric}_lo`` / ``{metric}_hi`` of each metric of ``PER_CORRUPTION_METRICS``: the percentile
    interval of the row's value under its run's resamples (``RunDraws.corruptions``: the accuracy is the mean over
    the severities in each resample, so its interval is the mean's). A corruption of one cell without draws (a real
    shift, on its own images) takes that cell's interval from ``cells`` (the run page's cell intervals)."""
    single: dict[tuple[str, str], tuple[float, float] | None] = {}
    for (model, corruption, _), iv in (cells or {}).items():
        single[(model, corruption)] = None if (model, corruption) in single else iv  # a second severity: not one cell

    def bound(row: Any, metric: str) -> tuple[float, float] | None:
        v = _corruption_draws(draws, getattr(row, "run", run), row.model, row.corruption, metric)
        if v is not None and not np.isnan(v).all():
            return percentile_interval(v, confidence)
        return single.get((row.model, row.corruption)) if metric == "accuracy" else None

    return _with_bounds(per_corruption, list(PER_CORRUPTION_METRICS), bound)


def draws_problems(draws: Draws) -> dict[str, str]:
    """Runs whose numbers have no per-resample values, and why (their aggregates show no interval)."""
    return {rid: d for rid, d in draws.items() if isinstance(d, str)}


def _baseline_for(store: Store, run_id: str, wanted: str | None) -> str | None:
    """``wanted`` where the run evaluated it, else the run's own baseline (named, so the Runs
    page's cached report of that baseline is reused); None for a run that is not stored."""
    run = query.find_run(store, run_id)
    if run is None:
        return None
    return wanted if wanted in run.config.models else run.config.baseline_model


def _models_of(store: Store, run_id: str) -> list[str]:
    run = query.find_run(store, run_id)
    return list(run.config.models) if run else []


def shared_models(store: Store, run_ids: list[str]) -> list[str]:
    """Models evaluated in every one of the runs (candidates for a common baseline)."""
    sets = [set(_models_of(store, r)) for r in run_ids]
    if not sets:
        return []
    first = _models_of(store, run_ids[0])
    return [m for m in first if all(m in s for s in sets)]


# --------------------------------------------------------------------------- domains & planning


def selection_frequencies(
    store: Store, extra: DomainConfig | None = None, names: list[str] | None = None, only: set[str] | None = None
) -> pd.DataFrame:
    """Corruption × domain selection frequencies (the product paper's Figure 2).

    Columns are stored domains that carry planner frequencies (plus ``extra``, a plan not
    stored yet, first); rows are catalogue corruptions (``names``, default: every name seen).
    A chosen corruption without a recorded frequency counts as 1. ``only``: the domain ids to show
    (the Runs page's: domains that have runs).
    """
    stored: list[DomainConfig] = [d for d in stored_domains(store) if only is None or d.domain_id in only]
    columns: dict[str, dict[str, float]] = {}
    seen: set[tuple[str, str]] = set()
    for plan in ([extra] if extra else []) + stored:
        freq = _chosen_frequencies(plan)
        if not freq:
            continue
        label = short_text(plan.domain or "?", 32)
        key = json.dumps(sorted(freq.items()))
        if (label, key) in seen:  # the same plan stored twice (e.g. planned then run)
            continue
        seen.add((label, key))
        while label in columns:
            label += "′"
        columns[label] = freq
    rows = names or sorted({n for f in columns.values() for n in f})
    return pd.DataFrame({col: [float(f.get(n, 0.0)) for n in rows] for col, f in columns.items()}, index=rows)


def _chosen_frequencies(plan: DomainConfig) -> dict[str, float]:
    freq = dict(plan.planner.frequencies)
    for c in plan.corruptions:
        freq.setdefault(c.name, 1.0)
    return freq


def plan_domain(text: str, provider: str | list[str] = "offline", samples: int = 10) -> DomainConfig:
    """Plan a domain (the planner's DomainConfig; several providers vote); errors are UserInputError/PlannerError."""
    from domainbench.planner import plan

    return plan(text, provider=provider, samples=samples)


def save_domain(store: Store, cfg: DomainConfig) -> tuple[str, Path]:
    """Store the plan (for the selection heatmap) and write its TOML under $DOMAINBENCH_HOME/domains; its id and file."""
    from domainbench.records.config import save
    from domainbench.service.runs import save_domain as store_domain

    did = store_domain(store, cfg, created_at=cfg.planner.created_at or _now())
    return did, save(cfg, _plan_file(did))


def _plan_file(domain_id: str) -> Path:
    from domainbench.service.runs import plans_dir

    return plans_dir() / f"{domain_id}.toml"


#: a stored plan's id (``DomainRepository.save``: 16 hexadecimal characters of its content hash)
PLAN_ID = re.compile(r"[0-9a-f]{16}")


def stored_plan(store: Store, domain_id: str) -> tuple[DomainConfig, Path | None] | None:
    """The plan stored under ``domain_id`` (a shared link's ``?plan=``) and its TOML file where that exists; None
    for an id that is not one or names no stored plan (the id is checked before it names a file)."""
    if not PLAN_ID.fullmatch(domain_id):
        return None
    record = stored_domain(store, domain_id)
    if record is None:
        return None
    cfg = record.config()
    path = _plan_file(domain_id)
    return cfg, path if path.is_file() else None


def sample_images() -> tuple[np.ndarray, list[str], np.ndarray]:
    from domainbench.data import load_sample

    ds = load_sample()
    assert ds.arrays is not None and ds.labels is not None
    return ds.arrays, ds.classes, ds.labels


def preview_image(index: int = 0, size: int = 112) -> np.ndarray:
    """An image of the bundled sample, enlarged (nearest neighbour) so corruptions are visible."""
    from domainbench.metrics.ladder import sample_image

    return sample_image(index, size)


#: a temporal corruption's preview: a clip of this many frames panning over the still image, at this frame rate
PREVIEW_CLIP_FRAMES, PREVIEW_CLIP_FPS = 12, 25.0


def is_temporal(name: str) -> bool:
    """A video-only corruption (state across frames: ``corruptions.clips``)."""
    from domainbench import corruptions

    return corruptions.is_temporal(name)


def gallery(image: np.ndarray, name: str, severities: list[int] | tuple[int, ...] = (1, 2, 3, 4, 5), seed: int = 0) -> list[np.ndarray]:
    """The image under one corruption at each severity (the engine's seeded kernels). A temporal (video-only)
    corruption has no still-image kernel: it corrupts a short clip that pans across the image (state across
    frames needs motion to show) and each severity shows the frame it changed most."""
    from domainbench import corruptions
    from domainbench.metrics.ladder import severity_ladder

    if not is_temporal(name):
        return severity_ladder(image, name, severities, seed)
    rgb = image if image.ndim == 3 else np.repeat(image[..., None], 3, axis=2)
    clip = np.stack([np.roll(rgb, k, axis=1) for k in range(PREVIEW_CLIP_FRAMES)])
    out = []
    for s in severities:
        bad = corruptions.corrupt_clip(name, clip, s, seed=seed, fps=PREVIEW_CLIP_FPS)
        worst = int(np.argmax(np.abs(bad.astype(np.int16) - clip).mean(axis=(1, 2, 3))))
        frame = bad[worst]
        out.append(frame if image.ndim == 3 else frame.mean(axis=2).round().astype(np.uint8))
    return out


def corruption_info(name: str) -> dict[str, str]:
    from domainbench import corruptions
    try:
        spec = corruptions.get(name)
    except corruptions.CorruptionError as e:
        raise UserInputError(str(e)) from e
    return {"name": name, "family": str(getattr(spec, "family", "")), "description": str(getattr(spec, "description", ""))}


def known_models() -> list[str]:
    from domainbench.models import list_models

    return list_models()


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")

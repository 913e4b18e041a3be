"""Data access for the browser UI: store records and run reports -> plain frames and arrays.

Nothing here imports Streamlit, so every function is testable against a temporary store.
A finished run is drawn from the report the engine stored as it finished; another baseline
is derived from that report's cell statistics (no unit document is read). A run that is not
finished gets a report built from the units stored so far, and :class:`RunView` says so
(``partial``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from backend.config import DomainConfig
from backend.engine.export import CELL_FIELDS, cell_rows, to_csv, to_json
from backend.engine.status import run_status
from backend.errors import UserInputError
from backend.metrics.run_report import rebaseline
from backend.report import RunReport
from backend.store import Store, home_dir
from backend.store.records import DomainRecord, RunRecord, StabilityRecord

REPO_ROOT = Path(__file__).resolve().parent.parent
FINISHED = "done"
STABILITY_METRICS = {
    "divergence_radius": "DivergenceRadius R_dr",
    "cosine": "cosine robustness R_cs",
    "euclidean": "Euclidean robustness R_ed",
}
#: metrics the Compare page can plot: field of a report's ``SummaryRow`` -> (label, lower is better)
COMPARE_METRICS: dict[str, tuple[str, bool]] = {
    "mce": ("mCE", True),
    "rce": ("rCE", True),
    "mfr": ("mFR", True),
    "acc": ("clean accuracy", False),
    "mean_corrupted_acc": ("mean corrupted accuracy", False),
    "safe_acc": ("safe-cell accuracy", False),
    "corr": ("corr(acc, LFP)", False),
}


# --------------------------------------------------------------------------- runs


def short_text(text: str, n: int = 48) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 1].rstrip() + "…"


def runs_frame(store: Store) -> pd.DataFrame:
    """One row per stored run, newest first: run, status, domain, models, dataset, created."""
    rows = [
        {
            "run": r.run_id,
            "status": run_status(r),
            "domain": short_text(r.domain.domain, 80),
            "models": ", ".join(r.config.models),
            "dataset": r.dataset.name if r.dataset else r.config.dataset,
            "images": r.dataset.size if r.dataset else None,
            "created": r.created_at,
        }
        for r in store.list_runs()
    ]
    return pd.DataFrame(rows, columns=["run", "status", "domain", "models", "dataset", "images", "created"])


def expected_cells(run: RunRecord) -> int:
    """(model, corruption, severity) cells a finished run has: the clean pass plus every severity."""
    per_model = 1 + sum(len(c.severities) for c in run.domain.corruptions)
    return len(run.config.models) * per_model


def run_fingerprint(store: Store, run_id: str) -> tuple[Any, ...]:
    """A cache key of everything derived from a run's stored results.

    A run that is not running cannot change its results without changing its status (or
    being resumed), so its status and timestamps suffice and no key is counted; a running
    run also counts what it stored so far, so each new unit draws the page anew.
    """
    run = store.get_run(run_id)
    if run is None:
        return ("missing",)
    status = run_status(run)
    if status != "running":
        return (status, run.resumed_at, run.finished_at)
    return (
        status,
        run.resumed_at,
        len(store.keys("units", run_id=run_id)),
        len(store.keys("threat", run_id=run_id)),
        len(store.keys("stability", run_id=run_id)),
    )


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


def get_run(store: Store, run_id: str) -> RunRecord:
    run = store.get_run(run_id)
    if run is None:
        raise UserInputError(f"no run {run_id!r} in {store.description}; pick one from the runs table")
    return run


def load_run_view(store: Store, run_id: str, baseline: str | None = None) -> RunView:
    """The run and its report against ``baseline`` (default: the run's own baseline).

    Raises :class:`UserInputError` for an unknown run or baseline; a run whose report cannot
    be built yet (no units, or the baseline has no cell yet) comes back with ``report=None``
    and ``error``. Only unit keys are counted here, never unit documents loaded.
    """
    run = get_run(store, run_id)
    if baseline is not None and baseline not in run.config.models:
        raise UserInputError(f"baseline {baseline!r} is not a model of run {run_id}; choose one of {run.config.models}")
    keys = store.keys("units", run_id=run_id)
    done_cells = len({(k[1], k[2], k[3]) for k in keys})  # (model, corruption, severity) of the unit keys
    view = RunView(run=run, report=None, n_units=len(keys), done_cells=done_cells, total_cells=expected_cells(run))
    if not keys:
        view.error = (
            "no finished units yet: the run has just started"
            if view.status == "running"
            else f"the run stored no units (status {view.status}); resume it with `domainbench run --resume {run_id}`"
        )
        return view
    try:
        view.report = report_of(store, run, baseline)
    except ValueError as e:  # UserInputError / MetricInputError: partial data the metrics cannot use yet
        view.error = str(e)
    return view


def report_of(store: Store, run: RunRecord, baseline: str | None = None) -> RunReport:
    """The stored report of a finished run, re-based when asked; otherwise one built from the stored units.

    Only a finished run's stored report is trusted: a resumed run still holds the report of
    its previous finish, which its new units may already have outgrown.
    """
    from backend.engine.reports import build_report

    stored = store.get_report(run.run_id) if run_status(run) == FINISHED else None
    if stored is None:
        return build_report(store, run.run_id, baseline)
    if baseline in (None, stored.baseline):
        return stored
    return rebaseline(stored, baseline)


def run_label(run: RunRecord) -> str:
    return f"{short_text(run.domain.domain or '?', 40)} · {run.run_id[-4:]}"


# --------------------------------------------------------------------------- report frames


def summary_frame(report: RunReport) -> pd.DataFrame:
    """The product paper's table with the safe-cell accuracy: one row per model.

    Accuracies are percentages; ``None`` (not applicable / undefined) stays missing, never 0.
    """
    rows = [
        {
            "model": row.model,
            "baseline": row.baseline,
            "clean acc %": _pct(row.acc),
            "corrupted acc %": _pct(row.mean_corrupted_acc),
            "safe-cell acc %": _pct(row.safe_acc),
            "mCE": row.mce,
            "rCE": row.rce,
            "mFR": row.mfr,
            "corr(acc, LFP)": row.corr,
        }
        for row in report.table()
    ]
    if not rows:
        return pd.DataFrame()
    # float64 throughout, so a column of Nones is NaN ("n/a"), not an object column
    return pd.DataFrame(rows).astype({c: "float64" for c in rows[0] if c not in ("model", "baseline")})


def _pct(v: float | None) -> float | None:
    return None if v is None else 100.0 * float(v)


def cells_frame(report: RunReport) -> pd.DataFrame:
    """Long form, one row per model × (corruption, severity) including the clean pass.

    Columns: model, corruption, severity, n, accuracy, lfp, flips, in_common, mean_threat, safe.
    """
    return pd.DataFrame(cell_rows(report), columns=CELL_FIELDS)


def model_notes(report: RunReport) -> dict[str, list[str]]:
    return {m.model: list(m.notes) for m in report.models if m.notes}


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
    rows = [row for record in store.find("stability", run_id=run_id) for row in _stability_rows(record)]
    frame = pd.DataFrame(rows, columns=["model", "corruption", "shard", "index", *STABILITY_METRICS])
    return frame.sort_values(["model", "corruption", "shard", "index"], kind="stable").reset_index(drop=True)


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


def export_csv(report: RunReport) -> str:
    """The same file as ``domainbench export --format csv``: one row per model × cell."""
    return to_csv(report)


def export_json(run: RunRecord, report: RunReport) -> str:
    return to_json(run, report)


# --------------------------------------------------------------------------- compare

#: (run_id, baseline or None) -> the run's view; the Compare page passes a cached one
ViewLoader = Callable[[str, str | None], RunView]


def compare_frame(
    store: Store, run_ids: list[str], baseline: str | None = None, load_view: ViewLoader | None = None,
) -> tuple[pd.DataFrame, list[str]]:
    """Per run × model: domain label and every metric of :data:`COMPARE_METRICS`.

    ``baseline`` (a model shared by the runs) recomputes each run's mCE/rCE/mFR against it;
    otherwise each run keeps its own baseline. Runs whose report cannot be built are left out
    and named in the returned messages.
    """
    load_view = load_view or partial(load_run_view, store)
    rows: list[dict[str, Any]] = []
    problems: list[str] = []
    for rid in run_ids:
        try:
            view = load_view(rid, _baseline_for(store, rid, baseline))
        except UserInputError as e:
            problems.append(str(e))
            continue
        if view.report is None:
            problems.append(f"{rid}: {view.error}")
            continue
        rows += _compare_rows(view, view.report)
    cols = ["run", "domain", "domain_text", "status", "partial", "baseline", "model", *COMPARE_METRICS]
    return pd.DataFrame(rows, columns=cols), problems


def _compare_rows(view: RunView, report: RunReport) -> list[dict[str, Any]]:
    about_run = {
        "run": view.run_id,
        "domain": run_label(view.run),
        "domain_text": view.run.domain.domain,
        "status": view.status,
        "partial": view.partial,
        "baseline": report.baseline,
    }
    return [{**about_run, "model": row.model, **{k: getattr(row, k) for k in COMPARE_METRICS}} for row in report.table()]


def _baseline_for(store: Store, run_id: str, wanted: str | None) -> str | None:
    """``wanted`` where the run evaluated it, else the run's own baseline (named, so the Runs
    page's cached report of that baseline is reused); None for a run that is not stored."""
    run = store.get_run(run_id)
    if run is None:
        return None
    return wanted if wanted in run.config.models else run.config.baseline_model


def _models_of(store: Store, run_id: str) -> list[str]:
    run = store.get_run(run_id)
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
    store: Store, extra: DomainConfig | None = None, names: list[str] | None = None
) -> pd.DataFrame:
    """Corruption × domain selection frequencies (the product paper's Figure 2).

    Columns are stored domains that carry planner frequencies (plus ``extra``, a plan not
    stored yet, first); rows are catalogue corruptions (``names``, default: every name seen).
    A chosen corruption without a recorded frequency counts as 1.
    """
    stored: list[DomainConfig] = sorted(store.find("domains"), key=lambda d: d.created_at, reverse=True)
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


def plan_domain(text: str, provider: str = "offline", samples: int = 10) -> DomainConfig:
    """Plan a domain (the planner's DomainConfig); errors are UserInputError/PlannerError."""
    from backend.planner import plan

    return plan(text, provider=provider, samples=samples)


def save_domain(store: Store, cfg: DomainConfig) -> Path:
    """Store the plan (for the selection heatmap) and write its TOML under $DOMAINBENCH_HOME/domains."""
    from backend.config import save
    from backend.engine.runner import domain_id

    did = domain_id(cfg)
    store.put_domain(DomainRecord(domain_id=did, created_at=cfg.planner.created_at or _now(), **dict(cfg)))
    return save(cfg, home_dir().resolve() / "domains" / f"{did}.toml")


def sample_images() -> tuple[np.ndarray, list[str], np.ndarray]:
    from backend.data import load_sample

    ds = load_sample()
    assert ds.arrays is not None and ds.labels is not None
    return ds.arrays, ds.classes, ds.labels


def preview_image(index: int = 0, size: int = 112) -> np.ndarray:
    """An image of the bundled sample, enlarged (nearest neighbour) so corruptions are visible."""
    import cv2

    arrays, _, _ = sample_images()
    if not 0 <= index < len(arrays):
        raise UserInputError(f"sample image index {index} is out of range 0..{len(arrays) - 1}")
    return cv2.resize(arrays[index], (size, size), interpolation=cv2.INTER_NEAREST)


def gallery(image: np.ndarray, name: str, severities: list[int] | tuple[int, ...] = (1, 2, 3, 4, 5), seed: int = 0) -> list[np.ndarray]:
    """The image under one corruption at each severity (the engine's seeded kernels)."""
    import corruptions

    return [np.asarray(corruptions.corrupt(image, name, severity=s, seed=seed)) for s in severities]


def corruption_info(name: str) -> dict[str, str]:
    import corruptions

    try:
        spec = corruptions.get(name)
    except corruptions.CorruptionError as e:
        raise UserInputError(str(e)) from e
    return {"name": name, "family": str(getattr(spec, "family", "")), "description": str(getattr(spec, "description", ""))}


def known_models() -> list[str]:
    from backend.models import list_models

    return list_models()


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")

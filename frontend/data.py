"""Data access for the browser UI: store documents and summaries -> plain frames and dicts.

Nothing here imports Streamlit, so every function is testable against a temporary store.
Summaries are always derived from stored sufficient statistics through
``backend.engine.summary.build_summary``; for a run that is not finished the summary covers
the units stored so far and :class:`RunView` says so (``partial``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from backend.engine.export import CELL_FIELDS, cell_rows, to_csv, to_json
from backend.engine.status import run_status
from backend.errors import UserInputError
from backend.store import Store, home_dir

REPO_ROOT = Path(__file__).resolve().parent.parent
FINISHED = "done"
STATUSES = ("running", "done", "failed", "interrupted")
STABILITY_METRICS = {
    "divergence_radius": "DivergenceRadius R_dr",
    "cosine": "cosine robustness R_cs",
    "euclidean": "Euclidean robustness R_ed",
}
#: metrics the Compare page can plot: key in a model's row -> (label, lower is better)
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
    rows = []
    for r in store.list_runs():
        cfg = r.get("config", {})
        ds = r.get("dataset") or {}
        rows.append(
            {
                "run": r["run_id"],
                "status": run_status(r),
                "domain": short_text(r.get("domain", {}).get("domain", ""), 80),
                "models": ", ".join(cfg.get("models", [])),
                "dataset": ds.get("name", cfg.get("dataset", "")),
                "images": ds.get("size"),
                "created": r.get("created_at", ""),
            }
        )
    return pd.DataFrame(rows, columns=["run", "status", "domain", "models", "dataset", "images", "created"])


def expected_cells(run: dict[str, Any]) -> int:
    """(model, corruption, severity) cells a finished run has: the clean pass plus every severity."""
    models = run.get("config", {}).get("models", [])
    per_model = 1 + sum(len(c.get("severities", [])) for c in run.get("domain", {}).get("corruptions", []))
    return len(models) * per_model


@dataclass
class RunView:
    """A run document with its summary (or the reason there is none) and its progress."""

    run: dict[str, Any]
    summary: dict[str, Any] | None
    n_units: int
    done_cells: int
    total_cells: int
    error: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def run_id(self) -> str:
        return str(self.run["run_id"])

    @property
    def status(self) -> str:
        return run_status(self.run)

    @property
    def partial(self) -> bool:
        """True when the numbers cover only part of the planned work."""
        return self.status != FINISHED or self.done_cells < self.total_cells

    @property
    def models(self) -> list[str]:
        return list(self.run.get("config", {}).get("models", []))

    @property
    def default_baseline(self) -> str | None:
        cfg = self.run.get("config", {})
        return cfg.get("baseline") or (self.models[0] if self.models else None)


def load_run_view(store: Store, run_id: str, baseline: str | None = None) -> RunView:
    """The run and its summary against ``baseline`` (default: the run's own baseline).

    Raises :class:`UserInputError` for an unknown run; a run whose summary cannot be built yet
    (no units, or the baseline has no cell yet) comes back with ``summary=None`` and ``error``.
    """
    from backend.engine.summary import build_summary

    run = store.get_run(run_id)
    if run is None:
        raise UserInputError(f"no run {run_id!r} in {store.description}; pick one from the runs table")
    models = run.get("config", {}).get("models", [])
    if baseline is not None and baseline not in models:
        raise UserInputError(f"baseline {baseline!r} is not a model of run {run_id}; choose one of {models}")
    keys = store.keys("units", run_id=run_id)
    done_cells = len({(k[1], k[2], k[3]) for k in keys})
    view = RunView(run=run, summary=None, n_units=len(keys), done_cells=done_cells, total_cells=expected_cells(run))
    if not keys:
        view.error = (
            "no finished units yet: the run has just started"
            if view.status == "running"
            else f"the run stored no units (status {view.status}); resume it with `domainbench run --resume {run_id}`"
        )
        return view
    stored = store.get_summary(run_id) if view.status == FINISHED else None
    if stored is not None and baseline in (None, stored.get("baseline")) and "classification" in stored:
        view.summary = stored
        return view
    try:
        view.summary = build_summary(store, run_id, baseline)
    except ValueError as e:  # UserInputError / MetricInputError: partial data the metrics cannot use yet
        view.error = str(e)
    return view


def run_label(run: dict[str, Any]) -> str:
    return f"{short_text(run.get('domain', {}).get('domain', '?'), 40)} · {run['run_id'][-4:]}"


# --------------------------------------------------------------------------- summary frames


def summary_frame(summary: dict[str, Any]) -> pd.DataFrame:
    """The product paper's table with the safe-cell accuracy: one row per model.

    Accuracies are percentages; ``None`` (not applicable / undefined) stays missing, never 0.
    """
    safe = summary.get("safe_accuracy") or {}
    rows = []
    for row in summary["table"]:
        rows.append(
            {
                "model": row["model"],
                "baseline": bool(row.get("baseline")),
                "clean acc %": _pct(row.get("acc")),
                "corrupted acc %": _pct(row.get("mean_corrupted_acc")),
                "safe-cell acc %": _pct(safe.get(row["model"])),
                "mCE": row.get("mce"),
                "rCE": row.get("rce"),
                "mFR": row.get("mfr"),
                "corr(acc, LFP)": row.get("corr"),
            }
        )
    return pd.DataFrame(rows).astype({c: "float64" for c in rows[0] if c not in ("model", "baseline")}) if rows else pd.DataFrame()


def _pct(v: float | None) -> float | None:
    return None if v is None else 100.0 * float(v)


def cells_frame(summary: dict[str, Any]) -> pd.DataFrame:
    """Long form, one row per model × (corruption, severity) including the clean pass.

    Columns: model, corruption, severity, n, accuracy, lfp, flips, in_common, mean_threat, safe.
    """
    return pd.DataFrame(cell_rows(summary), columns=CELL_FIELDS)


def model_notes(summary: dict[str, Any]) -> dict[str, list[str]]:
    return {m["model"]: list(m.get("notes") or []) for m in summary["classification"]["models"] if m.get("notes")}


def confusion_of(summary: dict[str, Any], model: str, corruption: str, severity: int) -> np.ndarray | None:
    """The summed confusion matrix (rows true, columns predicted) of one cell; None if unlabelled."""
    for m in summary["classification"]["models"]:
        if m["model"] != model:
            continue
        for c in ([m["clean"]] if m.get("clean") else []) + list(m["cells"]):
            if c["corruption"] == corruption and c["severity"] == severity:
                return None if c.get("confusion") is None else np.asarray(c["confusion"], dtype=np.int64)
        raise UserInputError(f"model {model!r} has no cell ({corruption}, severity {severity}) in this run")
    raise UserInputError(f"model {model!r} is not in this run's summary")


def stability_frame(store: Store, run_id: str) -> pd.DataFrame:
    """Per-image stability values, long form: model, corruption, shard, index, and one column per metric."""
    rows: list[dict[str, Any]] = []
    for d in store.find("stability", run_id=run_id):
        radius = d.get("divergence_radius") or []
        idx = d.get("indices") or list(range(len(radius)))
        for i in range(len(radius)):
            rows.append(
                {
                    "model": d["model"],
                    "corruption": d["corruption"],
                    "shard": d["shard"],
                    "index": idx[i] if i < len(idx) else i,
                    **{k: (d.get(k) or [None] * len(radius))[i] for k in STABILITY_METRICS},
                }
            )
    frame = pd.DataFrame(rows, columns=["model", "corruption", "shard", "index", *STABILITY_METRICS])
    return frame.sort_values(["model", "corruption", "shard", "index"], kind="stable").reset_index(drop=True)


def export_csv(summary: dict[str, Any]) -> str:
    """The same file as ``domainbench export --format csv``: one row per model × cell."""
    return to_csv(summary)


def export_json(run: dict[str, Any], summary: dict[str, Any]) -> str:
    return to_json(run, summary)


# --------------------------------------------------------------------------- compare


def compare_frame(store: Store, run_ids: list[str], baseline: str | None = None) -> tuple[pd.DataFrame, list[str]]:
    """Per run × model: domain label and every metric of :data:`COMPARE_METRICS`.

    ``baseline`` (a model shared by the runs) recomputes each run's mCE/rCE/mFR against it;
    otherwise each run keeps its own baseline. Runs whose summary cannot be built are left out
    and named in the returned messages.
    """
    rows: list[dict[str, Any]] = []
    problems: list[str] = []
    for rid in run_ids:
        try:
            view = load_run_view(store, rid, baseline if baseline in _models_of(store, rid) else None)
        except UserInputError as e:
            problems.append(str(e))
            continue
        if view.summary is None:
            problems.append(f"{rid}: {view.error}")
            continue
        s = view.summary
        for row in s["table"]:
            rows.append(
                {
                    "run": rid,
                    "domain": run_label(view.run),
                    "domain_text": view.run.get("domain", {}).get("domain", ""),
                    "status": view.status,
                    "partial": view.partial,
                    "baseline": s["baseline"],
                    "model": row["model"],
                    "acc": row.get("acc"),
                    "mean_corrupted_acc": row.get("mean_corrupted_acc"),
                    "safe_acc": (s.get("safe_accuracy") or {}).get(row["model"]),
                    "mce": row.get("mce"),
                    "rce": row.get("rce"),
                    "mfr": row.get("mfr"),
                    "corr": row.get("corr"),
                }
            )
    cols = ["run", "domain", "domain_text", "status", "partial", "baseline", "model", *COMPARE_METRICS]
    return pd.DataFrame(rows, columns=cols), problems


def _models_of(store: Store, run_id: str) -> list[str]:
    run = store.get_run(run_id)
    return list(run.get("config", {}).get("models", [])) if run else []


def shared_models(store: Store, run_ids: list[str]) -> list[str]:
    """Models evaluated in every one of the runs (candidates for a common baseline)."""
    sets = [set(_models_of(store, r)) for r in run_ids]
    if not sets:
        return []
    first = _models_of(store, run_ids[0])
    return [m for m in first if all(m in s for s in sets)]


# --------------------------------------------------------------------------- domains & planning


def selection_frequencies(
    store: Store, extra: dict[str, Any] | None = None, names: list[str] | None = None
) -> pd.DataFrame:
    """Corruption × domain selection frequencies (the product paper's Figure 2).

    Columns are stored domains that carry planner frequencies (plus ``extra``, a DomainConfig
    dump, first); rows are catalogue corruptions (``names``, default: every name seen).
    A chosen corruption without a recorded frequency counts as 1.
    """
    docs = ([extra] if extra else []) + sorted(store.find("domains"), key=lambda d: d.get("created_at", ""), reverse=True)
    columns: dict[str, dict[str, float]] = {}
    seen: set[str] = set()
    for d in docs:
        freq = dict((d.get("planner") or {}).get("frequencies") or {})
        for c in d.get("corruptions", []):
            freq.setdefault(c["name"], 1.0)
        if not freq:
            continue
        label = short_text(d.get("domain", "?"), 32)
        key = json.dumps(sorted(freq.items()))
        if (label, key) in seen:  # the same plan stored twice (e.g. planned then run)
            continue
        seen.add((label, key))
        while label in columns:
            label += "′"
        columns[label] = freq
    rows = names or sorted({n for f in columns.values() for n in f})
    return pd.DataFrame({col: [float(f.get(n, 0.0)) for n in rows] for col, f in columns.items()}, index=rows)


def plan_domain(text: str, provider: str = "offline", samples: int = 10) -> Any:
    """Plan a domain (the planner's DomainConfig); errors are UserInputError/PlannerError."""
    from backend.planner import plan

    return plan(text, provider=provider, samples=samples)


def save_domain(store: Store, cfg: Any) -> Path:
    """Store the plan (for the selection heatmap) and write its TOML under $DOMAINBENCH_HOME/domains."""
    from backend.config import save
    from backend.engine.runner import domain_id

    did = domain_id(cfg)
    store.put_domain({"domain_id": did, "created_at": cfg.planner.created_at or _now(), **cfg.model_dump(mode="json")})
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


# --------------------------------------------------------------------------- launching runs


@dataclass
class Launch:
    """A background ``domainbench run`` started from the UI."""

    pid: int
    log_path: Path
    config_path: Path
    domain: str
    started_at: str
    command: list[str]
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False, compare=False)

    def returncode(self) -> int | None:
        """None while running; reaps the child so no zombie is left behind."""
        return None if self.process is None else self.process.poll()

    def log_tail(self, lines: int = 20) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def launch_command(
    config_path: Path, models: list[str], dataset: str, limit: int | None, baseline: str | None = None,
    device: str | None = None, stability: bool = True, threat: bool = True, run_id: str | None = None,
) -> list[str]:
    if not models:
        raise UserInputError("choose at least one model to evaluate")
    if not dataset.strip():
        raise UserInputError("the dataset is empty; use `sample` or a path to an image folder / CSV manifest")
    if limit is not None and limit < 1:
        raise UserInputError(f"the image limit must be a positive number, got {limit}")
    if baseline and baseline not in models:
        raise UserInputError(f"baseline {baseline!r} is not one of the chosen models {models}")
    cmd = [sys.executable, "-m", "backend.cli", "--quiet", "run", str(config_path), "--models", ",".join(models),
           "--dataset", dataset.strip()]
    if limit is not None:
        cmd += ["--limit", str(int(limit))]
    if baseline:
        cmd += ["--baseline", baseline]
    if device and device != "auto":
        cmd += ["--device", device]
    if not stability:
        cmd.append("--no-stability")
    if not threat:
        cmd.append("--no-threat")
    if run_id:
        cmd += ["--run-id", run_id]
    return cmd


def launch_run(cfg: Any, command: list[str], config_path: Path) -> Launch:
    """Start the run as a detached background process logging to $DOMAINBENCH_HOME/logs."""
    home = home_dir().resolve()
    logs = home / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S-%f")
    log_path = logs / f"run-{stamp}.log"
    env = {**os.environ, "DOMAINBENCH_HOME": str(home), "NO_ALBUMENTATIONS_UPDATE": "1"}
    started = _now()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            command, cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,  # a UI restart must not kill the run
        )
    # reap the child when it ends, even if no page ever asks again (no zombie processes)
    threading.Thread(target=proc.wait, name=f"reap-{proc.pid}", daemon=True).start()
    return Launch(pid=proc.pid, log_path=log_path, config_path=config_path, domain=cfg.domain,
                  started_at=started, command=command, process=proc)


def launched_run(store: Store, launch: Launch) -> dict[str, Any] | None:
    """The run document the launched process created, once it exists."""
    run_id = launch.command[launch.command.index("--run-id") + 1] if "--run-id" in launch.command else None
    if run_id:
        return store.get_run(run_id)
    for r in store.list_runs():
        if r.get("domain", {}).get("domain") == launch.domain and r.get("created_at", "") >= launch.started_at:
            return r
    return None


def run_fingerprint(store: Store, run_id: str) -> tuple[Any, ...]:
    """Changes whenever the run's status or any of its stored results change (a cache key)."""
    run = store.get_run(run_id) or {}
    return (
        run.get("status"),
        run.get("finished_at"),
        len(store.keys("units", run_id=run_id)),
        len(store.keys("threat", run_id=run_id)),
        len(store.keys("stability", run_id=run_id)),
    )

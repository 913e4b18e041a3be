"""A run's report: read the stored one, or rebuild it from the stored records.

Rebuilding is cheap (sums of confusion matrices), so a report against another baseline, or of
a run still in progress, is built on demand and never stored over the run's own report.
"""

from __future__ import annotations

from domainbench import __version__
from domainbench.errors import UserInputError
from domainbench.metrics.run_report import build_report as _build
from domainbench.metrics.run_report import rebaseline
from domainbench.records.report import RunReport
from domainbench.store import Store


def build_report(store: Store, run_id: str, baseline: str | None = None) -> RunReport:
    run = store.get_run(run_id)
    if run is None:
        raise UserInputError(f"no run {run_id!r} in {store.description}; see `domainbench ls`")
    if run.kind in ("vqa", "retrieval"):  # engine.task_kind: its results are on the run record, not in units
        raise UserInputError(f"run {run_id} is a {run.kind} run: read it with `domainbench show {run_id}` or "
                             f"`domainbench export {run_id}`")
    models = run.config.models
    baseline = baseline or run.config.baseline_model
    if baseline not in models:
        raise UserInputError(f"baseline {baseline!r} is not a model of run {run_id}; choose one of {models}")
    units = store.units(run_id)
    if not units:
        raise UserInputError(f"run {run_id} has no finished units yet; resume it with `domainbench run --resume {run_id}`")
    return _build(run, units, store.threat(run_id), store.stability(run_id),
                  baseline=baseline, version=__version__, fmr=store.fmr(run_id))


def load_report(store: Store, run_id: str, baseline: str | None = None) -> RunReport:
    """The stored report of a finished run (re-based from its cells for another baseline), else a fresh one."""
    stored = store.get_report(run_id)
    if stored is None:
        return build_report(store, run_id, baseline)
    if baseline in (None, stored.baseline):
        return stored
    if baseline not in stored.model_names:
        raise UserInputError(f"baseline {baseline!r} is not a model of run {run_id}; choose one of {stored.model_names}")
    return rebaseline(stored, baseline)

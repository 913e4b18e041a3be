"""VQA and retrieval runs (issue 38): a task run kind per task, stored so `ls`, `show` and `export` read it.

A task run evaluates a task manifest (``RunConfig.dataset``) under every cell of the plan with the task
library (``engine.task_eval.evaluate_task``), in one pass and in memory, and only then stores it: every
refusal (a bad manifest row, a model that cannot do the task) comes before anything is written, and a run
that fails mid-way leaves nothing behind. The results ride on the run record (``RunRecord.kind`` names the
task, ``RunRecord.kind_settings`` holds the manifest's fingerprint, the export rows, the paired tests and the
prediction rows), so stores written before tasks read unchanged and no store backend needs a new collection.

What is not here yet: resuming a task run cell by cell (the engine's ``resume`` is refused for it with one
line), the worker queue and the Ray executor.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from domainbench.records.config import DomainConfig, RunConfig
from domainbench.engine.kinds import KindCapabilities, RunSession, register_kind
from domainbench.errors import UserInputError
from domainbench.store import Store
from domainbench.store.records import DatasetInfo, RunRecord

#: the task names a run kind is registered under (``RunConfig.task`` other than classification)
TASK_KINDS: tuple[str, ...] = ("vqa", "retrieval")


def _json_safe(value: Any) -> Any:
    """NaN and numpy scalars out: the record is JSON in both stores (a number that does not apply is None)."""
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


@dataclass(frozen=True)
class TaskRunResult:
    """A stored task run's results as they are read back (``load_task_run``)."""

    run: RunRecord
    task: str
    rows: list[dict[str, Any]]
    paired: list[dict[str, Any]]
    predictions: list[dict[str, Any]]

    @property
    def columns(self) -> tuple[str, ...]:
        from domainbench.metrics.task_report import RETRIEVAL_COLUMNS, VQA_COLUMNS

        return VQA_COLUMNS if self.task == "vqa" else RETRIEVAL_COLUMNS

    @property
    def metrics(self) -> tuple[str, ...]:
        from domainbench.metrics.task_report import RETRIEVAL_METRICS, VQA_METRICS

        return VQA_METRICS if self.task == "vqa" else RETRIEVAL_METRICS


def is_task_run(run: RunRecord | None) -> bool:
    return run is not None and run.kind in TASK_KINDS


def load_task_run(store: Store, run_id: str) -> TaskRunResult:
    from domainbench.engine.lifecycle import stored_run

    run = stored_run(store, run_id)
    if not is_task_run(run):
        raise UserInputError(f"run {run_id} is not a VQA or retrieval run; read it with `domainbench show {run_id}`")
    ks = run.kind_settings or {}
    if run.status != "done" or "rows" not in ks:
        raise UserInputError(f"run {run_id} is {run.status} and has no results; start it again")
    return TaskRunResult(run, str(run.kind), list(ks["rows"]), list(ks.get("paired", [])),
                         list(ks.get("predictions", [])))


def check_task_options(domain: DomainConfig, cfg: RunConfig, executor: str = "local") -> None:
    """What a task run cannot honour yet, refused in one line before anything is opened."""
    task = cfg.task
    if cfg.max_new_tokens != 16 and task != "vqa":
        raise UserInputError(f"--max-new-tokens bounds VQA answers; leave it out of a {task} run")
    if executor != "local":
        raise UserInputError(f"--executor {executor}: {task} runs execute on --executor local only; leave it out")
    given = [flag for flag, on in (("--adaptive", cfg.adaptive), ("--breaking-point", cfg.breaking_point),
                                   ("--shift / [[shift]]", bool(domain.shift))) if on]
    if given:
        raise UserInputError(f"{given[0]}: {task} runs evaluate every image of every corruption cell and do not "
                             f"support it yet; leave it out")


def start_task_run(store: Store, domain: DomainConfig, cfg: RunConfig, run_id: str | None = None) -> str:
    """Evaluate ``cfg.task`` on the manifest ``cfg.dataset`` under every cell of ``domain``, then store it.

    Returns the run id. Nothing is stored when any input is refused or the evaluation fails."""
    import os
    import platform

    from domainbench.engine.lifecycle import check_new_run_id, create_run, now
    from domainbench.engine.task_eval import check_task, evaluate_task
    from domainbench.models import resolve_device

    task = check_task(cfg.task)
    check_new_run_id(store, run_id)
    if cfg.dataset == "sample":
        raise UserInputError(f"--task {task} needs a {task} manifest as --dataset (.jsonl or .csv; see docs/tasks.md); "
                             "domainbench.data.task_samples.write_sample_manifests(FOLDER) writes both from the bundled sample")
    cfg = cfg.model_copy(update={"dataset": os.path.abspath(os.path.expanduser(cfg.dataset))}) \
        if os.path.exists(os.path.expanduser(cfg.dataset)) else cfg
    domain.check_catalogue()
    device = str(resolve_device(cfg.device))
    result = evaluate_task(domain, task, cfg.dataset, cfg.models, limit=cfg.limit, seed=cfg.seed,
                           batch_size=cfg.batch_size, device=device, image_size=cfg.image_size,
                           max_new_tokens=cfg.max_new_tokens)
    fp = result.fingerprint
    info = DatasetInfo(name=os.path.basename(cfg.dataset), size=fp.images.files, classes=[], labelled=False,
                       path=cfg.dataset, fingerprint=fp.images)
    settings = _json_safe({"manifest": fp.model_dump(mode="json"), "rows": result.rows, "paired": result.paired,
                           "predictions": result.predictions})
    environment = {"device": device, "executor": "local", "host": platform.node()}
    rid = create_run(store, domain, cfg, run_id, info, environment, kind=task, kind_settings=settings)
    store.update_run(rid, status="done", finished_at=now())
    return rid


class TaskKind:
    """The registry's entry for a task (``engine.kinds``): what finds and refuses a stored task run.

    A task run is started by :func:`start_task_run` (not ``Engine.start``: the engine opens a classification
    dataset, a task reads a manifest); the engine reaches this kind only on a resume or a worker's claim,
    which it refuses in one line before anything changes."""

    capabilities = KindCapabilities(executors=("local",))

    def __init__(self, name: str) -> None:
        self.name = name

    def claims(self, run: RunRecord) -> bool:
        return False  # found by RunRecord.kind

    def settings_of(self, run: RunRecord) -> Any:
        return run.kind_settings

    def record_fields(self, session: RunSession) -> dict[str, Any]:
        return {"kind": self.name, "kind_settings": session.settings}

    def _refuse(self, run_id: str) -> UserInputError:
        return UserInputError(f"run {run_id} is a {self.name} run, evaluated in one pass: it cannot be resumed yet; "
                              f"start it again with `domainbench run PLAN --task {self.name} ...`")

    def check(self, session: RunSession) -> None:
        raise UserInputError(f"{self.name} runs start with `domainbench run PLAN --task {self.name} --dataset MANIFEST`")

    def check_resume(self, session: RunSession) -> dict[str, Any]:
        raise self._refuse(session.run.run_id if session.run is not None else "")

    def open(self, session: RunSession) -> None:
        raise self._refuse(session.run_id)

    def dataset_info(self, session: RunSession, info: DatasetInfo) -> DatasetInfo:
        return info

    def part(self, executor: str) -> Any:
        raise UserInputError(f"{self.name} runs execute on --executor local only")

    def evaluate(self, session: RunSession) -> str:
        raise self._refuse(session.run_id)

    def report(self, store: Store, run_id: str) -> Any:
        raise UserInputError(f"run {run_id} is a {self.name} run: read it with `domainbench show {run_id}`")


for _task in TASK_KINDS:
    register_kind(TaskKind(_task))

__all__ = ["TASK_KINDS", "TaskKind", "check_task_options", "TaskRunResult", "is_task_run", "load_task_run", "start_task_run"]

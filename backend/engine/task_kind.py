"""VQA and retrieval runs (issue 38): a task run kind per task, stored unit by unit so they resume.

A task run evaluates a task manifest (``RunConfig.dataset``) under every cell of the plan with the task library
(``engine.task_eval``). Every refusal (a bad manifest row, a model that cannot do the task) comes before anything
is written; then the run record is created and each (model, cell) is stored as a ``TaskUnitRecord`` as soon as it
is computed, so a killed run keeps its finished units and ``--resume`` (or a worker's claim of a queued run)
computes only the missing ones. When every unit is stored, the export rows and paired tests at 95 % go on the run
record (``RunRecord.kind_settings``, beside the manifest's fingerprint); any other confidence is recomputed from
the units' outcomes when the run is read. Runs stored before task units (every prediction on the run record)
read as they were.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from domainbench.records.config import DomainConfig, RunConfig
from domainbench.engine.kinds import RunSession, SelfRunKind, register_kind
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
    confidence: float = 0.95

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


def _ordered_units(store: Store, run: RunRecord) -> list[Any]:
    """The run's units in the order it computes them: cell by cell in plan order, models in the run's order."""
    from domainbench.engine.runner import cells_of

    cells = {(c.corruption, c.severity): i for i, c in enumerate(cells_of(run.domain))}
    models = {m: i for i, m in enumerate(run.config.models)}
    units = store.task_units(run.run_id)
    return sorted(units, key=lambda u: (cells.get((u.corruption, u.severity), len(cells)), models.get(u.model, 0)))


def load_task_run(store: Store, run_id: str, confidence: float = 0.95) -> TaskRunResult:
    """A finished task run's rows, paired tests and predictions; intervals at ``confidence`` (the stored 95 % ones,
    or recomputed from the stored units' outcomes at any other level)."""
    from domainbench.engine.lifecycle import stored_run

    run = stored_run(store, run_id)
    if not is_task_run(run):
        raise UserInputError(f"run {run_id} is not a VQA or retrieval run; read it with `domainbench show {run_id}`")
    ks = run.kind_settings or {}
    if run.status != "done" or "rows" not in ks:
        raise UserInputError(f"run {run_id} is {run.status} and has no results yet; resume it with "
                             f"`domainbench run --resume {run_id}`")
    if "predictions" in ks:  # stored before task units: everything rides on the record, at 95 %
        if confidence != 0.95:
            raise UserInputError(f"--confidence {confidence}: run {run_id} was stored before task units and keeps "
                                 "its intervals at 0.95 only; leave out --confidence")
        return TaskRunResult(run, str(run.kind), list(ks["rows"]), list(ks.get("paired", [])), list(ks["predictions"]))
    units = _ordered_units(store, run)
    rows, paired = list(ks["rows"]), list(ks.get("paired", []))
    if confidence != 0.95:
        from domainbench.engine.task_eval import task_rows

        rows, paired = task_rows(str(run.kind), units, confidence, seed=run.config.seed)
        rows, paired = _json_safe(rows), _json_safe(paired)
    return TaskRunResult(run, str(run.kind), rows, paired, [p for u in units for p in u.predictions], confidence)


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


def task_config(cfg: RunConfig) -> RunConfig:
    """The config as a task run stores it: a manifest given (not the sample), its path made absolute (a worker
    or a resume may start in another directory)."""
    import os

    from domainbench.engine.task_eval import check_task

    task = check_task(cfg.task)
    if cfg.dataset == "sample":
        raise UserInputError(f"--task {task} needs a {task} manifest as --dataset (.jsonl or .csv; see docs/tasks.md); "
                             "domainbench.data.task_samples.write_sample_manifests(FOLDER) writes both from the bundled sample")
    path = os.path.expanduser(cfg.dataset)
    return cfg.model_copy(update={"dataset": os.path.abspath(path)}) if os.path.exists(path) else cfg


def _prepare(domain: DomainConfig, cfg: RunConfig) -> Any:
    from domainbench.engine.task_eval import prepare_task

    domain.check_catalogue()
    return prepare_task(domain, cfg.task, cfg.dataset, cfg.models, limit=cfg.limit, seed=cfg.seed,
                        image_size=cfg.image_size, max_new_tokens=cfg.max_new_tokens)


def check_task_inputs(domain: DomainConfig, cfg: RunConfig) -> RunConfig:
    """Everything a worker would refuse of a queued task run, checked before it is queued; the config to store."""
    from domainbench.data.manifests import load_retrieval_manifest, load_vqa_manifest
    from domainbench.engine.task_eval import _open_questions
    from domainbench.records.model_backends import kind_of as model_kind
    from domainbench.models.vqa_answering import check_max_new_tokens, check_model_for_task

    check_task_options(domain, cfg)
    cfg = task_config(cfg)
    check_max_new_tokens(cfg.max_new_tokens)
    m = (load_vqa_manifest if cfg.task == "vqa" else load_retrieval_manifest)(cfg.dataset).subset(cfg.limit, cfg.seed)
    open_questions = _open_questions(m) if cfg.task == "vqa" else []
    for name in cfg.models:
        check_model_for_task(name, model_kind(name) == "generative", cfg.task, open_questions)
    return cfg


def _dataset_info(cfg: RunConfig, inputs: Any) -> DatasetInfo:
    import os

    fp = inputs.fingerprint
    return DatasetInfo(name=os.path.basename(cfg.dataset), size=fp.images.files, classes=[], labelled=False,
                       path=cfg.dataset, fingerprint=fp.images)


def _load_models(cfg: RunConfig) -> tuple[dict[str, Any], dict[str, Any]]:
    import platform

    from domainbench.models import create_model, resolve_device

    device = str(resolve_device(cfg.device))
    loaded = {name: create_model(name, device) for name in cfg.models}
    return loaded, {"device": device, "executor": "local", "host": platform.node()}


def start_task_run(store: Store, domain: DomainConfig, cfg: RunConfig, run_id: str | None = None) -> str:
    """Evaluate ``cfg.task`` on the manifest ``cfg.dataset`` under every cell of ``domain``, storing each unit as it
    finishes. Returns the run id. Nothing is stored when any input is refused or a model does not load."""
    from domainbench.engine.lifecycle import check_new_run_id, create_run

    cfg = task_config(cfg)
    check_new_run_id(store, run_id)
    inputs = _prepare(domain, cfg)
    loaded, environment = _load_models(cfg)
    settings = {"manifest": inputs.fingerprint.model_dump(mode="json")}
    rid = create_run(store, domain, cfg, run_id, _dataset_info(cfg, inputs), environment, kind=inputs.task,
                     kind_settings=settings)
    return _evaluate(store, rid, domain, cfg, inputs, loaded)


def resume_task_run(store: Store, run: RunRecord) -> tuple[str, int, int]:
    """Compute what a stored task run lacks (after an interruption, or a queued run's first start); (run id, units
    computed now, units already stored)."""
    from domainbench.engine.lifecycle import now, restart_run

    cfg = run.config
    if run.dataset is None:  # queued: checked when it was queued; the manifest is pinned now
        cfg = task_config(cfg)
    inputs = _prepare(run.domain, cfg)
    stored = (run.kind_settings or {}).get("manifest")
    if stored is not None and stored != inputs.fingerprint.model_dump(mode="json"):
        raise UserInputError(f"the manifest {cfg.dataset} or its images changed since run {run.run_id} started; its "
                             "stored answers would not match: restore them, or start a new run")
    if run.kind_settings and "predictions" in run.kind_settings:
        raise UserInputError(f"run {run.run_id} was stored whole before task runs stored units and is finished; "
                             "there is nothing to resume")
    loaded, environment = _load_models(cfg)
    fields: dict[str, Any] = {"resumed_at": now()}
    if run.dataset is None:
        fields = {"dataset": _dataset_info(cfg, inputs), "environment": environment, "config": cfg,
                  "kind_settings": {"manifest": inputs.fingerprint.model_dump(mode="json")}}
    before = len(store.task_units.keys(run_id=run.run_id))
    restart_run(store, run.run_id, **fields)
    rid = _evaluate(store, run.run_id, run.domain, cfg, inputs, loaded)
    return rid, len(inputs.cells) * len(loaded) - before, before


def _evaluate(store: Store, run_id: str, domain: DomainConfig, cfg: RunConfig, inputs: Any,
              loaded: dict[str, Any]) -> str:
    """Every (model, cell) not yet stored, each stored as it finishes; then the rows and paired tests; "done".
    A failure marks the run "failed" ("interrupted" for Ctrl-C) and keeps its stored units for ``--resume``."""
    from domainbench.engine.cancel import CancelWatch, RunCancelled
    from domainbench.engine.jobs import CLEAN
    from domainbench.engine.lifecycle import now
    from domainbench.engine.task_eval import cell_pixels, evaluate_cell, task_rows
    from domainbench.store.fenced_store import fenced_for_this_process
    from domainbench.store.records import TaskUnitRecord

    fenced = fenced_for_this_process(store, run_id)  # `rm --force` and a lost lease stop the writes
    watch = CancelWatch(store, run_id)
    try:
        done = store.task_units.keys(run_id=run_id)
        clean: dict[str, dict[str, list[Any]]] = {}
        for cell in inputs.cells:
            pixels = None
            for name, model in loaded.items():
                key = (run_id, name, cell.corruption, cell.severity)
                if key in done:
                    if cell.corruption == CLEAN:
                        unit = store.task_units.get(run_id=run_id, model=name, corruption=CLEAN, severity=0)
                        clean[name] = unit.raw  # type: ignore[union-attr]
                    continue
                watch.check()
                if pixels is None:  # a cell whose every model is stored is never corrupted again
                    pixels = cell_pixels(inputs, cell, cfg.seed)
                unit = evaluate_cell(inputs, name, model, cell, pixels, clean.get(name), batch_size=cfg.batch_size,
                                     max_new_tokens=cfg.max_new_tokens)
                fenced.task_units.put(TaskUnitRecord(run_id=run_id, model=name, corruption=cell.corruption,
                                                     severity=cell.severity, computed_at=now(), **_json_safe(unit)))
                if cell.corruption == CLEAN:
                    clean[name] = unit["raw"]
        run = store.get_run(run_id)
        assert run is not None
        rows, paired = task_rows(inputs.task, _ordered_units(store, run), seed=cfg.seed)
    except RunCancelled:
        raise  # the run stays "cancelled", its finished units kept
    except BaseException as e:
        store.update_run(run_id, status="interrupted" if isinstance(e, KeyboardInterrupt) else "failed",
                         error=f"{type(e).__name__}: {e}"[:500])
        raise
    settings = {"manifest": inputs.fingerprint.model_dump(mode="json"), **_json_safe({"rows": rows, "paired": paired})}
    fenced.update_run(run_id, status="done", finished_at=now(), kind_settings=settings)
    return run_id


class TaskKind(SelfRunKind):
    """The registry's entry for a task (``engine.kinds``): what finds and refuses a stored task run.

    A task run is started by :func:`start_task_run` (not ``Engine.start``: the engine opens a classification
    dataset, a task reads a manifest). A resume or a worker's claim reaches the kind through ``Engine.resume``,
    which hands the whole resume to :meth:`resume_run` after the executor is checked against ``capabilities``
    (local only: one line for ``--executor ray``)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.start_hint = f"domainbench run PLAN --task {name} --dataset MANIFEST"

    def resume_run(self, session: RunSession) -> str:
        """The engine's resume of a stored task run (its own inputs: a manifest, not a classification dataset)."""
        assert session.run is not None
        rid, computed, skipped = resume_task_run(session.store, session.run)
        session.stats.computed_units += computed
        session.stats.skipped_units += skipped
        return rid


for _task in TASK_KINDS:
    register_kind(TaskKind(_task))

__all__ = ["TASK_KINDS", "TaskKind", "TaskRunResult", "check_task_inputs", "check_task_options", "is_task_run",
           "load_task_run", "resume_task_run", "start_task_run", "task_config"]

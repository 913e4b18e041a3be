"""The Python API: plan a domain, run models on it, read and compare stored runs.

``import domainbench`` exposes these functions (``domainbench.run(...)``); this module is imported on
first use, and each function imports the engine, the models or the planner only when it needs them,
so ``import domainbench`` stays light. The functions are built on the code the ``domainbench``
command runs (``domainbench run`` calls :func:`run_plan`), so a run started here stores and reports
exactly what the same plan, settings and seed store and report from the command line.

Bad input raises :class:`domainbench.errors.UserInputError` with the message the CLI prints after
``error:``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from domainbench.errors import UserInputError

if TYPE_CHECKING:
    import pandas as pd

    from domainbench.records.config import DomainConfig, RunConfig
    from domainbench.query.gate import CheckResult
    from domainbench.engine.executor_options import ExecutorOptions
    from domainbench.engine.clip_kind import ClipRunResult
    from domainbench.engine.tasks import RunEvents, RunStats
    from domainbench.tuning.train import FinetuneResult
    from domainbench.metrics.comparison import Comparison
    from domainbench.metrics.confidence import RunIntervals
    from domainbench.metrics.registry import Metric
    from domainbench.records.report import RunReport
    from domainbench.store import Store
    from domainbench.store.records import RunRecord

__all__ = ["Run", "build_run_config", "check", "compare", "executor_options", "list_corruptions", "list_models", "list_runs",
           "load_plan", "load_run", "plan", "resume", "run", "run_clips", "run_plan", "summary_metrics"]

def _store(store: Store | str | Path | None) -> Store:
    """An open store as it is; a ``mongodb://`` or ``sqlite:///`` URI; a folder holding the embedded SQLite
    store (like ``$DOMAINBENCH_HOME``); or, for None, the store the CLI opens (``$DOMAINBENCH_MONGO_URI``,
    else ``$DOMAINBENCH_HOME``)."""
    from domainbench.store import open_store

    if store is None:
        from domainbench.runtime.settings import Settings

        settings = Settings.from_env()
        return open_store(settings.store_uri, settings.home)
    if not isinstance(store, (str, os.PathLike)):  # a store, or a store seen through a worker's lease fence
        return store
    text = os.fspath(store)
    if text.startswith(("mongodb://", "mongodb+srv://", "sqlite:///")):
        return open_store(text)
    return open_store(None, Path(text))


# --------------------------------------------------------------------------- runs


@dataclass
class Run:
    """A stored run: its id and store, and what it reports.

    ``report`` is the run's :class:`~domainbench.records.report.RunReport` against ``baseline`` (the run's own
    baseline by default), as ``domainbench show`` reads it; ``stats`` says what the call that returned
    this handle computed (``None`` for a run only loaded).
    """

    id: str
    store: Store = field(repr=False)
    baseline: str | None = None
    stats: RunStats | None = field(default=None, repr=False)
    seconds: float | None = None

    @property
    def record(self) -> RunRecord:
        """The stored run record (status, domain, run config, dataset, timings), read now."""
        from domainbench import query

        return query.get_run(self.store, self.id)

    @property
    def status(self) -> str:
        """``done``, ``running``, ``queued``, ``interrupted``, ``failed`` or ``cancelled``."""
        from domainbench.store.status import run_status

        return run_status(self.record)

    @property
    def clips(self) -> ClipRunResult:
        """A clip run's results (``rows``: one per model × cell, ``paired`` verdicts, the sampled frames of each of
        its ``clips``, its ``units``), read now; ``UserInputError`` for another kind of run, or one not done."""
        from domainbench.engine.clip_kind import load_clip_run

        return load_clip_run(self.store, self.id)

    @cached_property
    def report(self) -> RunReport:
        """The run's report (per model and cell, stability, threat, FMR), as ``show`` and ``export`` read it."""
        from domainbench import query

        return query.report(self.store, self.id, self.baseline)

    def with_baseline(self, baseline: str) -> Run:
        """The same run reported against another of its models (mCE, rCE and mFR change; nothing is recomputed)."""
        return Run(self.id, self.store, baseline)

    def intervals(self, confidence: float = 0.95) -> RunIntervals:
        """Every interval ``show`` prints beside a value, at ``confidence``."""
        from domainbench import query
        from domainbench.stats.intervals import check_confidence

        check_confidence(confidence)
        return query.intervals(self.store, self.report, confidence)

    def summary(self, confidence: float | None = 0.95) -> pd.DataFrame:
        """One row per model: the summary ``domainbench show`` prints, as numbers.

        Columns: ``model``, ``baseline`` (True for the baseline model), then each metric of the summary
        table by its registry name (``summary_metrics()``: fractions from 0 to 1, ratios to the baseline),
        each followed by ``NAME_ci_low`` / ``NAME_ci_high`` where the statistics give it an interval
        (``confidence=None`` leaves the intervals out), and ``group``: the model's tied group letters (models
        sharing a letter are not significantly different by the verdicts' test; None with one model or no labels).
        A value that does not apply is NaN.
        """
        import pandas as pd

        from domainbench.metrics.registry import summary_rows

        ivs = self.intervals(confidence) if confidence is not None else None
        # the metrics the statistics give an interval: those the registry declares one for
        with_interval = {m.name for m in summary_metrics() if m.interval} if ivs is not None else set()
        rows = []
        for row in summary_rows(self.report):
            iv = ivs.model(row.model) if ivs is not None else None
            values: dict[str, Any] = {"model": row.model, "baseline": row.baseline}
            for m in summary_metrics():
                values[m.name] = m.read(row)
                if m.name in with_interval:
                    bounds = getattr(iv, m.name, None)
                    values[f"{m.name}_ci_low"], values[f"{m.name}_ci_high"] = bounds if bounds is not None else (None, None)
            rows.append(values)
        from domainbench import query

        report = self.report
        multi = len(report.model_names) > 1 and report.models[0].labeled
        letters = query.groups(self.store, report, confidence or 0.95).letters if multi else {}
        frame = pd.DataFrame(rows)
        # None (a metric that does not apply) becomes NaN, so every metric column is numeric
        frame = frame.astype({c: float for c in frame.columns if c not in ("model", "baseline")})
        frame["group"] = [letters.get(m) for m in frame["model"]]
        return frame

    def to_pandas(self, confidence: float = 0.95) -> pd.DataFrame:
        """One row per model × cell (clean pass first): the rows and columns of ``domainbench export --format csv``.

        Same values as the CSV (fractions 0 to 1, ratios to the baseline, the ``*_ci_low``/``*_ci_high``
        columns at ``confidence``); an empty CSV field is NaN here.
        """
        import pandas as pd

        from domainbench import query
        from domainbench.stats.intervals import check_confidence

        check_confidence(confidence)
        fields, rows = query.export_rows(self.report, self.store, confidence)
        nan = float("nan")
        return pd.DataFrame([{k: nan if v is None else v for k, v in row.items()} for row in rows], columns=fields)

    def to_csv(self, confidence: float = 0.95) -> str:
        """``domainbench export --format csv``, as text."""
        from domainbench import query

        return query.export_csv(self.report, self.store, confidence)

    def to_json(self, confidence: float = 0.95) -> str:
        """``domainbench export --format json``, as text (the run, its report, intervals, pairs and verdicts)."""
        from domainbench import query

        return query.export_json(self.record, self.report, self.store, confidence)


def summary_metrics() -> list[Metric]:
    """The metrics of the per-model summary table (``show``, ``Run.summary``), in the registry's order."""
    from domainbench.metrics.registry import summary_metrics as of_registry

    return of_registry()


def load_run(run_id: str, *, baseline: str | None = None, store: Store | str | Path | None = None) -> Run:
    """A stored run by its id (``domainbench ls`` lists them); an unknown id raises ``UserInputError``."""
    from domainbench import query

    db = _store(store)
    query.get_run(db, run_id)  # refuses an unknown id now, naming the store
    return Run(run_id, db, baseline)


def list_runs(*, store: Store | str | Path | None = None) -> list[str]:
    """The stored runs' ids, newest first (``domainbench ls``)."""
    from domainbench import query

    return [r.run_id for r in query.list_runs(_store(store))]


def compare(runs: Sequence[str | Run] | str | Run, *, models: Sequence[str] | None = None, confidence: float = 0.95,
            store: Store | str | Path | None = None) -> Comparison:
    """Which model is better on these images (``domainbench compare``): one plain verdict per pair (``.verdicts``)
    by one rule, a paired test of balanced accuracy Holm-adjusted over the pairs (docs/reading-the-numbers.md), and
    per pair and cell that test, top-1's exact McNemar test and the difference's interval (``.pairs``). The runs
    must be on the same images (dataset, indices, seed)."""
    from domainbench import query
    from domainbench.stats.intervals import check_confidence

    check_confidence(confidence)
    runs = [runs] if isinstance(runs, (str, Run)) else list(runs)
    if store is None and runs and isinstance(runs[0], Run):
        db = runs[0].store
    else:
        db = _store(store)
    ids = [r.id if isinstance(r, Run) else r for r in runs]
    return query.comparison(db, ids, list(models) if models is not None else None, confidence)


def check(run: str | Run, requirements: Sequence[str] | str = (), *, against: str | Run | None = None,
          models: Sequence[str] | None = None, confident: bool = False, confidence: float = 0.95,
          baseline: str | None = None, store: Store | str | Path | None = None) -> CheckResult:
    """A gate on a stored run (``domainbench check``): ``requirements`` such as ``"mce <= 1.0"``,
    ``"label_flip_probability@motion_blur:3 <= 0.10"`` or ``"model=embedded:fmnist-plain clean_accuracy >= 0.7"``
    (docs/ci-gate.md), each on every model (or ``models``) unless it names one; ``confident`` checks the interval's
    worse end; ``against`` a baseline run of the same plan and images also fails a model whose balanced accuracy
    under corruption is significantly lower there. ``.passed`` is the verdict; ``.outcomes`` and ``.regression``
    say which check failed and by how much. Bad input raises ``UserInputError``."""
    from domainbench import query

    if store is None and isinstance(run, Run):
        db = run.store
    else:
        db = _store(store)
    rid = run.id if isinstance(run, Run) else run
    base = against.id if isinstance(against, Run) else against
    reqs = [requirements] if isinstance(requirements, str) else list(requirements)
    return query.check(db, rid, reqs, against=base, models=list(models) if models is not None else None,
                       confident=confident, confidence=confidence, baseline=baseline)


# --------------------------------------------------------------------------- names


def list_models(pattern: str = "*") -> list[str]:
    """Known model names matching a shell wildcard, timm style: ``list_models("open_clip:ViT-L*")``.

    Any open_clip tag or Hugging Face CLIP/SigLIP repository also works with its prefix; these are the
    names each backend lists (``domainbench models``).
    """
    from domainbench.models import list_models as _list

    return _list(pattern)


def list_corruptions(pattern: str = "*") -> list[str]:
    """Registered corruption names matching a shell wildcard, sorted: ``list_corruptions("*blur*")``."""
    from domainbench import corruptions

    return corruptions.names(pattern)


# --------------------------------------------------------------------------- planning


def plan(text: str, *, provider: str = "auto", samples: int = 10, dataset: str | Path | None = None,
         classes: Sequence[str] | None = None, output: str | Path | None = None) -> DomainConfig:
    """The corruptions a domain described in plain words produces, with severities and reasons (``domainbench plan``).

    ``provider``: ``offline`` (the rule-based planner, no network), ``openai`` (an OpenAI-compatible
    endpoint, ``DOMAINBENCH_LLM_*``) or ``auto`` (openai when one is configured). With ``dataset``,
    corruptions that leave its images unchanged are left out, with a note in ``plan.planner.violations``.
    ``output`` also writes the plan as TOML (what ``plan -o`` writes). Nothing is written to the store:
    a run stores its domain.
    """
    from domainbench.records.config import save
    from domainbench.planner import plan as make_plan
    from domainbench.runtime.settings import Settings

    if output is not None:
        from domainbench.runtime.safe_output import output_file

        output_file(Path(output))
    probe = None
    if dataset is not None:
        from domainbench.planner.image_fit import probe_images

        probe = probe_images(str(dataset), list(classes) if classes else None)
    cfg = make_plan(text, provider=provider, samples=samples, llm=Settings.from_env().llm_settings())
    if probe is not None:
        from domainbench.planner.image_fit import fit_to_images

        cfg = fit_to_images(cfg, *probe)
    if output is not None:
        save(cfg, Path(output))
    return cfg


def load_plan(path: str | Path, *, shifts: Mapping[str, str | Path] | Sequence[str] | None = None,
              notes: list[str] | None = None) -> DomainConfig:
    """A domain config TOML (what ``plan`` writes), with your own shifted image folders added as ``shift:NAME`` cells.

    ``shifts``: ``{"night": "photos/night"}`` or ``["night=photos/night"]`` (``--shift``); a relative path
    in the plan file is relative to it. Notes about the file (an alias evaluated once) go to ``notes``.
    """
    from domainbench.records.config import load_domain

    path = Path(path)
    return _with_shifts(load_domain(path, notes=notes), shifts, path.parent)


def _with_shifts(domain: DomainConfig, shifts: Mapping[str, str | Path] | Sequence[str] | None, plan_dir: Path) -> DomainConfig:
    """The domain with each shift folder added as a ``shift:NAME`` cell (relative paths: to ``plan_dir``)."""
    from domainbench.engine.shift_cells import parse_shift_option, with_shifts

    options = [f"{k}={v}" for k, v in shifts.items()] if isinstance(shifts, Mapping) else list(shifts or [])
    domain = with_shifts(domain, [parse_shift_option(o) for o in options], plan_dir=plan_dir)
    domain.check_catalogue()  # a shift named like a corruption
    return domain


# --------------------------------------------------------------------------- running


def build_run_config(run_config: RunConfig | str | Path | Mapping[str, Any] | None = None, *,
                     notes: list[str] | None = None, **settings: Any) -> RunConfig:
    """The run's settings: a ``RunConfig``, a run config TOML (``--run-config``) or a mapping, then every
    setting given as a keyword on top (as the CLI's flags are: ``models=[...]``, ``limit=200``, ``seed=0``,
    ``device="cuda"``, ``batch_size``, ``templates``, ``model_args={"hf-vlm:…": {"mode": "generate"}}``, ...;
    ``None`` means "not given"). A deprecated field of the TOML adds a warning to ``notes``."""
    from domainbench.records.config import RunConfig

    given = {k: v for k, v in settings.items() if v is not None}
    if isinstance(run_config, RunConfig):
        return RunConfig.from_sources(None, run_config.model_dump() | given) if given else run_config
    if isinstance(run_config, Mapping):
        return RunConfig.from_sources(None, {**run_config, **given})
    return RunConfig.from_sources(run_config, given, notes=notes)


def executor_options(executor: str | ExecutorOptions | None = None, **options: Any) -> ExecutorOptions:
    """Where a run executes: ``local`` (this process; default ``$DOMAINBENCH_EXECUTOR`` or local) or ``ray``
    (``address``, ``actors``, ``gpus_per_actor``, ``cpus_per_task``, ``models_per_actor``, ``modules``)."""
    from pydantic import ValidationError

    from domainbench.engine.executor_options import ExecutorOptions
    from domainbench.errors import first_validation_error

    if isinstance(executor, ExecutorOptions):
        return executor
    if executor is None:
        from domainbench.runtime.settings import Settings

        settings = Settings.from_env()
        executor = settings.executor
        options.setdefault("address", settings.ray_address)
    options["address"] = options.get("address") or None  # an empty DOMAINBENCH_RAY_ADDRESS means "not set"
    if executor not in ("local", "ray"):
        raise UserInputError(f"--executor {executor!r} is not known; use local or ray")
    try:
        return ExecutorOptions(kind=executor, **{k: v for k, v in options.items() if v is not None})  # type: ignore[arg-type]
    except ValidationError as e:
        loc, msg = first_validation_error(e)
        raise UserInputError(f"--{loc.replace('_', '-')}: {msg}") from None


def run_plan(store: Store, start: Callable[[Any], str], *, executor: ExecutorOptions | None = None,
             events: RunEvents | None = None) -> Run:
    """Evaluate one run on ``store`` with the engine for ``executor``: ``start(engine)`` starts or resumes it
    and returns its id. The one path ``run``, ``resume`` and ``domainbench run`` share."""
    os.environ.setdefault("NO_ALBUMENTATIONS_UPDATE", "1")  # albumentations phones home on import otherwise
    from domainbench.engine.executors import make_engine

    engine = make_engine(store, events, executor)
    t0 = time.perf_counter()
    run_id = start(engine)
    return Run(run_id, store, stats=engine.stats, seconds=time.perf_counter() - t0)


def run(domain: DomainConfig | str | Path, models: Sequence[str] | str | None = None, *,
        dataset: str | Path | None = None, baseline: str | None = None, limit: int | None = None,
        seed: int | None = None, device: str | None = None, run_config: RunConfig | str | Path | Mapping[str, Any] | None = None,
        shifts: Mapping[str, str | Path] | Sequence[str] | None = None, run_id: str | None = None,
        executor: str | ExecutorOptions | None = "local", store: Store | str | Path | None = None,
        events: RunEvents | None = None, frames: int | None = None, fps: float | None = None,
        max_frames: int | None = None, **settings: Any) -> Run:
    """Evaluate ``models`` zero-shot on ``dataset`` under the domain's corruptions and store the run
    (``domainbench run``). Returns the finished run: ``.report``, ``.summary()``, ``.to_pandas()``.

    ``domain``: a ``DomainConfig`` (from :func:`plan`) or a domain config TOML. ``models``: model names
    (``list_models()``; default: the two embedded models); ``dataset``: ``sample`` (default), a folder of
    class folders, a CSV manifest or an image folder (with ``classes=[...]``). Any other run setting is a
    keyword (``classes``, ``batch_size``, ``workers``, ``templates``, ``stability``, ``threat``, ``adaptive``,
    ``corrupt_on``, ``skip_unreadable``, ...; the fields of ``domainbench.records.config.RunConfig``) or comes from
    ``run_config``; ``model_args={"hf-vlm:…": {"mode": "generate"}}`` gives models their options (each
    checked against its backend's schema, ``domainbench models --backends``). ``store``: the store to write (default: the CLI's, ``$DOMAINBENCH_HOME``); ``events``:
    progress callbacks (``domainbench.engine.tasks.RunEvents``; default silent).

    A clip dataset (class folders of videos or of frame folders, or a clip manifest; docs/video.md) makes a clip
    run: ``frames`` frames sampled evenly from each clip (default 8), or ``fps`` with at most ``max_frames``; its
    typed results are ``Run.clips`` (rows, paired verdicts, sampled frames, units).
    """
    from domainbench.records.config import DomainConfig

    # a plan's relative shift paths are relative to its file; those given with a DomainConfig to the working directory
    domain = _with_shifts(domain, shifts, Path.cwd()) if isinstance(domain, DomainConfig) else load_plan(domain, shifts=shifts)
    names = [m.strip() for m in models.split(",")] if isinstance(models, str) else (list(models) if models else None)
    cfg = build_run_config(run_config, models=names, dataset=str(dataset) if dataset is not None else None,
                           baseline=baseline, limit=limit, seed=seed, device=device, **settings)
    options = executor_options(executor)
    if cfg.task != "classification":  # ``task="vqa"`` / ``"retrieval"``: dataset is the task manifest
        return run_task(_store(store), domain, cfg, run_id=run_id, executor=options)
    from domainbench.data.clips import Sampling, is_clip_dataset

    if frames is not None or fps is not None or max_frames is not None or is_clip_dataset(cfg.dataset):
        return run_clips(_store(store), domain, cfg, Sampling(frames, fps, max_frames, cfg.seed).check(),
                         run_id=run_id, executor=options, events=events)
    return run_plan(_store(store), lambda engine: engine.start(domain, cfg, run_id=run_id), executor=options, events=events)


def run_task(store: Store, domain: DomainConfig, cfg: RunConfig, *, run_id: str | None = None,
             executor: ExecutorOptions | None = None) -> Run:
    """A VQA or retrieval run (``cfg.task``) on the manifest ``cfg.dataset`` (``domainbench.engine.task_kind``), stored
    once evaluated; its results: ``domainbench.engine.task_kind.load_task_run(store, run.id)``."""
    from domainbench.engine.task_kind import check_task_options, start_task_run

    check_task_options(domain, cfg, executor.kind if executor is not None else "local")
    t0 = time.perf_counter()
    rid = start_task_run(store, domain, cfg, run_id)
    return Run(rid, store, seconds=time.perf_counter() - t0)


def run_clips(store: Store, domain: DomainConfig, cfg: RunConfig, sampling: Any, *, run_id: str | None = None,
              executor: ExecutorOptions | None = None, events: RunEvents | None = None) -> Run:
    """A clip run (``domainbench.engine.clip_kind``) on the clips ``cfg.dataset`` with ``sampling``
    (``domainbench.data.clips.Sampling``), on ``executor``; stored once evaluated. Its results: ``Run.clips``."""
    from domainbench.engine.clip_kind import clip_cells, start_clip_run
    from domainbench.engine.tasks import RunStats

    say = events.message if events is not None else None
    t0 = time.perf_counter()
    rid = start_clip_run(store, domain, cfg, sampling, run_id, say=say, executor=executor or "local")
    stats = RunStats(computed_units=len(cfg.models) * len(clip_cells(domain)))  # a start computes every unit
    return Run(rid, store, stats=stats, seconds=time.perf_counter() - t0)


def resume(run_id: str, *, skip_unreadable: bool = False, executor: str | ExecutorOptions | None = "local",
           store: Store | str | Path | None = None, events: RunEvents | None = None) -> Run:
    """Continue a stored run that was interrupted, failed or queued (``domainbench run --resume``): finished
    units are not recomputed. ``skip_unreadable`` goes on past an image file that does not decode."""
    return run_plan(_store(store), lambda engine: engine.resume(run_id, skip_unreadable), executor=executor_options(executor),
                    events=events)


# --------------------------------------------------------------------------- fine-tuning


def finetune(model: str, plan: DomainConfig | str | Path, dataset: str | Path, out: str | Path, *, overwrite: bool = False,
             on_step: Callable[[int, int, int, float, float], None] | None = None, **options: Any) -> FinetuneResult:
    """Fine-tune ``model``'s image tower so corrupted images embed like clean ones (``domainbench finetune``).

    Minimises L1 + λ·L2 (stability paper §6.1) on ``dataset``'s training split (labels unread), each step
    drawing corruptions from ``plan``; writes ``out``, a ``local:`` model folder with a model card.
    ``options``: ``epochs``, ``lr``, ``lam``, ``batch_size``, ``train_split``, ``trainable`` (``all`` or
    ``last-N``), ``seed``, ``device``, ``image_size``. ``on_step(epoch, step, steps, l1, l2)`` sees progress.
    Returns the result: ``.model`` is the name to evaluate (``local:OUT``), ``.state`` the split and loss curve.
    """
    from domainbench.tuning import train

    return train(model, plan, dataset, out, overwrite=overwrite, on_step=on_step, **options)


def finetune_resume(out: str | Path, *, epochs: int | None = None,
                    on_step: Callable[[int, int, int, float, float], None] | None = None) -> FinetuneResult:
    """Continue the fine-tune in ``out`` from its last epoch checkpoint (bit-identical to not stopping)."""
    from domainbench.tuning import resume

    return resume(out, epochs=epochs, on_step=on_step)


def finetune_evaluate(out: str | Path, *, seed: int | None = None, device: str | None = None,
                      store: Store | str | Path | None = None, events: RunEvents | None = None,
                      also: Sequence[str | Path] = (), **settings: Any) -> Run:
    """The fine-tune's built-in evaluation: the base and the fine-tuned model side by side under its plan, on
    the held-out images only (the split's other part; never a training image). Returns the run:
    ``.summary()`` has clean and corrupted accuracy with intervals, ``.report.stability`` the DivergenceRadius
    and cosine robustness per model and corruption. ``also``: more fine-tunes of the same base on the same
    split (a λ sweep), evaluated in the same run. ``settings``: more run settings (``stability_images``, ...)."""
    from domainbench.tuning.heldout import heldout_manifest, read_state
    from domainbench.tuning.train import PLAN_FILE

    out = Path(out).resolve()
    state = read_state(out)
    others = [Path(o).resolve() for o in also]
    for o in others:
        s = read_state(o)
        if (s.base, s.fingerprint, s.heldout_indices) != (state.base, state.fingerprint, state.heldout_indices):
            raise UserInputError(f"{o} is not a fine-tune of {state.base} on the same held-out images as {out}; evaluate it on its own")
    manifest, classes = heldout_manifest(out)
    settings.setdefault("threat", False)  # the PD threat says nothing about the fine-tune; it only costs time
    models = [state.base, f"local:{out}", *(f"local:{o}" for o in others)]
    return run(out / PLAN_FILE, models, dataset=manifest, classes=classes, baseline=state.base,
               image_size=state.options.image_size, seed=state.options.seed if seed is None else seed,
               device=device or state.options.device, store=store, events=events, **settings)

"""The Ray executor: corruption as Ray tasks, scoring on actors that keep the models loaded.

The driver (this process) plans exactly as the local engine does (``Engine._plan``), takes
each shard's clean images from the local executor's input pipeline (``InputPipeline``: decoded
ahead in ``--workers`` processes), puts them once into the object store, submits one corruption
task per job, and hands the shard with the task references to a model actor. The actor runs the same
per-shard code as the local engine (``domainbench.engine.shards.score_shard``) and upserts each
unit by key as it finishes, so a lost node loses only its shards in flight and
``--resume`` continues on either executor. The report is built once, by the driver, at the end.

An FMR run goes to ``FmrActor``s instead: each holds the oracle and a group of the tested models;
per shard one actor scores the oracle's votes once, and each (tested model, shard) unit is one
actor call running ``domainbench.fmr.units.fmr_unit``, the local executor's unit code. Every actor
builds its zero-shot classifiers through the store's text-embedding cache. Actors whose models run
on CUDA pin the shards they get, as the local pipeline does.

``ray`` is imported only here, and this module only when ``--executor ray`` is chosen.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Callable, Sequence
from typing import Any, cast

import numpy as np
from pydantic import SecretStr

from domainbench.config import DomainConfig, FmrSettings, RunConfig
from domainbench.data import Batch, Dataset
from domainbench.engine.executor_options import ExecutorOptions
from domainbench.engine.input_pipeline import InputPipeline, Pinning, run_workers
from domainbench.engine.jobs import Corrupted, Job, init_worker, run_job
from domainbench.engine.local_executor import local_environment, models_device
from domainbench.engine.dataset_pin import open_run_dataset
from domainbench.engine.runner import Engine, cells_of
from domainbench.engine.scoring import ModelState, load_models
from domainbench.engine.shards import score_shard
from domainbench.engine.tasks import Cell, RunContext, RunEvents, RunTask, SilentEvents, StabilityTask, ThreatTask
from domainbench.engine.work import ShardWork
from domainbench.errors import UserInputError
from domainbench.fmr.oracle import Oracle
from domainbench.fmr.tested import TestedModel
from domainbench.fmr.units import FmrModels, FmrWork, fmr_unit, load_fmr_models
from domainbench.settings import redact_uri
from domainbench.store import Store, open_store

#: environment every Ray worker gets: no phoning home, no hub downloads at run time
WORKER_ENV = {"NO_ALBUMENTATIONS_UPDATE": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


class WorkerLostError(UserInputError):
    """A Ray actor or node died mid-run. Stored units are kept; the fix is ``--resume``.

    A ``UserInputError`` so that the CLI prints it on one line (exit 2) with the command that
    continues the run, rather than as an internal error.
    """


def import_ray() -> Any:
    try:
        import ray
    except ImportError as e:
        raise UserInputError(
            f"--executor ray: Ray is not installed ({e}); install the extra with pip install 'domainbench[ray]' "
            "or run with --executor local"
        ) from None
    return ray


def store_locator(store: Store) -> tuple[str, SecretStr | None]:
    """How an actor reopens ``store``: (description, secret URI). Never logged: the URI may hold a password."""
    from domainbench.store.sqlite_store import SQLiteStore

    store = getattr(store, "inner", store)  # a worker's fenced view: the store under it
    if isinstance(store, SQLiteStore):
        return store.description, SecretStr(f"sqlite:///{store.path.resolve()}")
    uri = getattr(store, "uri", None)
    if isinstance(uri, SecretStr):
        return store.description, uri
    raise UserInputError(f"--executor ray cannot hand the store {store.description} to Ray workers; "
                         "use the embedded SQLite store or DOMAINBENCH_MONGO_URI")


def _import_modules(modules: list[str]) -> None:
    from domainbench import corruptions
    for m in modules:
        try:
            corruptions.load_module(m)
        except ImportError as e:
            raise UserInputError(f"--corruptions-module {m}: a Ray worker cannot import it ({e}); install it on every node") from e


def _corrupt(job: Job, batch: Batch, seed: int, modules: list[str]) -> Corrupted:
    """One corruption job as a Ray task: the same pure function the local pool runs."""
    init_worker()
    _import_modules(modules)
    return run_job(job, batch.images, batch.indices, seed)


class _RefFuture:
    """A corrupted batch in Ray's object store, fetched when the actor reaches it."""

    def __init__(self, ray: Any, ref: Any) -> None:
        self._ray, self._ref = ray, ref

    def result(self) -> Corrupted:
        return cast(Corrupted, self._ray.get(self._ref))


class ShardActor:
    """Holds the run's models and its own tasks; scores shards exactly as the local engine does."""

    def __init__(self, store: SecretStr, cfg: dict[str, Any], modules: list[str], models: list[str],
                 threat: bool, fence: tuple[str, str, int | None] | None = None) -> None:
        _import_modules(modules)
        self.store_uri = store
        # (run id, worker, lease epoch) when a worker drives the run: the actor's writes carry its lease fence
        self.fence = fence
        self.cfg = RunConfig.model_validate(cfg)
        self.model_names = models  # this actor's group of the run's models
        self.threat = threat  # the PD threat is model-independent: one group measures it
        self.store: Store | None = None
        self.ctx: RunContext | None = None
        self.cells: list[Cell] = []
        self.done: set[tuple[Any, ...]] = set()
        self.tasks: list[RunTask] = []
        self.models: list[ModelState] = []
        self.dataset: Dataset | None = None

    def load(self) -> dict[str, Any]:
        """Open the dataset and load every model (classifiers from the store's text-embedding cache);
        the environment as the run records it."""
        self.dataset = open_run_dataset(self.cfg)
        if self.store is None:  # the classifiers come from the store's text-embedding cache, as the local engine's do
            self.store = _actor_store(self.store_uri, self.fence)
        self.models = load_models(self.model_names, self.dataset.classes, self.cfg.device, self.cfg.batch_size,
                                  self.cfg.templates, options=self.cfg.model_args, cache=self.store)
        return {**local_environment(self.models), "host": platform.node(), "pid": os.getpid()}

    def _begin(self, run_id: str, domain: dict[str, Any]) -> RunContext:
        # lazily, per run: a restarted actor rebuilds this from the store and skips stored units
        if self.ctx is None or self.ctx.run_id != run_id:
            assert self.dataset is not None, "load() first"
            if self.store is None:
                self.store = _actor_store(self.store_uri, self.fence)
            dom = DomainConfig.model_validate(domain)
            ctx = RunContext(run_id, self.cfg, dom, self.dataset, self.store, self.models, SilentEvents())
            self.cells = cells_of(dom)
            self.done = self.store.units.keys(run_id=run_id)
            self.tasks = []
            if self.cfg.stability:
                self.tasks.append(StabilityTask(ctx))
            if self.threat and self.cfg.threat and self.dataset.labelled:
                self.tasks.append(ThreatTask(ctx))
            self.ctx = ctx
        return self.ctx

    def process(self, run_id: str, domain: dict[str, Any], shard: int, batch: Batch,
                jobs: list[tuple[Job, Any]]) -> tuple[int, int]:
        """Score one shard; (units written, images scored in them)."""
        import ray

        if not self.models:
            self.load()  # a restarted actor: Ray re-ran __init__ only
        ctx = self._begin(run_id, domain)
        images = 0

        def counted(n: int) -> None:
            nonlocal images
            images += n

        pinning = Pinning.for_device(models_device(self.models))
        futures = [(job, pinning.corrupted(_RefFuture(ray, ref))) for job, ref in jobs]
        batch = pinning.batch(batch)
        units = score_shard(ctx, self.cells, self.done, self.tasks, shard, batch, futures, on_unit=counted)
        return units, images

    def pid(self) -> int:
        return os.getpid()


class FmrActor:
    """Holds an FMR run's oracle and a group of its tested models; searches (tested model, shard) units
    with the same ``fmr_unit`` the local executor runs, and scores a shard's oracle votes when asked."""

    def __init__(self, store: SecretStr, cfg: dict[str, Any], settings: dict[str, Any], modules: list[str],
                 models: list[str], fence: tuple[str, str, int | None] | None = None) -> None:
        _import_modules(modules)
        self.store_uri, self.fence = store, fence
        self.cfg = RunConfig.model_validate(cfg)
        self.settings = FmrSettings.model_validate(settings)
        self.model_names = models
        self.store: Store | None = None
        self.dataset: Dataset | None = None
        self.oracle: Oracle | None = None
        self.tested: dict[str, TestedModel] = {}

    def load(self) -> dict[str, Any]:
        """Open the store and the dataset, load the oracle and this actor's tested models (classifiers
        from the store's text-embedding cache); the environment as the run records it."""
        self.store = _actor_store(self.store_uri, self.fence)
        self.dataset = open_run_dataset(self.cfg)
        self.oracle, tested = load_fmr_models(self.cfg, self.settings, self.dataset, self.model_names, cache=self.store)
        self.tested = {m.name: m for m in tested}
        return {**local_environment(self.oracle.members), "host": platform.node(), "pid": os.getpid()}

    def votes(self, batch: Batch) -> np.ndarray:
        """The oracle's votes on a shard's clean images: once per shard, shared by its units."""
        if self.oracle is None:
            self.load()  # a restarted actor: Ray re-ran __init__ only
        assert self.oracle is not None
        return self.oracle.votes(self._pinned(batch).images)

    def unit(self, run_id: str, domain: dict[str, Any], shard: int, batch: Batch, clean_votes: np.ndarray,
             model: str) -> int:
        """Search and store one (tested model, shard) unit; the images in it."""
        if self.oracle is None:
            self.load()
        assert self.store is not None and self.dataset is not None and self.oracle is not None
        return fmr_unit(self.store, run_id, DomainConfig.model_validate(domain), self.cfg, self.settings,
                        self.dataset.classes, self.oracle, self.tested[model], shard, self._pinned(batch), clean_votes)

    def _pinned(self, batch: Batch) -> Batch:
        """The shard as the models take it: pinned when they run on CUDA."""
        assert self.oracle is not None
        return Pinning.for_device(models_device(self.oracle.members)).batch(batch)


def _actor_store(uri: SecretStr, fence: tuple[str, str, int | None] | None) -> Store:
    """The store as an actor writes it: the driver's, fenced by the worker's lease when a worker drives the run."""
    store = open_store(uri.get_secret_value())
    if fence is None:
        return store
    from domainbench.store.fence import Fence
    from domainbench.store.fenced_store import FencedStore

    return FencedStore(store, Fence(*fence))  # type: ignore[return-value]


class RayExecutor:
    """``Executor`` whose models live on Ray actors and whose corruption runs as Ray tasks."""

    def __init__(self, options: ExecutorOptions | None = None, events: RunEvents | None = None) -> None:
        self.options = options or ExecutorOptions(kind="ray")
        self.events: RunEvents = events or SilentEvents()
        self.ray = import_ray()
        self.actors: list[Any] = []
        self.groups: list[list[int]] = []  # actor indices of each model group
        self.actor_pids: list[int] = []
        self._env: dict[str, Any] = {}
        self._owns_ray = False
        self._device = "auto"
        self._gpus_per_actor = 0.0
        self.group_of: dict[str, int] = {}  # model name -> its model group

    # -- connecting and loading ---------------------------------------------------------
    def _connect(self) -> None:
        ray, opts = self.ray, self.options
        if ray.is_initialized():
            return  # the caller (a test, a notebook, the UI's worker) joined a cluster already
        where = opts.address or "a new local Ray instance"
        try:
            if opts.address is not None:
                _check_reachable(opts.address, opts.connect_timeout_s)
            if opts.address is not None and opts.address.startswith("ray://"):
                _check_client_installed(opts.address)
            ray.init(address=opts.address, runtime_env={"env_vars": WORKER_ENV}, include_dashboard=False,
                     log_to_driver=False, logging_level="ERROR")
        except UserInputError:
            raise
        except Exception as e:  # ConnectionError, TimeoutError, RuntimeError: whatever Ray raises for it
            why = redact_uri(str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__)[:200]
            raise UserInputError(
                f"--address {opts.address or '(none)'}: cannot start or reach Ray at {where} ({why}); start a cluster "
                "with `ray start --head`, fix the address (auto, HOST:6379 or ray://HOST:10001), or use --executor local"
            ) from None
        self._owns_ray = True

    def _resources(self, n_groups: int) -> tuple[int, float]:
        """(actors per model group, GPUs per actor), checked against what the cluster has."""
        opts = self.options
        have = self.ray.cluster_resources()
        gpus, cpus = float(have.get("GPU", 0)), float(have.get("CPU", 0))
        per_actor = opts.gpus_per_actor
        if per_actor is None:
            per_actor = 1.0 if gpus >= 1 and self._device != "cpu" else 0.0
        replicas = opts.actors or (max(1, int(gpus // (per_actor * n_groups))) if per_actor > 0 else 1)
        n = replicas * n_groups
        if per_actor * n > gpus:
            raise UserInputError(f"--gpus-per-actor {per_actor:g} × {n} actors needs {per_actor * n:g} GPUs but the Ray "
                                 f"cluster has {gpus:g}; lower --actors or --gpus-per-actor (0 runs the models on CPU)")
        if cpus - opts.cpus_per_actor * n < opts.cpus_per_task:
            raise UserInputError(f"--cpus-per-task {opts.cpus_per_task:g}: the Ray cluster's {cpus:g} CPUs minus "
                                 f"{opts.cpus_per_actor:g} for each of {n} actors leave no room for a corruption task; "
                                 "lower --actors or add CPUs to the cluster")
        return replicas, per_actor

    def load_models(self, store: Store, cfg: RunConfig, ds: Dataset, events: RunEvents) -> list[ModelState]:
        """Create the actors and load every model there; the driver keeps only the names."""
        self._start_actors(store, cfg, events, ShardActor, "corruption tasks",
                           lambda uri, group, first, fence: (uri, cfg.model_dump(mode="json"), list(self.options.modules),
                                                             group, first, fence))
        # the planner on this side needs only the names (ModelState's other fields stay on the actors)
        return [cast(ModelState, _Named(name, cfg.batch_size)) for name in cfg.models]

    def load_fmr(self, store: Store, cfg: RunConfig, settings: FmrSettings, ds: Dataset, events: RunEvents,
                 tested: Sequence[TestedModel] | None) -> FmrModels:
        """Create FMR actors, each with the oracle and a group of the tested models; the driver keeps the names."""
        if tested is not None:
            raise UserInputError("ready-made tested models run on the local executor only; name them in the run config "
                                 "(py:MODULE:ATTR, torchvision:CONFIG.json) for --executor ray")
        self._start_actors(store, cfg, events, FmrActor, "the oracle on every actor",
                           lambda uri, group, first, fence: (uri, cfg.model_dump(mode="json"),
                                                             settings.model_dump(mode="json"), list(self.options.modules),
                                                             group, fence))
        return FmrModels(list(cfg.models))

    def _start_actors(self, store: Store, cfg: RunConfig, events: RunEvents, actor: type, extra: str,
                      args: Callable[[SecretStr | None, list[str], bool, tuple[str, str, int | None] | None],
                                     tuple[Any, ...]]) -> None:
        """Actors of class ``actor`` over groups of the run's models (``args`` builds each one's arguments), loaded."""
        self.events = events
        self._device = cfg.device
        self._connect()
        ray, opts = self.ray, self.options
        locator, uri = store_locator(store)
        size = opts.models_per_actor or len(cfg.models)
        groups = [cfg.models[i : i + size] for i in range(0, len(cfg.models), size)]
        replicas, gpus = self._resources(len(groups))
        self._gpus_per_actor = gpus
        n = replicas * len(groups)
        self.events.message(f"Ray: {n} model actor(s) ({len(groups)} model group(s) × {replicas}) with {gpus:g} GPU and "
                            f"{opts.cpus_per_actor:g} CPU each; {extra} with {opts.cpus_per_task:g} CPU; store {locator}")
        actor_cls = ray.remote(actor).options(num_gpus=gpus, num_cpus=opts.cpus_per_actor)
        self._kill_actors()
        self.groups = [[g * replicas + r for r in range(replicas)] for g in range(len(groups))]
        self.group_of = {name: g for g, names in enumerate(groups) for name in names}
        fence = getattr(store, "fence", None)
        fence_args = (fence.run_id, fence.worker, fence.epoch) if fence is not None else None
        self.actors = [actor_cls.remote(*args(uri, groups[g], g == 0, fence_args))
                       for g in range(len(groups)) for _ in range(replicas)]
        try:
            envs = self._get([a.load.remote() for a in self.actors])
        except BaseException:
            self._kill_actors()
            raise
        self.actor_pids = [int(e["pid"]) for e in envs]
        self._env = {k: v for k, v in envs[0].items() if k not in ("pid", "host")}
        self._env |= {"executor": "ray", "actors": n, "hosts": sorted({e["host"] for e in envs})}

    def fmr_environment(self, models: FmrModels) -> dict[str, Any]:
        return dict(self._env)

    def environment(self, models: list[ModelState]) -> dict[str, Any]:
        return dict(self._env)

    def _get(self, refs: Any) -> Any:
        """``ray.get`` with the worker's own exception: a UserInputError stays one, not a traceback."""
        ray = self.ray
        try:
            return ray.get(refs)
        except ray.exceptions.RayTaskError as e:
            cause = getattr(e, "cause", None)
            if isinstance(cause, BaseException):
                raise cause from None
            raise

    # -- the loop -----------------------------------------------------------------------
    def _least_loaded(self, group: list[int], load: list[int], collect: Callable[[], None]) -> int:
        """The actor of ``group`` with the fewest calls in flight, once one is under the bound
        (``collect`` takes a finished call's result until then)."""
        while min(load[i] for i in group) >= self.options.shards_in_flight:
            collect()
        return min(group, key=lambda a: load[a])

    def _release(self) -> None:
        """The run's actors gone, and Ray too where this executor started it."""
        self._kill_actors()
        if self._owns_ray:
            self.ray.shutdown()
            self._owns_ray = False

    def _inputs(self, ds: Dataset, cfg: RunConfig) -> InputPipeline:
        """The run's clean shards, decoded ahead on the driver as the local executor decodes them (worker
        processes by ``--workers``, their default by where the actors' models run); not pinned here:
        ``ray.put`` copies them into the object store."""
        return InputPipeline(ds, run_workers(cfg.workers, self._gpus_per_actor > 0))

    def execute(self, work: ShardWork) -> None:
        ray, opts, ctx = self.ray, self.options, work.ctx
        cfg = ctx.cfg
        corrupt = ray.remote(_corrupt).options(num_cpus=opts.cpus_per_task)
        domain = ctx.domain.model_dump(mode="json")
        modules = list(opts.modules)
        pending: dict[Any, int] = {}  # shard result -> actor index
        load = [0] * len(self.actors)
        try:
            with self._inputs(ctx.dataset, cfg) as inputs:
                for shard, todo, batch in inputs.batches(work.plan(), work.shards, work.report_unreadable, work.timer):
                    ref = ray.put(batch)  # one copy of the clean shard, read by its tasks and its actor
                    jobs = [(job, corrupt.remote(job, ref, cfg.seed, modules)) for job in todo]
                    work.stats.corruption_calls += sum(len(batch.images[: j.n_images]) for j in todo)
                    for group in self.groups:  # every group scores the shard with its models
                        i = self._least_loaded(group, load, lambda: self._collect(pending, load, work))
                        pending[self.actors[i].process.remote(ctx.run_id, domain, shard, ref, jobs)] = i
                        load[i] += 1
            while pending:
                self._collect(pending, load, work)
        finally:
            self._release()

    def execute_fmr(self, work: FmrWork) -> None:
        """Per shard: its clean images (from the input pipeline) into the object store once, the oracle's
        votes once (on one actor, round robin), then one actor call per missing (tested model, shard) unit
        on its model group."""
        ray = self.ray
        domain = work.domain.model_dump(mode="json")
        pending: dict[Any, tuple[int, str, int]] = {}  # unit result -> (actor index, model, shard)
        load = [0] * len(self.actors)
        try:
            with self._inputs(work.dataset, work.cfg) as inputs:
                for shard, todo, batch in inputs.batches(work.plan(), work.shards, work.report_unreadable):
                    ref = ray.put(batch)
                    votes = self.actors[shard % len(self.actors)].votes.remote(ref)
                    for name in todo:
                        group = self.groups[self.group_of[name]]
                        i = self._least_loaded(group, load, lambda: self._collect_fmr(pending, load, work))
                        pending[self.actors[i].unit.remote(work.run_id, domain, shard, ref, votes, name)] = (i, name, shard)
                        load[i] += 1
            while pending:
                self._collect_fmr(pending, load, work)
        finally:
            self._release()

    def _collect_fmr(self, pending: dict[Any, tuple[int, str, int]], load: list[int], work: FmrWork) -> None:
        (_, name, shard), images = self._ready(pending, load, work.run_id, "fmr")
        work.unit_written(name, shard, images)

    def _collect(self, pending: dict[Any, int], load: list[int], work: ShardWork) -> None:
        _, (units, images) = self._ready(pending, load, work.ctx.run_id, "run")
        work.stats.computed_units += units
        if units:
            work.events.advance(units, images)
        work.cancel.check()  # between shards: Ray's units are written in its actors

    def _ready(self, pending: dict[Any, Any], load: list[int], run_id: str, command: str) -> tuple[Any, Any]:
        """Wait for one pending actor call: (its entry in ``pending``, its result)."""
        ray = self.ray
        ready, _ = ray.wait(list(pending), num_returns=1)
        entry = pending.pop(ready[0])
        i = entry if isinstance(entry, int) else entry[0]
        load[i] -= 1
        try:
            return entry, self._get(ready[0])
        except ray.exceptions.RayActorError as e:
            raise WorkerLostError(
                f"Ray actor {i} (pid {self.actor_pids[i] if i < len(self.actor_pids) else '?'}) was lost "
                f"({type(e).__name__}); finished units are stored: continue with `domainbench {command} --resume {run_id}`"
            ) from None

    def _kill_actors(self) -> None:
        for a in self.actors:
            try:
                self.ray.kill(a)
            except Exception:  # already dead: nothing to release
                pass
        self.actors = []
        self.groups = []


class RayEngine(Engine):
    """The engine with a ``RayExecutor``: what ``make_engine`` gives for ``--executor ray``."""

    def __init__(self, store: Store, events: RunEvents | None = None, options: ExecutorOptions | None = None) -> None:
        self.ray_executor = RayExecutor(options, events)
        super().__init__(store, events, self.ray_executor)

    @property
    def options(self) -> ExecutorOptions:
        return self.ray_executor.options

    @property
    def actor_pids(self) -> list[int]:
        """Process ids of the model actors of the run in progress (tests kill one, as a lost node would)."""
        return self.ray_executor.actor_pids


class _Named:
    """What the driver knows of a model that lives on the actors: its name."""

    def __init__(self, name: str, batch_size: int) -> None:
        self.name = name
        self.batch_size = batch_size
        self.model = None  # the model itself lives on the actors (tasks planning here ask it nothing)


def _check_client_installed(address: str) -> None:
    import importlib.util

    if importlib.util.find_spec("grpc") is None:  # what Ray's client speaks; not in the plain `ray` package
        raise UserInputError(
            f"--address {address}: the Ray client is not installed; pip install 'domainbench[cluster]', "
            "or give the cluster's HOST:6379 address from a machine inside it"
        )


def _check_reachable(address: str, timeout_s: float) -> None:
    """Fail fast on HOST:PORT that nothing listens on: Ray itself retries for a minute or more."""
    import socket

    if address == "auto":
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=min(timeout_s, 10.0)):
            pass
    except (OSError, ValueError) as e:
        raise UserInputError(
            f"--address {address}: no Ray cluster answers there ({e}); start one with `ray start --head`, "
            "fix the address (auto, HOST:6379 or ray://HOST:10001), or use --executor local"
        ) from None


__all__ = ["FmrActor", "RayEngine", "RayExecutor", "ShardActor", "WorkerLostError", "import_ray", "store_locator"]

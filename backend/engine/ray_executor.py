"""The Ray executor: corruption as Ray tasks, scoring on actors that keep the models loaded.

``RayExecutor`` knows no run kind: it connects to Ray, starts a kind's actors over groups of the run's
models, decodes each shard on the driver through the local executor's input pipeline
(``InputPipeline``: decoded ahead in ``--workers`` processes) and waits for the actors' calls. Each
run kind drives it with its own Ray part (``engine.kinds``).

The corruption kind's part is here (``CellsOnRay``): the driver plans exactly as the local engine does
(``corruption_kind``), puts each clean shard once into the object store, submits one corruption task
per job, and hands the shard with the task references to a ``ShardActor``. The actor runs the same
per-shard code as the local engine (``domainbench.engine.shards.score_shard``), and the same real-shift
code (``shift_cells.score_shifts``), and upserts each unit by key as it finishes, so a lost node loses
only its shards in flight and ``--resume`` continues on either executor. The report is built once, by
the driver, at the end. FMR's part is ``fmr.ray_units``. Actors whose models run on CUDA pin the shards
they get, as the local pipeline does.

``ray`` is imported only here, and this module only when ``--executor ray`` is chosen.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Callable
from typing import Any, cast

from pydantic import SecretStr

from domainbench.records.config import DomainConfig, RunConfig
from domainbench.data import Batch, Dataset
from domainbench.engine.cancel import CancelWatch
from domainbench.engine.executor_options import ExecutorOptions
from domainbench.engine.input_pipeline import InputPipeline, Pinning, run_workers
from domainbench.engine.jobs import Corrupted, Job, init_worker, run_job
from domainbench.engine import shift_cells
from domainbench.engine.dataset_pin import open_run_dataset
from domainbench.engine.kinds import RunSession
from domainbench.engine.local_executor import local_environment, models_device
from domainbench.engine.runner import Engine
from domainbench.engine.scoring import ModelState, load_models
from domainbench.engine.shards import score_shard
from domainbench.engine.tasks import (Cell, RunContext, RunEvents, RunTask, SilentEvents, StabilityTask, ThreatTask,
                                      cells_of)
from domainbench.engine.timings import STARTUP
from domainbench.engine.work import ShardWork
from domainbench.errors import UserInputError
from domainbench.runtime.settings import redact_uri
from domainbench.store import Store, open_store
from domainbench.store.fence import Fence, LeaseLost

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


def import_modules(modules: list[str]) -> None:
    from domainbench import corruptions
    for m in modules:
        try:
            corruptions.load_module(m)
        except ImportError as e:
            raise UserInputError(f"--corruptions-module {m}: a Ray worker cannot import it ({e}); install it on every node") from e


def _corrupt(job: Job, batch: Batch, seed: int, modules: list[str]) -> Corrupted:
    """One corruption job as a Ray task: the same pure function the local pool runs."""
    init_worker()
    import_modules(modules)
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
        import_modules(modules)
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
            self.store = actor_store(self.store_uri, self.fence)
        self.models = load_models(self.model_names, self.dataset.classes, self.cfg.device, self.cfg.batch_size,
                                  self.cfg.templates, options=self.cfg.model_args, cache=self.store)
        return {**local_environment(self.models), "host": platform.node(), "pid": os.getpid()}

    def _begin(self, run_id: str, domain: dict[str, Any], fence: Fence | None = None) -> RunContext:
        # lazily, per run: a restarted actor rebuilds this from the store and skips stored units
        if self.ctx is None or self.ctx.run_id != run_id:
            assert self.dataset is not None, "load() first"
            if self.store is None:
                self.store = actor_store(self.store_uri, self.fence)
            dom = DomainConfig.model_validate(domain)
            store = live_run_store(self.store, fence)
            ctx = RunContext(run_id, self.cfg, dom, self.dataset, store, self.models, SilentEvents())
            self.cells = cells_of(dom)
            self.done = store.units.keys(run_id=run_id)
            self.tasks = []
            if self.cfg.stability:
                self.tasks.append(StabilityTask(ctx))
            if self.threat and self.cfg.threat and self.dataset.labelled:
                self.tasks.append(ThreatTask(ctx))
            self.ctx = ctx
        return self.ctx

    def process(self, run_id: str, domain: dict[str, Any], shard: int, batch: Batch,
                jobs: list[tuple[Job, Any]], fence: Fence | None = None) -> tuple[int, int]:
        """Score one shard; (units written, images scored in them). ``fence``: the driver's (see ``live_run_store``)."""
        import ray

        if not self.models:
            self.load()  # a restarted actor: Ray re-ran __init__ only
        ctx = self._begin(run_id, domain, fence)
        images = 0

        def counted(n: int) -> None:
            nonlocal images
            images += n

        pinning = Pinning.for_device(models_device(self.models))
        futures = [(job, pinning.corrupted(_RefFuture(ray, ref))) for job, ref in jobs]
        batch = pinning.batch(batch)
        units = score_shard(ctx, self.cells, self.done, self.tasks, shard, batch, futures, on_unit=counted)
        return units, images

    def shifts(self, run_id: str, domain: dict[str, Any], shard_size: int, fence: Fence | None = None) -> tuple[int, int]:
        """Score the run's real-shift cells with this actor's models, after every clean unit is stored (a
        paired shift's flips compare with them): the local executor's ``score_shifts``; (units, images)."""
        if not self.models:
            self.load()
        ctx = self._begin(run_id, domain, fence)
        images = 0

        def counted(n: int) -> None:
            nonlocal images
            images += n

        shifts = shift_cells.open_shifts(ctx.domain, self.cfg, ctx.dataset)
        done = ctx.store.units.keys(run_id=run_id)  # other replicas of this group stored clean units too
        units = shift_cells.score_shifts(ctx, shifts, shard_size, done, on_unit=counted)
        return units, images

    def pid(self) -> int:
        return os.getpid()


def live_run_store(store: Store, fence: Fence | None) -> Store:
    """What an actor writes a run's records through: the driver's fence (``fence``: a terminal run's process
    fence, or the worker's lease, which ``store`` already carries) and the run still "running", checked inside
    each write (``LiveRunFence``); so a call still in flight when its run was finished, cancelled or deleted
    adds nothing to it. Without a fence (a caller that hands none) ``store`` as it is."""
    from domainbench.store.fence import LiveRunFence, ProcessFence
    from domainbench.store.fenced_store import FencedStore, ProcessFencedStore

    inner = getattr(store, "inner", store)
    fence = fence if fence is not None else getattr(store, "fence", None)
    if fence is None:
        return store
    # a terminal run's record updates (the threat's scale) as its driver makes them: read, change, fenced write
    view = ProcessFencedStore if isinstance(fence, ProcessFence) else FencedStore
    return view(inner, LiveRunFence.around(fence))  # type: ignore[return-value]


def actor_store(uri: SecretStr, fence: tuple[str, str, int | None] | None) -> Store:
    """The store as an actor writes it: the driver's, fenced by the worker's lease when a worker drives the run."""
    store = open_store(uri.get_secret_value())
    if fence is None:
        return store
    from domainbench.store.fence import Fence
    from domainbench.store.fenced_store import FencedStore

    return FencedStore(store, Fence(*fence))  # type: ignore[return-value]


class RayExecutor:
    """``Executor`` whose models live on Ray actors and whose corruption runs as Ray tasks.

    It knows no run kind: it connects to Ray, starts actors of a kind's class over groups of the run's
    models (``start_actors``), decodes shards (``inputs``), picks the least loaded actor of a group and
    waits for calls (``least_loaded``, ``ready``); a kind's Ray part (``CellsOnRay`` below, FMR's
    ``fmr.ray_units.FmrOnRay``) drives them."""

    name = "ray"

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

    def start_actors(self, store: Store, cfg: RunConfig, events: RunEvents, actor: type, extra: str,
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
            envs = self.get([a.load.remote() for a in self.actors])
        except BaseException:
            self._kill_actors()
            raise
        self.actor_pids = [int(e["pid"]) for e in envs]
        self._env = {k: v for k, v in envs[0].items() if k not in ("pid", "host")}
        self._env |= {"executor": "ray", "actors": n, "hosts": sorted({e["host"] for e in envs})}

    def environment(self) -> dict[str, Any]:
        """Where the actors loaded (device, versions, hosts), as the run record keeps it."""
        return dict(self._env)

    def get(self, refs: Any) -> Any:
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
    def least_loaded(self, group: list[int], load: list[int], collect: Callable[[], None]) -> int:
        """The actor of ``group`` with the fewest calls in flight, once one is under the bound
        (``collect`` takes a finished call's result until then)."""
        while min(load[i] for i in group) >= self.options.shards_in_flight:
            collect()
        return min(group, key=lambda a: load[a])

    def release(self) -> None:
        """The run's actors gone, and Ray too where this executor started it."""
        self._kill_actors()
        if self._owns_ray:
            self.ray.shutdown()
            self._owns_ray = False

    def inputs(self, ds: Dataset, cfg: RunConfig) -> InputPipeline:
        """The run's clean shards, decoded ahead on the driver as the local executor decodes them (worker
        processes by ``--workers``, their default by where the actors' models run); not pinned here:
        ``ray.put`` copies them into the object store."""
        return InputPipeline(ds, run_workers(cfg.workers, self._gpus_per_actor > 0))

    def ready_or_cancelled(self, pending: dict[Any, Any], load: list[int], run_id: str, command: str,
                           cancel: CancelWatch) -> tuple[Any, Any]:
        """``ready``; a unit an actor refused because its run was cancelled meanwhile is that cancel."""
        try:
            return self.ready(pending, load, run_id, command)
        except LeaseLost:
            cancel.check(now=True)
            raise

    def ready(self, pending: dict[Any, Any], load: list[int], run_id: str, command: str) -> tuple[Any, Any]:
        """Wait for one pending actor call: (its entry in ``pending``, its result)."""
        ray = self.ray
        ready, _ = ray.wait(list(pending), num_returns=1)
        entry = pending.pop(ready[0])
        i = entry if isinstance(entry, int) else entry[0]
        load[i] -= 1
        try:
            return entry, self.get(ready[0])
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


class CellsOnRay:
    """The corruption kind's part for the Ray executor: corruption as Ray tasks, ``ShardActor``s holding groups
    of the models score each shard (every group sees every shard), then the real-shift cells on one actor
    of each group. An ``--adaptive`` run goes round by round: a round is dispatched once the previous one
    is stored and observed, so the cells still active are those the local executor would score."""

    def load(self, session: RunSession) -> list[ModelState]:
        """Create the actors and load every model there; the driver keeps only the names."""
        executor, cfg = session_executor(session), session.cfg
        with session.startup.stage(STARTUP, "model load"):  # on the executor's machines: one figure
            executor.start_actors(session.store, cfg, session.events, ShardActor, "corruption tasks",
                                  lambda uri, group, first, fence: (uri, cfg.model_dump(mode="json"),
                                                                    list(executor.options.modules), group, first, fence))
        # the planner on this side needs only the names (ModelState's other fields stay on the actors)
        return [cast(ModelState, _Named(name, cfg.batch_size)) for name in cfg.models]

    def environment(self, session: RunSession) -> dict[str, Any]:
        return session_executor(session).environment()

    def execute(self, session: RunSession, work: ShardWork) -> None:
        executor = session_executor(session)
        ray, opts, ctx = executor.ray, executor.options, work.ctx
        cfg, adaptive = ctx.cfg, work.adaptive
        corrupt = ray.remote(_corrupt).options(num_cpus=opts.cpus_per_task)
        domain = ctx.domain.model_dump(mode="json")
        fence = getattr(ctx.store, "fence", None)  # the driver's: the actors' writes carry it (``live_run_store``)
        modules = list(opts.modules)
        pending: dict[Any, int] = {}  # shard result -> actor index
        load = [0] * len(executor.actors)

        def collect() -> None:
            _, (units, images) = executor.ready_or_cancelled(pending, load, ctx.run_id, "run", work.cancel)
            work.stats.computed_units += units
            if units:
                work.events.advance(units, images)
            work.cancel.check()  # between shards: Ray's units are written in its actors

        try:
            with executor.inputs(ctx.dataset, cfg) as inputs:
                for shard, todo, batch in inputs.batches(work.plan(), work.shards, work.report_unreadable, work.timer):
                    if adaptive is not None:
                        # as the local executor's consume: the cells that stopped since the plan are not scored
                        if adaptive.finished():
                            continue
                        todo = [j for j in todo if j.stability or adaptive.active(j.corruption, j.severity)]
                    ref = ray.put(batch)  # one copy of the clean shard, read by its tasks and its actor
                    jobs = [(job, corrupt.remote(job, ref, cfg.seed, modules)) for job in todo]
                    work.stats.corruption_calls += sum(len(batch.images[: j.n_images]) for j in todo)
                    for group in executor.groups:  # every group scores the shard with its models
                        i = executor.least_loaded(group, load, collect)
                        pending[executor.actors[i].process.remote(ctx.run_id, domain, shard, ref, jobs, fence)] = i
                        load[i] += 1
                    if adaptive is not None:  # the round stored, then observed: it decides the next round's cells
                        while pending:
                            collect()
                        adaptive.observe(ctx.store.units(ctx.run_id, shard=shard))
            while pending:
                collect()
            if work.shifts:
                for shift in work.shifts:  # the actors' events are silent: the notes are said here
                    for note in shift.notes:
                        work.events.message(note)
                for group in executor.groups:  # one actor of each group scores the shifts with its models
                    pending[executor.actors[group[0]].shifts.remote(ctx.run_id, domain, work.shift_shard_size, fence)] = group[0]
                    load[group[0]] += 1
                while pending:
                    collect()
        finally:
            executor.release()


def session_executor(session: RunSession) -> RayExecutor:
    """The session's executor, which a kind's Ray part runs on."""
    assert isinstance(session.executor, RayExecutor)
    return session.executor


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


__all__ = ["CellsOnRay", "RayEngine", "RayExecutor", "ShardActor", "WorkerLostError", "actor_store", "import_modules",
           "import_ray", "store_locator"]

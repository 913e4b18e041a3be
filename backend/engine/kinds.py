"""Run kinds behind one protocol, and the small registry the engine finds them in.

A run kind (corruption cells, FMR, VQA, retrieval, clips) supplies what
is its own: the checks made before its run is created, the inputs it opens beside the run's dataset,
its plan and units, where they run on each executor, and its report. Everything else is the engine's
and is written once (``engine.runner.Engine``): the run id, dataset pinning and fingerprinting, the
run record's life (``engine.lifecycle``), the queue, the worker, resume, cancellation.

The engine never imports a kind. Built-in kinds are named here by module (like the model backends
and corruption kernels, ``corruptions.named_registry``), plug-in kinds come from the entry-point
group ``domainbench.run_kinds``; each module registers its kind on import. So ``fmr`` builds on the
engine and the engine does not build on ``fmr``.

Executors (``engine.work.Executor``: local, Ray) are services that know no kind: a kind supplies
an :class:`ExecutorPart` per executor it runs on (``RunKind.part``), which loads its models there
and computes its units with that executor's services. A kind that cannot honour a run's option on
an executor declares it in :class:`KindCapabilities`; the engine refuses it in one line before
anything is stored.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from domainbench.corruptions.named_registry import Registry
from domainbench.errors import UserInputError

if TYPE_CHECKING:
    from domainbench.records.config import DomainConfig, RunConfig
    from domainbench.data import Dataset
    from domainbench.engine.tasks import RunEvents, RunStats
    from domainbench.engine.timings import StageTimes
    from domainbench.engine.work import Executor
    from domainbench.records.report import RunReport
    from domainbench.store import Store
    from domainbench.store.records import DatasetInfo, RunRecord


class UnknownRunKindError(UserInputError):
    """A run kind name nothing registered (a plug-in not installed, a typo)."""


@dataclass(frozen=True)
class Refusal:
    """An option a kind cannot honour on an executor: when it applies, and the fix the user is told."""

    #: the option as the user spells it (``--shift``), named first in the error line
    option: str
    #: whether the run uses the option
    applies: Callable[[RunSession], bool]
    #: what to do instead, completing "… on --executor NAME; …"
    fix: str


@dataclass(frozen=True)
class KindCapabilities:
    """What a kind can do where: the executors it runs on, and per executor the options it refuses there."""

    #: executor names (``ExecutorOptions.kind``) the kind has an ``ExecutorPart`` for
    executors: tuple[str, ...] = ("local", "ray")
    #: executor name -> the options the kind does not support there
    refuses: Mapping[str, tuple[Refusal, ...]] = field(default_factory=dict)

    def check(self, kind: str, session: RunSession) -> None:
        """One ``error:`` line (a ``UserInputError``) for the first thing the run asks that its executor lacks."""
        where = getattr(session.executor, "name", type(session.executor).__name__)
        if where not in self.executors:
            raise UserInputError(f"--executor {where}: {kind} runs execute on {' or '.join(self.executors)}; "
                                 f"choose --executor {self.executors[0]}")
        for r in self.refuses.get(where, ()):
            if r.applies(session):
                raise UserInputError(f"{r.option}: {kind} runs do not support it on --executor {where}; {r.fix}")


@dataclass
class RunSession:
    """One start or resume of a run: what the engine has opened and the kind fills in.

    The engine sets the store, executor, events, stats and timers, the domain, run config and the
    kind's settings, the stored run on a resume, and the dataset once it is open; the kind keeps
    its loaded models in ``models`` and anything else it opens (shift folders, ...) in ``state``.
    """

    kind: RunKind
    store: Store
    executor: Executor
    events: RunEvents
    stats: RunStats
    #: seconds per stage of this session (a resume adds to the stored ones)
    timer: StageTimes
    #: the fixed costs before the first unit (``timings.STARTUP``)
    startup: StageTimes
    domain: DomainConfig
    cfg: RunConfig
    settings: Any = None
    #: the stored run on a resume; None on a start
    run: RunRecord | None = None
    #: the caller's kind-specific arguments (FMR: ``tested``, ready-made tested models)
    args: dict[str, Any] = field(default_factory=dict)
    dataset: Dataset | None = None
    run_id: str = ""
    models: Any = None
    state: dict[str, Any] = field(default_factory=dict)

    @property
    def ds(self) -> Dataset:
        assert self.dataset is not None, "the engine opens the dataset first"
        return self.dataset


class ExecutorPart(Protocol):
    """A kind's units on one executor: its models loaded there, and its units computed there."""

    def load(self, session: RunSession) -> Any:
        """Load the run's models where they will compute (nothing is stored yet); returns them."""

    def environment(self, session: RunSession) -> dict[str, Any]:
        """What the run record keeps of where it ran (device, versions, executor)."""

    def execute(self, session: RunSession, work: Any) -> None:
        """Compute every unit of ``work`` (the kind's plan) and store each by key as it finishes."""


class RunKind(Protocol):
    """What a kind of run supplies to the one lifecycle (see the module docstring)."""

    #: the registry key (``corruption``, ``fmr``)
    name: str
    capabilities: KindCapabilities

    def claims(self, run: RunRecord) -> bool:
        """Whether a stored run record is of this kind (its settings are on it)."""

    def settings_of(self, run: RunRecord) -> Any:
        """The kind's settings as the run record stores them (None for a kind without settings)."""

    def record_fields(self, session: RunSession) -> dict[str, Any]:
        """The kind's own fields of a new run record (its settings, its corruptions' ladder versions)."""

    def check(self, session: RunSession) -> None:
        """Checks of the plan and settings before the dataset is opened; may replace ``session.domain``."""

    def check_resume(self, session: RunSession) -> dict[str, Any]:
        """Checks of a stored run before it continues; the fields its restart records."""

    def open(self, session: RunSession) -> None:
        """Open and check what the kind reads beside the dataset (after it is open, before models load)."""

    def dataset_info(self, session: RunSession, info: DatasetInfo) -> DatasetInfo:
        """The dataset record the run keeps, with what the kind fingerprints beside it."""

    def part(self, executor: str) -> ExecutorPart:
        """How this kind's units load and run on the executor called ``executor``."""

    def evaluate(self, session: RunSession) -> str:
        """Plan the units still missing, compute them on the session's executor, store the report; the run id."""

    def report(self, store: Store, run_id: str) -> RunReport:
        """The finished run's report (``engine.lifecycle.complete_run`` stores it)."""


def _adopt(registry: Registry[Any], obj: Any, origin: str, name: str) -> None:
    """A module registers its kind on import; a plug-in entry point may also name a kind object or its class."""
    if isinstance(obj, type):
        obj = obj()
    if hasattr(obj, "claims") and hasattr(obj, "evaluate"):
        registry.register(getattr(obj, "name", name), obj, origin=origin)


#: the registry of run kinds; the engine reaches a kind only through it
RUN_KINDS: Registry[RunKind] = Registry(
    "run kind",
    error=UnknownRunKindError,
    group="domainbench.run_kinds",
    builtins=("domainbench.engine.corruption_kind", "domainbench.fmr.kind", "domainbench.engine.task_kind",
              "domainbench.engine.clip_kind"),
    adopt=_adopt,
)

class SelfRunKind:
    """A kind that starts and resumes its runs itself (task and clip runs: they read a manifest or clips, not a
    classification dataset) and keeps its results on the run record: found by ``RunRecord.kind``, local only,
    and every step of the engine's own lifecycle refused in one line naming the command that does it.
    A subclass sets ``name``, ``start_hint`` (how such a run starts) and ``resume_words``."""

    name: str
    start_hint: str
    resume_words = "it resumes with"
    capabilities = KindCapabilities(executors=("local",))

    def claims(self, run: RunRecord) -> bool:
        return False  # found by RunRecord.kind

    def settings_of(self, run: RunRecord) -> Any:
        return run.kind_settings

    def record_fields(self, session: RunSession) -> dict[str, Any]:
        return {"kind": self.name, "kind_settings": session.settings}

    def _refuse(self, run_id: str) -> UserInputError:
        return UserInputError(f"run {run_id} is a {self.name} run: {self.resume_words} `domainbench run --resume {run_id}`")

    def check(self, session: RunSession) -> None:
        raise UserInputError(f"{self.name} runs start with `{self.start_hint}`")

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


#: the kind of a run record no other kind claims (runs from before kinds were named)
DEFAULT_KIND = "corruption"


def register_kind(kind: RunKind, *, replace: bool = False) -> RunKind:
    """Add a run kind (a module calls this on import; see docs/extending.md)."""
    return RUN_KINDS.register(kind.name, kind, replace=replace)


def get_kind(name: str) -> RunKind:
    return RUN_KINDS.get(name)


def kind_of(run: RunRecord) -> RunKind:
    """The kind a stored run record is of: the one it names (``RunRecord.kind``), else the one that claims it
    (FMR: its settings are on the record), else the corruption kind."""
    if run.kind is not None:
        return RUN_KINDS.get(run.kind)
    claimed = [k for _, k in RUN_KINDS.items() if k.name != DEFAULT_KIND and k.claims(run)]
    if len(claimed) > 1:
        raise UserInputError(f"run {run.run_id} carries the settings of several run kinds "
                             f"({', '.join(k.name for k in claimed)}); start it again with one")
    return claimed[0] if claimed else RUN_KINDS.get(DEFAULT_KIND)


__all__ = ["DEFAULT_KIND", "RUN_KINDS", "ExecutorPart", "KindCapabilities", "Refusal", "RunKind", "RunSession",
           "UnknownRunKindError", "get_kind", "kind_of", "register_kind"]

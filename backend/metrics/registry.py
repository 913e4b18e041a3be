"""The metric registry: one declaration per metric, from which every table and export derives.

In the style of timm's ``_registry`` / lm-eval's ``Registry``: a metric is declared once, in a
module of :mod:`domainbench.metrics.defs` (a tuple ``METRICS`` of :class:`Metric`) or in a plug-in
package's module named by an entry point of the group ``domainbench.metrics`` (as corruptions plug in
through ``domainbench.corruptions``), and the CLI summary columns and its intervals, the CSV/JSON export
columns, the UI's tables, labels and glossary and ``domainbench metrics`` read it from here. Adding a
metric is one declaration (a new file) plus its test; nothing else lists metrics by hand.

A declaration says what a number *is* (name, display name, unit, which direction is better, a
one-line meaning), the sufficient statistics it needs from a stored unit (``needs``), how it is
computed and reduced (``field`` / ``compute`` at its level; ``mean_over_cells`` reduces a cell metric to
the model level) and which interval the statistics attach to it (``"wilson"`` from its ``counts``,
``"smoothed"`` (``stats.smoothed``), ``"bootstrap"`` or ``None``): ``metrics.confidence`` gives an interval
to exactly the metrics that declare one. One number has one name; its older names are ``aliases``
(deprecated: they still resolve, in ``metric()`` and wherever a name is read back).
"""

from __future__ import annotations

import fnmatch
import importlib
import itertools
import pkgutil
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from importlib.metadata import entry_points
from types import ModuleType
from typing import TYPE_CHECKING, Any, Literal, get_args

if TYPE_CHECKING:
    from domainbench.records.report import RunReport, SummaryRow
    from domainbench.records.results import ModelSummary

#: what a metric's number describes, from the finest grain up
Level = Literal["cell", "corruption", "image", "model", "fmr", "clip"]
#: the scale a number lives on
Unit = Literal["fraction", "ratio", "correlation", "count", "flag", "threat", "cosine", "distance", "percent", "steps",
               "index", "decibel", "nats"]
Direction = Literal["higher", "lower"]
Interval = Literal["wilson", "smoothed", "bootstrap"]

#: the entry-point group a package declares its metrics under (the entry point names a module with ``METRICS``,
#: a Metric, a list of them or a callable returning them)
ENTRY_POINT_GROUP = "domainbench.metrics"
#: the levels a plug-in metric may have: computed from a cell's sums, or reduced from them to the model
PLUGIN_LEVELS = ("cell", "model")

LEVELS: tuple[str, ...] = get_args(Level)
UNITS: tuple[str, ...] = get_args(Unit)

#: what a metric's unit means for a reader, said after its meaning in ``Metric.help`` (none: the meaning says it)
UNIT_NOTES = {
    "ratio": "A ratio to the baseline model: 1.0 = as robust as the baseline.",
    "correlation": "A correlation, from −1 to 1.",
    "decibel": "In decibels.",
    "nats": "In nats.",
}
#: a rate (``percent``): how the pages and the files write it
PERCENT_NOTE = "A share from 0 to 1, shown in % (export files keep the fraction)."
FRACTION_NOTE = "A fraction from 0 to 1."
DIRECTION_NOTES = {"higher": "Higher is better.", "lower": "Lower is better.", None: "Neither higher nor lower is better."}


class MetricRegistryError(ValueError):
    """A metric declaration that contradicts the registry (a duplicate name, an unknown unit, …)."""


@dataclass(frozen=True)
class Metric:
    #: stable machine name: the export column and the key of ``domainbench metrics --format json``
    name: str
    #: what people call it (UI glossary, chart axes, the Compare page)
    display: str
    unit: Unit
    #: which way is better; None where neither is (a count, a flag)
    direction: Direction | None
    #: one line in plain words
    meaning: str
    level: Level
    #: what it needs from a stored unit (record fields)
    needs: tuple[str, ...]
    #: how it is combined from its parts (shards, cells, corruptions)
    aggregation: str
    #: the confidence interval the statistics attach to it; None: none
    interval: Interval | None = None
    #: position among the metrics of its level (export columns and tables follow it; gaps leave room)
    order: int = 1000
    #: header in the CLI's summary table (None: not a CLI summary column)
    cli_header: str | None = None
    #: header in the UI's tables (default: the display name)
    ui_header: str | None = None
    #: shown ×100 in the CLI and UI summaries
    percent: bool = False
    #: decimals the CLI shows (None: one for a percent, three otherwise)
    decimals: int | None = None
    #: what the footer under the CLI's table says of the column ("= ..." for a formula); consecutive
    #: columns with the same note share it (``column_notes``); None: the column needs no note
    cli_note: str | None = None
    #: the attribute holding the value on its level's report object (CellSummary, SummaryRow, StabilityMean, …)
    field: str | None = None
    #: False: only runs that produce it have it (a generative model's answers, ``--breaking-point``), so it is an
    #: optional export column, outside the fixed columns and tables
    always: bool = True
    #: its value where no stored field holds it: a cell metric's ``compute(cell, threat)`` from the CellSummary and
    #: its ThreatCell; a model metric's ``compute(report, model)`` from the RunReport and the model's ModelSummary
    #: (``mean_over_cells`` builds the usual reduction); ``summary_rows`` puts a model metric's value on its row
    compute: Callable[[Any, Any], Any] | None = None
    #: for ``interval="wilson"`` on a cell metric: ``counts(cell, threat) -> (successes, trials)`` or None where
    #: the metric does not apply; the interval is the Wilson score interval of those counts
    counts: Callable[[Any, Any], tuple[int, int] | None] | None = None
    #: the number's older names (deprecated): ``metric()``, the registry and ``canonical_name`` resolve them
    aliases: tuple[str, ...] = ()
    #: position of its ``_ci_low``/``_ci_high`` export columns among the interval columns (default: ``order``)
    interval_order: int | None = None

    @property
    def table_header(self) -> str:
        return self.ui_header or self.display

    @property
    def help(self) -> str:
        """The metric in one plain paragraph: its meaning, its unit and which direction is better.

        The one text every reader gets: the UI's column hovers, selectors, captions and glossary, and
        ``domainbench metrics`` (its table and its JSON ``help``) all show exactly this."""
        unit = PERCENT_NOTE if self.percent else FRACTION_NOTE if self.unit == "fraction" else UNIT_NOTES.get(self.unit)
        parts = [f"{self.meaning[0].upper()}{self.meaning[1:]}.", unit, DIRECTION_NOTES[self.direction]]
        return " ".join(p for p in parts if p)

    @property
    def lower_is_better(self) -> bool:
        return self.direction == "lower"

    def read(self, source: Any, threat: Any = None) -> Any:
        """The metric's value on a report object of its level (for a cell: the cell and its threat; for a
        model: its ``summary_rows`` row, which holds a computed model metric under the metric's name)."""
        if self.field is not None and (self.compute is None or self.level == "model"):
            return getattr(source, self.field)
        if self.level == "model" and self.compute is not None:
            extra = getattr(source, "model_extra", None) or {}
            if self.name not in extra:
                raise MetricRegistryError(f"metric {self.name!r} is computed: read it from summary_rows(report), "
                                          "not from report.table()")
            return extra[self.name]
        if self.compute is not None:
            return self.compute(source, threat)
        raise MetricRegistryError(f"metric {self.name!r} declares neither a field nor a compute function")

    def describe(self) -> dict[str, Any]:
        """The declaration as plain data (``domainbench metrics --format json``)."""
        return {"name": self.name, "display": self.display, "unit": self.unit, "direction": self.direction,
                "meaning": self.meaning, "level": self.level, "needs": list(self.needs),
                "aggregation": self.aggregation, "interval": self.interval, "help": self.help,
                **({"deprecated_names": list(self.aliases)} if self.aliases else {})}

    def check(self) -> None:
        if not self.name.isidentifier():
            raise MetricRegistryError(f"metric name {self.name!r} must be an identifier (it is a column name)")
        if self.level not in LEVELS:
            raise MetricRegistryError(f"metric {self.name!r}: level {self.level!r} is not one of {', '.join(LEVELS)}")
        if self.unit not in UNITS:
            raise MetricRegistryError(f"metric {self.name!r}: unit {self.unit!r} is not one of {', '.join(UNITS)}")
        if self.direction not in ("higher", "lower", None):
            raise MetricRegistryError(f"metric {self.name!r}: direction must be 'higher', 'lower' or None")
        if self.interval not in ("wilson", "smoothed", "bootstrap", None):
            raise MetricRegistryError(f"metric {self.name!r}: interval must be 'wilson', 'smoothed', 'bootstrap' or None")
        if self.interval == "wilson" and self.level == "cell" and self.counts is None:
            raise MetricRegistryError(f"metric {self.name!r}: a Wilson interval needs counts(cell, threat) -> "
                                      "(successes, trials)")
        if self.interval == "smoothed" and self.level == "cell" and (self.field != "accuracy" or self.compute):
            # the smoothed interval is drawn from the per-image correctness bits of balanced accuracy only
            raise MetricRegistryError(f"metric {self.name!r}: interval 'smoothed' is computed for a cell's balanced "
                                      "accuracy only; declare 'wilson' with counts, or None")
        if any(not a.isidentifier() or a == self.name for a in self.aliases):
            raise MetricRegistryError(f"metric {self.name!r}: aliases must be identifiers other than its name")
        if not self.meaning or "\n" in self.meaning:
            raise MetricRegistryError(f"metric {self.name!r}: meaning must be one line")
        if self.percent and self.ui_header and not self.ui_header.endswith(" %"):
            # a page shows a rate in %, and its header (and the table's download) says so
            raise MetricRegistryError(f"metric {self.name!r} is shown in %: its ui_header must end in ' %'")
        # an optional metric's value may come from where it is produced (e.g. the units' generative answers)
        if self.field is None and self.compute is None and self.always:
            raise MetricRegistryError(f"metric {self.name!r} declares neither a field nor a compute function")


class Registry:
    """Metrics by name, in (level, order) order; a name is declared once."""

    def __init__(self, metrics: Iterable[Metric] = ()) -> None:
        self._metrics: dict[str, Metric] = {}
        for m in metrics:
            self.register(m)

    def _aliases(self) -> dict[str, str]:
        return {a: m.name for m in self._metrics.values() for a in m.aliases}

    def register(self, metric: Metric, origin: str = "") -> Metric:
        metric.check()
        taken = self._metrics.keys() | self._aliases().keys()
        for name in (metric.name, *metric.aliases):
            if name in taken:
                where = f" ({origin})" if origin else ""
                raise MetricRegistryError(f"metric name {name!r}{where} is declared twice; give the new one another name")
        self._metrics[metric.name] = metric
        return metric

    def canonical(self, name: str) -> str:
        """The registry name of ``name`` (itself, or the metric a deprecated alias names); KeyError-free: an
        unknown name comes back as it is."""
        return name if name in self._metrics else self._aliases().get(name, name)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.canonical(name) in self._metrics

    def __len__(self) -> int:
        return len(self._metrics)

    def get(self, name: str) -> Metric:
        try:
            return self._metrics[self.canonical(name)]
        except KeyError:
            raise MetricRegistryError(f"no metric {name!r}; `domainbench metrics` lists them") from None

    def all(self) -> list[Metric]:
        return sorted(self._metrics.values(), key=lambda m: (LEVELS.index(m.level), m.order, m.name))

    def of_level(self, level: Level, always: bool = True) -> list[Metric]:
        """The metrics of a level, in order; ``always``: only those every run has (the fixed columns)."""
        return [m for m in self.all() if m.level == level and (m.always or not always)]

    def find(self, pattern: str = "*") -> list[Metric]:
        """Metrics whose name, display name or a deprecated alias matches a shell wildcard (case-insensitive)."""
        p = pattern.lower()
        return [m for m in self.all()
                if any(fnmatch.fnmatchcase(n.lower(), p) for n in (m.name, m.display, *m.aliases))]


def format_value(metric: Metric, value: Any) -> str:
    """A metric's value as the CLI's tables show it: ×100 for a percent, its decimals, "n/a" for None."""
    if value is None:
        return "n/a"
    if not isinstance(value, float):
        return str(value)
    shown = 100 * value if metric.percent else value
    return f"{shown:.{metric.decimals if metric.decimals is not None else (1 if metric.percent else 3)}f}"


def column_notes(metrics: Iterable[Metric], label: Callable[[Metric], str | None]) -> str:
    """The footer under a table of ``metrics``: each ``cli_note`` after the ``label`` of its columns,
    e.g. ``clean%, corr%: balanced accuracy ...; FMR = PA / SA × 100``."""
    noted = [m for m in metrics if m.cli_note]
    parts = []
    for note, group in itertools.groupby(noted, key=lambda m: m.cli_note):
        names = ", ".join(str(label(m)) for m in group)
        parts.append(f"{names} {note}" if str(note).startswith("= ") else f"{names}: {note}")
    return "; ".join(parts)


def declared_metrics() -> list[Metric]:
    """Every ``METRICS`` tuple of the modules of :mod:`domainbench.metrics.defs`, in module-name order."""
    from domainbench.metrics import defs

    found: list[Metric] = []
    for info in sorted(pkgutil.iter_modules(defs.__path__), key=lambda i: i.name):
        module = importlib.import_module(f"{defs.__name__}.{info.name}")
        found.extend(getattr(module, "METRICS", ()))
    return found


def _adopt(obj: Any, origin: str) -> list[Metric]:
    """The metrics a plug-in object gives: a module's ``METRICS``, a Metric, a list of them or a callable."""
    if isinstance(obj, ModuleType):
        return [m for item in getattr(obj, "METRICS", None) or () for m in _adopt(item, origin)]
    if isinstance(obj, Metric):
        return [obj]
    if isinstance(obj, (list, tuple)):
        return [m for item in obj for m in _adopt(item, origin)]
    if callable(obj):
        return _adopt(obj(), origin)
    raise MetricRegistryError(f"{origin} gave {type(obj).__name__}; expected a module with METRICS, a Metric, "
                              "a list of them or a callable returning them")


def cell_statistics() -> tuple[str, ...]:
    """What a plug-in metric may declare it ``needs``: the sufficient statistics a cell holds, summed over its
    units' shards (the fields of ``CellSummary``), and ``threat`` (its PD threat cell, pooled over the shards)."""
    from domainbench.records.results import CellSummary

    return (*(f for f in CellSummary.model_fields if f not in ("corruption", "severity")), "threat")


def plugin_metrics() -> list[tuple[str, Metric]]:
    """(origin, metric) of every entry point of the group ``domainbench.metrics``, in entry-point name order."""
    found: list[tuple[str, Metric]] = []
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        dist = getattr(getattr(ep, "dist", None), "name", None)
        origin = f"metric plug-in {ep.name!r} ({ep.value}{f', from {dist}' if dist else ''})"
        try:
            loaded = _adopt(ep.load(), origin)
        except MetricRegistryError:
            raise
        except Exception as exc:  # a broken plug-in must say which one it is
            raise MetricRegistryError(f"could not load {origin}: {type(exc).__name__}: {exc}; fix or uninstall that "
                                      "package") from exc
        statistics = cell_statistics()
        for m in loaded:
            if m.level not in PLUGIN_LEVELS:
                # the other levels' values live in fixed records (stability, FMR) a plug-in cannot extend
                raise MetricRegistryError(f"{origin}: metric {m.name!r} has level {m.level!r}; a plug-in metric is a "
                                          f"{' or a '.join(PLUGIN_LEVELS)} metric")
            unknown = [n for n in m.needs if n not in statistics]
            if unknown or not m.needs:
                raise MetricRegistryError(f"{origin}: metric {m.name!r} needs {', '.join(map(repr, unknown)) or 'nothing'}; "
                                          f"its needs name the cell statistics it reads: {', '.join(statistics)}")
            found.append((origin, m))
    return found


@lru_cache(maxsize=1)
def registry() -> Registry:
    """The registry of the declared metrics, then the plug-ins' (built on first use, never on import)."""
    reg = Registry(declared_metrics())
    for origin, m in plugin_metrics():
        reg.register(m, origin)
    return reg


def reset_plugins() -> None:
    """Read the declarations and the entry points again on next use (tests, after installing a plug-in)."""
    registry.cache_clear()


def canonical_name(name: str) -> str:
    """The registry name of a metric name or of one of its deprecated aliases (warned about); other names as given."""
    canonical = registry().canonical(name)
    if canonical != name:
        warnings.warn(f"metric name {name!r} is deprecated; use {canonical!r}", DeprecationWarning, stacklevel=2)
    return canonical


def metric(name: str) -> Metric:
    return registry().get(name)


def metrics_of(level: Level, always: bool = True) -> list[Metric]:
    return registry().of_level(level, always)


def summary_metrics() -> list[Metric]:
    """The per-model summary table's metrics (``show``, the run page, ``Run.summary``): the model metrics with a
    CLI header, in the registry's order."""
    return [m for m in metrics_of("model") if m.cli_header]


def interval_metrics(level: Level) -> list[Metric]:
    """The metrics of a level that declare an interval (``metrics.confidence`` computes exactly these), in the
    order of their interval columns (``interval_order``, else ``order``)."""
    declared = [m for m in metrics_of(level, always=False) if m.interval]
    return sorted(declared, key=lambda m: m.order if m.interval_order is None else m.interval_order)


def summary_rows(report: RunReport) -> list[SummaryRow]:
    """The report's summary rows (``RunReport.table``) with each computed model metric's value on its row (the
    stored ones are fields of the row already): what ``show``, the UI's summary and ``Run.summary`` read."""
    computed = [m for m in metrics_of("model", always=False) if m.compute is not None and m.field is None]
    rows = report.table()
    if not computed:
        return rows
    summaries = {s.model: s for s in report.classification.models}
    return [row.model_copy(update={m.name: m.compute(report, summaries[row.model]) for m in computed})
            for row in rows]


def mean_over_cells(cell_metric: str) -> Callable[[RunReport, ModelSummary], float | None]:
    """A model metric's reduction: the mean of a cell metric over the model's common corruption cells (the cells
    every model has, as the mean corrupted accuracy averages), values that do not apply left out; None without any."""

    def reduce(report: RunReport, model: ModelSummary) -> float | None:
        source = metric(cell_metric)
        values = [v for c in model.cells if c.in_common
                  if (v := source.read(c, report.threat_of(c.corruption, c.severity))) is not None]
        return float(sum(values) / len(values)) if values else None

    reduce.__qualname__ = f"mean_over_cells({cell_metric!r})"
    return reduce

"""The metric registry: one declaration per metric, from which every table and export derives.

In the style of timm's ``_registry`` / lm-eval's ``Registry``: a metric is declared once, in a
module of :mod:`domainbench.metrics.defs` (a tuple ``METRICS`` of :class:`Metric`), and the CLI
summary columns, the CSV/JSON export columns, the UI's table labels and glossary and
``domainbench metrics`` read it from here. Adding a metric is one declaration (in a new file of
``defs/`` or beside its family) plus its test; nothing else lists metrics by hand.

A declaration says what a number *is* (name, display name, unit, which direction is better, a
one-line meaning), what it needs from a stored unit, how it aggregates, and which interval the
statistics attach to it (``"wilson"``, ``"smoothed"`` (``stats.smoothed``), ``"bootstrap"`` or ``None``).
"""

from __future__ import annotations

import fnmatch
import importlib
import itertools
import pkgutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal, get_args

#: what a metric's number describes, from the finest grain up
Level = Literal["cell", "corruption", "image", "model", "fmr"]
#: the scale a number lives on
Unit = Literal["fraction", "ratio", "correlation", "count", "flag", "threat", "cosine", "distance", "percent", "steps",
               "index", "decibel", "nats"]
Direction = Literal["higher", "lower"]
Interval = Literal["wilson", "smoothed", "bootstrap"]

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
    #: for a cell metric not stored on the cell: ``compute(cell, threat)`` from the CellSummary and its ThreatCell
    compute: Callable[[Any, Any], Any] | None = None

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
        """The metric's value on a report object of its level (for a cell: the cell and its threat)."""
        if self.compute is not None:
            return self.compute(source, threat)
        if self.field is None:
            raise MetricRegistryError(f"metric {self.name!r} declares neither a field nor a compute function")
        return getattr(source, self.field)

    def describe(self) -> dict[str, Any]:
        """The declaration as plain data (``domainbench metrics --format json``)."""
        return {"name": self.name, "display": self.display, "unit": self.unit, "direction": self.direction,
                "meaning": self.meaning, "level": self.level, "needs": list(self.needs),
                "aggregation": self.aggregation, "interval": self.interval, "help": self.help}

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

    def register(self, metric: Metric) -> Metric:
        metric.check()
        if metric.name in self._metrics:
            raise MetricRegistryError(f"metric {metric.name!r} is declared twice; give the new one another name")
        self._metrics[metric.name] = metric
        return metric

    def __contains__(self, name: object) -> bool:
        return name in self._metrics

    def __len__(self) -> int:
        return len(self._metrics)

    def get(self, name: str) -> Metric:
        try:
            return self._metrics[name]
        except KeyError:
            raise MetricRegistryError(f"no metric {name!r}; `domainbench metrics` lists them") from None

    def all(self) -> list[Metric]:
        return sorted(self._metrics.values(), key=lambda m: (LEVELS.index(m.level), m.order, m.name))

    def of_level(self, level: Level, always: bool = True) -> list[Metric]:
        """The metrics of a level, in order; ``always``: only those every run has (the fixed columns)."""
        return [m for m in self.all() if m.level == level and (m.always or not always)]

    def find(self, pattern: str = "*") -> list[Metric]:
        """Metrics whose name or display name matches a shell wildcard (case-insensitive)."""
        p = pattern.lower()
        return [m for m in self.all() if fnmatch.fnmatchcase(m.name.lower(), p) or fnmatch.fnmatchcase(m.display.lower(), p)]


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


@lru_cache(maxsize=1)
def registry() -> Registry:
    """The registry of the declared metrics (built on first use, never on import)."""
    return Registry(declared_metrics())


def metric(name: str) -> Metric:
    return registry().get(name)


def metrics_of(level: Level, always: bool = True) -> list[Metric]:
    return registry().of_level(level, always)


def summary_metrics() -> list[Metric]:
    """The per-model summary table's metrics (``show``, the run page, ``Run.summary``): the model metrics with a
    CLI header, in the registry's order."""
    return [m for m in metrics_of("model") if m.cli_header]

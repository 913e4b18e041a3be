"""Requirements on a run's numbers, for a CI gate (``domainbench check``): parsed, then held against a report.

A requirement is one line: ``[model=MODEL] METRIC[@CELL] OP NUMBER``, for instance ``mce <= 1.0``,
``mean_corrupted_accuracy >= 0.70``, ``label_flip_probability@motion_blur:3 <= 0.10`` or
``model=open_clip:ViT-B-32 clean_accuracy > 0.8``. ``METRIC`` is a name of the metric registry (or the unique
registry name it ends, so ``corrupted_accuracy`` reads ``mean_corrupted_accuracy``); its level says what ``@CELL``
must be: nothing for a model metric, ``@CORRUPTION`` for a per-corruption or stability metric,
``@CORRUPTION:SEVERITY`` for a cell metric (``@clean`` for the clean pass; a cell with one severity, such as
``shift:NAME``, may leave the severity out). ``OP`` is ``<=``, ``>=``, ``<`` or ``>``; fractions are written as
fractions (0.70, not 70). Without ``model=`` a requirement holds for every model it is checked on.

Checked on the point estimate, or ``confident``ly on the end of the metric's interval that is worse for the
requirement (the lower end for ``>=``, the upper end for ``<=``): then it holds only when the data show it at the
interval's confidence level. A number the run does not have (``n/a``: unlabelled accuracy, an undefined rCE, no
interval) never holds: a gate must not pass on what was not measured.
"""

from __future__ import annotations

import difflib
import operator
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from domainbench.metrics.registry import Metric, MetricRegistryError, registry

if TYPE_CHECKING:
    from domainbench.metrics.confidence import RunIntervals
    from domainbench.records.report import RunReport

#: comparison operators, longest first so ``<=`` is not read as ``<``
OPERATORS: dict[str, Callable[[float, float], bool]] = {"<=": operator.le, ">=": operator.ge, "<": operator.lt,
                                                        ">": operator.gt}
#: levels a requirement can name, and what its ``@`` part must be
_CELL_FORMS = {"model": "", "fmr": "", "corruption": "@CORRUPTION", "image": "@CORRUPTION",
               "cell": "@CORRUPTION:SEVERITY"}
CLEAN = "clean"

_EXPR = re.compile(
    r"""^\s*(?:model=(?P<model>"[^"]+"|'[^']+'|\S+)\s+)?   # optional scope: model=NAME (quoted when it has spaces)
    (?P<metric>[A-Za-z_][A-Za-z0-9_]*)
    (?:@(?P<cell>[^<>=]+?))?
    \s*(?P<op><=|>=|<|>)\s*
    (?P<value>\S+)\s*$""", re.VERBOSE)

SYNTAX = "[model=MODEL] METRIC[@CORRUPTION[:SEVERITY]] (<=|>=|<|>) NUMBER, e.g. 'mce <= 1.0'"


class RequirementError(ValueError):
    """A requirement that cannot be read or does not fit the run: bad input, never a failed check."""


@dataclass(frozen=True)
class Requirement:
    text: str
    metric: Metric
    op: str
    threshold: float
    model: str | None = None
    corruption: str | None = None
    severity: int | None = None

    @property
    def target(self) -> str:
        """The metric and where it is read, as written back to the user: ``label_flip_probability@motion_blur:3``."""
        if self.corruption is None:
            return self.metric.name
        return f"{self.metric.name}@{self.corruption}" + ("" if self.severity is None else f":{self.severity}")

    @property
    def wants_high(self) -> bool:
        return self.op in (">=", ">")


@dataclass(frozen=True)
class Outcome:
    """One requirement on one model: what was read, what was compared and whether it holds."""

    requirement: Requirement
    model: str
    #: the point estimate (None: the run has no such number)
    value: float | None
    #: the metric's interval at the check's confidence (None: none, or not asked for)
    interval: tuple[float, float] | None
    #: the number compared with the threshold: the value, or with ``confident`` the interval's worse end
    compared: float | None
    holds: bool
    #: how far the compared number is on the right side of the threshold (negative: by how much it misses)
    margin: float | None
    #: why it does not hold when no number could be compared
    note: str = ""


def resolve_metric(name: str) -> Metric:
    """The registry's metric of ``name``, or of the one registry name ending in ``_name``; else a helpful error."""
    reg = registry()
    if name in reg:
        return reg.get(name)
    names = [m.name for m in reg.all()]
    ending = [n for n in names if n.endswith("_" + name)]
    if len(ending) == 1:
        return reg.get(ending[0])
    supported = [n for n in names if reg.get(n).level in _CELL_FORMS]
    if len(ending) > 1:
        raise RequirementError(f"metric {name!r} is ambiguous: {', '.join(ending)}; write the full name")
    close = difflib.get_close_matches(name, supported, n=3, cutoff=0.6)
    hint = f"did you mean {', '.join(close)}? " if close else ""
    raise RequirementError(f"no metric {name!r}; {hint}`domainbench metrics` lists them")


def parse_requirement(text: str) -> Requirement:
    """One requirement, checked against the registry (the run is checked by :func:`check_requirements`)."""
    found = _EXPR.match(text)
    if found is None:
        raise RequirementError(f"--require {text!r} is not a requirement; write {SYNTAX}")
    try:
        metric = resolve_metric(found["metric"])
    except MetricRegistryError as e:  # a registry that refuses the name in its own words
        raise RequirementError(str(e)) from None
    if metric.level not in _CELL_FORMS:
        raise RequirementError(f"--require {text!r}: metric {metric.name!r} ({metric.level} level) cannot be checked")
    if metric.unit == "flag":
        raise RequirementError(f"--require {text!r}: {metric.name!r} is a flag, not a number to compare")
    try:
        threshold = float(found["value"])
    except ValueError:
        raise RequirementError(f"--require {text!r}: {found['value']!r} is not a number; write {SYNTAX}") from None
    if threshold != threshold:  # NaN never compares
        raise RequirementError(f"--require {text!r}: the threshold must be a number, not NaN")
    if metric.unit == "fraction" and not 0 <= threshold <= 1:
        hint = f"; write {threshold / 100:g}, not {threshold:g}" if 1 < threshold <= 100 else ""
        raise RequirementError(f"--require {text!r}: {metric.name} is a fraction from 0 to 1{hint}")
    model = found["model"]
    if model is not None and model[0] in "\"'":
        model = model[1:-1]
    cell = found["cell"].strip() if found["cell"] else None
    form = _CELL_FORMS[metric.level]
    corruption, severity = None, None
    if cell is None and form:
        raise RequirementError(f"--require {text!r}: {metric.name} is read per {metric.level}; write "
                               f"{metric.name}{form}")
    if cell is not None and not form:
        raise RequirementError(f"--require {text!r}: {metric.name} is one number per model; leave out @{cell}")
    if cell is not None:
        corruption, _, sev = cell.rpartition(":")
        if corruption and sev.isdigit():
            severity = int(sev)
        else:
            corruption = cell
        if metric.level != "cell" and severity is not None:
            raise RequirementError(f"--require {text!r}: {metric.name} is one number per corruption; write "
                                   f"{metric.name}@{corruption}")
        if corruption == CLEAN:
            severity = 0
    return Requirement(text=text.strip(), metric=metric, op=found["op"], threshold=threshold, model=model,
                       corruption=corruption, severity=severity)


def parse_requirements(texts: Sequence[str]) -> list[Requirement]:
    if not texts:
        raise RequirementError(f"check needs at least one --require {SYNTAX}")
    return [parse_requirement(t) for t in texts]


def _read(req: Requirement, report: RunReport, model: str,
          intervals: RunIntervals | None) -> tuple[bool, Any, tuple[float, float] | None]:
    """(the model has the number's place, the value, its interval) of one requirement on one model."""
    metric, level = req.metric, req.metric.level
    if level == "model":
        row = next(r for r in report.table() if r.model == model)
        iv = intervals.model(model) if intervals is not None else None
        return True, metric.read(row), getattr(iv, metric.name, None)
    if level == "fmr":
        if report.fmr is None:
            return False, None, None
        entry = next((m for m in report.fmr.models if m.model == model), None)
        iv = next((f for f in intervals.fmr if f.model == model), None) if intervals is not None else None
        return entry is not None, None if entry is None else metric.read(entry), getattr(iv, metric.name, None)
    if level == "corruption":
        values = getattr(report.model(model), metric.name, None)
        if not isinstance(values, dict) or req.corruption not in values:
            return False, None, None
        return True, values[req.corruption], None
    if level == "image":
        entry = next((s for s in report.stability if s.model == model and s.corruption == req.corruption), None)
        iv = (next((s for s in intervals.stability if s.model == model and s.corruption == req.corruption), None)
              if intervals is not None else None)
        return entry is not None, None if entry is None else metric.read(entry), getattr(iv, metric.name, None)
    cells = [c for c in report.cells_of(model) if c.corruption == req.corruption
             and (req.severity is None or c.severity == req.severity)]
    if len(cells) != 1:
        return False, None, None
    c = cells[0]
    iv = intervals.cell(model, c.corruption, c.severity) if intervals is not None else None
    return True, metric.read(c, report.threat_of(c.corruption, c.severity)), getattr(iv, metric.name, None)


def _check_place(req: Requirement, report: RunReport) -> None:
    """Bad input when no model of the run has the place a requirement names (a typo in a corruption, a severity
    the plan does not have, a severity left out where the corruption has several)."""
    level = req.metric.level
    if level in ("model",):
        return
    if level == "fmr":
        if report.fmr is None:
            raise RequirementError(f"--require {req.text!r}: {req.metric.name} is an FMR metric and run "
                                   f"{report.run_id} is not an FMR run")
        return
    if level == "image":
        known = sorted({s.corruption for s in report.stability})
        if req.corruption not in known:
            raise RequirementError(f"--require {req.text!r}: run {report.run_id} has no stability results for "
                                   f"{req.corruption!r}" + (f"; it has {', '.join(known)}" if known else ""))
        return
    cells = sorted({(c.corruption, c.severity) for _, c in report.all_cells()})
    if level == "corruption":
        names = sorted({c for c, s in cells if c != CLEAN})
        if req.corruption not in names:
            raise RequirementError(f"--require {req.text!r}: run {report.run_id} has no corruption "
                                   f"{req.corruption!r}; it has {', '.join(names)}")
        return
    matching = [(c, s) for c, s in cells if c == req.corruption and (req.severity is None or s == req.severity)]
    if len(matching) == 1:
        return
    listed = ", ".join(CLEAN if c == CLEAN else f"{c}:{s}" for c, s in cells)
    if not matching:
        raise RequirementError(f"--require {req.text!r}: run {report.run_id} has no cell "
                               f"{req.corruption}" + ("" if req.severity is None else f":{req.severity}")
                               + f"; its cells are {listed}")
    sevs = ", ".join(str(s) for _, s in matching)
    raise RequirementError(f"--require {req.text!r}: {req.corruption} has severities {sevs}; name one, e.g. "
                           f"{req.metric.name}@{req.corruption}:{matching[0][1]}")


def validate_requirements(requirements: Sequence[Requirement], report: RunReport, *, confident: bool = False,
                          models: Sequence[str] | None = None) -> None:
    """:class:`RequirementError` for a model or place the run does not have, or a metric without an interval checked
    ``confident``ly: bad input, found before any interval is drawn."""
    names = report.model_names
    for m in [*(models or []), *(r.model for r in requirements if r.model is not None)]:
        if m not in names:
            raise RequirementError(f"model {m!r} is not in run {report.run_id}; its models are {', '.join(names)}")
    for req in requirements:
        _check_place(req, report)
        if confident and req.metric.interval is None:
            raise RequirementError(f"--require {req.text!r}: {req.metric.name} has no interval, so --confident cannot "
                                   "check it; check it without --confident in a separate call")


def check_requirements(requirements: Sequence[Requirement], report: RunReport, intervals: RunIntervals | None = None,
                       *, confident: bool = False, models: Sequence[str] | None = None) -> list[Outcome]:
    """Every requirement on every model it concerns (its ``model=``, else ``models``, else all of the run's).

    ``confident``: compare the interval's end that is worse for the requirement (``intervals`` needed).
    Raises :class:`RequirementError` as :func:`validate_requirements` does (bad input, not a failure)."""
    validate_requirements(requirements, report, confident=confident, models=models)
    if confident and intervals is None:
        raise ValueError("confident checks need the run's intervals")
    out = []
    for req in requirements:
        for model in [req.model] if req.model is not None else list(models or report.model_names):
            present, value, iv = _read(req, report, model, intervals)
            out.append(_judge(req, model, present, value, iv, confident))
    return out


def _judge(req: Requirement, model: str, present: bool, value: Any, iv: tuple[float, float] | None,
           confident: bool) -> Outcome:
    number = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    if number is not None and number != number:
        number = None
    if not present:
        return Outcome(req, model, None, iv, None, False, None, "the model has no such cell")
    if number is None:
        return Outcome(req, model, None, iv, None, False, None, "n/a: the run has no such number")
    if confident:
        if iv is None:
            return Outcome(req, model, number, None, None, False, None, "no interval for this number")
        compared = iv[0] if req.wants_high else iv[1]
    else:
        compared = number
    holds = OPERATORS[req.op](compared, req.threshold)
    margin = compared - req.threshold if req.wants_high else req.threshold - compared
    return Outcome(req, model, number, iv, compared, holds, margin)

"""One unit per quantity on every page, and every metric's meaning where its number is.

Units: a rate (accuracy, flip probability) is a percentage in a column whose name ends in "%"; a ratio to
the baseline (CE, rCE, FR and their means) is a ratio with "lower is better" beside it. A table downloads as
it is shown (``exports.table``): the same numbers under the same names, so a CSV column holding a rate says
"%". The run's export files (``domainbench export`` and the Export tab, one file) keep fractions under the
registry's names; their JSON names each column's unit (``units``).

Meanings: a column named for a metric of the registry hovers to the metric's ``help`` (``metric_columns``);
the selectors and captions that name metrics show the same paragraph (``options_help``), and so does
``domainbench metrics``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import cache
from typing import Any

import pandas as pd

from domainbench.metrics.registry import Metric, metrics_of

#: said beside every ratio to the baseline
RATIO_NOTE = "ratio to the baseline: 1.0 = as robust as the baseline, lower is better"
#: which metric a header names when two levels share it ("rCE": the model's mean before the per-corruption value)
HEADER_LEVELS = ("model", "fmr", "cell", "image", "corruption")


@cache
def metric_columns() -> dict[str, Metric]:
    """Column name -> the metric it holds, for every name the pages give a metric's column:

    - its UI header (``Metric.table_header``: "clean acc %", "mCE", "SA %", "SSIM", ...), except a count's
      (a count's display name, "images", is what the pages call other counts too);
    - a cell metric's machine name (the Export tab shows the export's columns: ``balanced_accuracy``, ...);
    - a per-corruption metric's field (the per-corruption tables' ``ce``, ``rce``, ``fr``).
    """
    out: dict[str, Metric] = {}
    for level in HEADER_LEVELS:
        for m in metrics_of(level, always=False):
            names = [m.table_header] if m.unit != "count" else []
            names += [m.name] if level == "cell" else [m.field] if level == "corruption" and m.field else []
            for name in names:
                out.setdefault(name, m)
    return out


def column_help(columns: Iterable[Any], column_config: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``column_config`` with the registry's help on every column named for a metric that has no help of its own."""
    config = dict(column_config or {})
    known = metric_columns()
    for c in columns:
        m = known.get(c) if isinstance(c, str) else None
        given = config.get(c, {})
        if m is None or given is None:  # not a metric, or hidden
            continue
        given = {"label": given} if isinstance(given, str) else dict(given)
        if not given.get("help"):
            given["help"] = m.help
        config[c] = given
    return config


def options_help(metrics: Iterable[Metric]) -> str:
    """A selector's help: each of its metrics' display name and help (Markdown)."""
    from domainbench.frontend.ui import md_escape

    return "\n\n".join(f"**{md_escape(m.display)}**: {md_escape(m.help)}" for m in metrics)


def metric_line(m: Metric) -> str:
    """The metric's help for a caption under what draws it, led by its name where the help does not say it."""
    if m.help.lower().startswith(m.display.lower()):
        return m.help
    name = m.display[0].upper() + m.display[1:] if m.display[:2].islower() else m.display  # "mCE" stays "mCE"
    return f"{name}: {m.help}"


def model_metric(field: str) -> Metric:
    """The model metric held in a report's ``SummaryRow.field`` (Compare's metric choices)."""
    return next(m for m in metrics_of("model") if m.field == field)


def rate_fields() -> set[str]:
    """The model-level fields that are rates (shown in %), from the metric registry."""
    return {m.field for m in metrics_of("model") if m.percent and m.field}


def ratio_fields() -> set[str]:
    return {m.field for m in metrics_of("model") if m.unit == "ratio" and m.field}


def as_percent(frame: pd.DataFrame, columns: Mapping[str, str]) -> pd.DataFrame:
    """``frame`` with each fraction column ``old`` shown as a percentage under the name ``new``, in place."""
    out = frame.copy()
    for old, new in columns.items():
        if old in out.columns:
            out[old] = 100.0 * out[old].astype("float64")
    return out.rename(columns=dict(columns))


def compare_percent_names() -> dict[str, str]:
    """Compare's per-run rate fields -> their column names in %."""
    return {f: f"{f} %" for f in sorted(rate_fields())}

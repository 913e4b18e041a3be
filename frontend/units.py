"""One unit per quantity on every page: a rate (accuracy, flip probability) as a percentage in a column named
"… %", a ratio to the baseline (CE, rCE, FR and their means) as a ratio with "lower is better" beside it.

The data layer and the downloads keep fractions (their column names say so); only what is drawn is scaled here.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from domainbench.metrics.registry import metrics_of

#: said beside every ratio to the baseline
RATIO_NOTE = "ratio to the baseline: 1.0 = as robust as the baseline, lower is better"
#: the per-corruption ratios (what mCE / rCE / mFR average) -> their meaning, for a column's hover
PER_CORRUPTION_RATIOS = {
    "ce": "corruption error relative to the baseline's; " + RATIO_NOTE,
    "rce": "relative corruption error (the drop from clean) relative to the baseline's; " + RATIO_NOTE,
    "fr": "flip rate relative to the baseline's; " + RATIO_NOTE,
}


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


def half_width(value: float | None, interval: tuple[float, float] | None) -> float | None:
    """Half the interval's width on the wider side (what "± x" states), None without an interval."""
    if value is None or interval is None or value != value:
        return None
    return max(value - interval[0], interval[1] - value)

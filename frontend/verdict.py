"""The answer first: the statistics' verdict sentences and intervals on a run page, cached per run state.

The sentences and intervals come from the statistics layer through the query module
(``query.comparison``, ``query.intervals``); this module only caches and draws them. A run whose units
hold no per-image outcomes (or one model, or no labels) gets no verdict, said in a line.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

from domainbench.report import RunReport
from domainbench.store import Store
from domainbench.frontend.exports import MISSING

log = logging.getLogger("domainbench.ui")


@st.cache_data(show_spinner="comparing the models image by image…", max_entries=32)
def verdicts(_store: Store, store_key: str, run_id: str, fingerprint: tuple[Any, ...]) -> tuple[list[str], str]:
    """(verdict sentences, why there are none)."""
    from domainbench import query
    from domainbench.frontend.cached import read_outcomes

    run = _store.get_run(run_id)
    if run is None or len(run.config.models) < 2:
        return [], "one model: there is nothing to compare it with"
    try:
        c = query.comparison(_store, [run_id], read=read_outcomes)
    except ValueError as e:  # unlabelled, or no per-image outcomes stored
        return [], str(e)
    except Exception as e:  # the statistics cannot use this run's data yet (a partial run): say so, draw the rest
        log.warning("verdict of run %s failed", run_id, exc_info=True)
        return [], f"the paired comparison failed on this run's stored data ({type(e).__name__})"
    return [v.sentence for v in c.verdicts], ""


@st.cache_data(show_spinner="computing 95 % intervals…", max_entries=32)
def run_intervals(_store: Store, store_key: str, _report: RunReport, run_id: str, baseline: str,
                  fingerprint: tuple[Any, ...]) -> Any:
    """The report's intervals (``metrics.confidence.RunIntervals``); None where they cannot be computed."""
    from domainbench import query
    from domainbench.frontend.cached import read_outcomes

    try:
        return query.intervals(_store, _report, read=read_outcomes)
    except Exception:  # no per-image outcomes stored (older runs), or partial data: the table shows values only
        log.info("intervals of run %s unavailable", run_id, exc_info=True)
        return None


def intervals(store: Store, store_key: str, report: RunReport, run_id: str, baseline: str,
              fingerprint: tuple[Any, ...]) -> dict[str, dict[str, tuple[float, float] | None]] | None:
    """Per model: metric -> (low, high) of the model-level numbers; None where they cannot be computed."""
    ri = run_intervals(store, store_key, report, run_id, baseline, fingerprint)
    if ri is None:
        return None
    return {m.model: {"clean": m.clean_accuracy, "corrupted": m.mean_corrupted_accuracy, "mce": m.mce,
                      "rce": m.rce, "mfr": m.mfr} for m in ri.models}


def cell_bands(ri: Any, metric: str = "balanced_accuracy") -> dict[tuple[str, str, int], tuple[float, float] | None]:
    """(model, corruption, severity) -> the cell's 95 % interval of ``metric`` (a ``CellIntervals`` field),
    the clean pass under ("clean", 0); empty without intervals."""
    if ri is None:
        return {}
    return {(c.model, c.corruption, c.severity): getattr(c, metric) for c in ri.cells}


def with_accuracy_bounds(frame: pd.DataFrame, bands: dict[tuple[str, str, int], tuple[float, float] | None],
                         report: RunReport) -> pd.DataFrame:
    """``data.per_corruption_frame`` plus ``accuracy_lo`` / ``accuracy_hi``: the mean of the corruption's
    severities' interval bounds (the accuracy shown is the mean of those severities' accuracies). Missing
    where a severity has no interval."""
    lo, hi = [], []
    for row in frame.itertuples(index=False):
        m = report.model(row.model)
        ivs = [bands.get((row.model, c.corruption, c.severity)) for c in (m.cells if m else [])
               if c.corruption == row.corruption and c.accuracy is not None]
        ok = bool(ivs) and all(iv is not None for iv in ivs)
        lo.append(float(np.mean([iv[0] for iv in ivs])) if ok else None)
        hi.append(float(np.mean([iv[1] for iv in ivs])) if ok else None)
    return frame.assign(accuracy_lo=pd.array(lo, dtype="Float64").astype("float64"),
                        accuracy_hi=pd.array(hi, dtype="Float64").astype("float64"))


def pm(value: float | None, interval: tuple[float, float] | None, percent: bool) -> str:
    """``61.2 % ± 3.1`` (half the interval's width; the widest side where it is not symmetric)."""
    if value is None or value != value:
        return MISSING
    scale = 100.0 if percent else 1.0
    text = f"{scale * value:.1f} %" if percent else f"{value:.3f}"
    if interval is None:
        return text
    half = max(value - interval[0], interval[1] - value) * scale
    return f"{text} ± {half:.1f}" if percent else f"{text} ± {half:.3f}"


#: a summary column -> the column of its value with the 95 % interval (``with_intervals``)
CI_COLUMNS = {"clean acc %": "clean acc ± 95 % CI", "corrupted acc %": "corrupted acc ± 95 % CI", "mCE": "mCE ± 95 % CI"}


def ci_help(header: str) -> str:
    """The hover of the "± 95 % CI" column of ``header``'s metric: the metric's help, then what the ± is."""
    from domainbench.frontend.units import metric_columns

    return f"{metric_columns()[header].help} Shown ± half the width of its 95 % interval."


def with_intervals(table: pd.DataFrame, report: RunReport, ci: dict[str, dict[str, Any]] | None) -> pd.DataFrame:
    """The summary table with a text column per rate holding its value ± the 95 % interval."""
    if ci is None:
        return table
    rows = {r.model: r for r in report.table()}
    out = table.copy()
    out.insert(out.columns.get_loc("clean acc %") + 1, CI_COLUMNS["clean acc %"],
               [pm(rows[m].acc, ci.get(m, {}).get("clean"), True) for m in out["model"]])
    out.insert(out.columns.get_loc("corrupted acc %") + 1, CI_COLUMNS["corrupted acc %"],
               [pm(rows[m].mean_corrupted_acc, ci.get(m, {}).get("corrupted"), True) for m in out["model"]])
    out.insert(out.columns.get_loc("mCE") + 1, CI_COLUMNS["mCE"],
               [pm(rows[m].mce, ci.get(m, {}).get("mce"), False) for m in out["model"]])
    return out


def show(store: Store, store_key: str, run_id: str, fingerprint: tuple[Any, ...]) -> None:
    sentences, why = verdicts(store, store_key, run_id, fingerprint)
    if sentences:
        with st.container(border=True):
            st.markdown("**Verdict** (paired test on the same images, 95 % intervals)")
            for s in sentences:
                st.text(s)
    elif why:
        st.caption(f"No verdict: {why}")

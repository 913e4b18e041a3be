"""The answer first: the statistics' verdict sentences and intervals on a run page, cached per run state.

The sentences and intervals come from the statistics layer through the query module
(``query.comparison``, ``query.intervals``); this module only caches and draws them. A run whose units
hold no per-image outcomes (or one model, or no labels) gets no verdict, said in a line.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import pandas as pd
import streamlit as st

from domainbench.metrics.registry import Metric, metrics_of
from domainbench.records.report import RunReport
from domainbench.stats import interval_text
from domainbench.query import Store

log = logging.getLogger("domainbench.ui")


def verdicts(_store: Store, store_key: str, run_id: str, fingerprint: tuple[Any, ...]) -> tuple[list[str], str]:
    """(verdict sentences, why there are none)."""
    sentences, why, _ = verdicts_and_groups(_store, store_key, run_id, fingerprint)
    return sentences, why


def groups(store: Store, store_key: str, run_id: str, fingerprint: tuple[Any, ...]) -> dict[str, str]:
    """Model -> its tied group letters (``metrics.letters``); empty where the run has no verdict."""
    return verdicts_and_groups(store, store_key, run_id, fingerprint)[2]


@st.cache_data(show_spinner="comparing the models image by image…", max_entries=32)
def verdicts_and_groups(_store: Store, store_key: str, run_id: str,
                        fingerprint: tuple[Any, ...]) -> tuple[list[str], str, dict[str, str]]:
    """(verdict sentences and, last, the tied groups' line; why there are none; model -> group letters)."""
    from domainbench import query
    from domainbench.frontend.cached import read_outcomes

    run = query.find_run(_store, run_id)
    if run is None or len(run.config.models) < 2:
        return [], "one model: there is nothing to compare it with", {}
    try:
        c = query.comparison(_store, [run_id], read=read_outcomes)
    except ValueError as e:  # unlabelled, or no per-image outcomes stored
        return [], str(e), {}
    except Exception as e:  # the statistics cannot use this run's data yet (a partial run): say so, draw the rest
        log.warning("verdict of run %s failed", run_id, exc_info=True)
        return [], f"the paired comparison failed on this run's stored data ({type(e).__name__})", {}
    return [v.sentence for v in c.verdicts] + [c.groups.sentence()], "", dict(c.groups.letters)


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


#: under the summary of an adaptive run (``RunIntervals.anytime_valid``): what its intervals are
ANYTIME_NOTE = ("This run stopped its cells adaptively: every interval on this page is a 95 % anytime-valid confidence "
                "sequence (betting, over the images in evaluation order), valid whenever the run stopped; the clean and "
                "mean accuracies come from the cells' sequences jointly (Bonferroni), and mCE, rCE and mFR have none.")


def anytime_note(ri: Any) -> None:
    """The caption that labels an adaptive run's intervals as anytime-valid (nothing for another run)."""
    if ri is not None and getattr(ri, "anytime_valid", False):
        st.caption(ANYTIME_NOTE)


def intervals(store: Store, store_key: str, report: RunReport, run_id: str, baseline: str,
              fingerprint: tuple[Any, ...]) -> dict[str, dict[str, tuple[float, float] | None]] | None:
    """Per model: metric (a ``ModelIntervals`` field, the registry's name) -> (low, high) of the model-level numbers;
    None where they cannot be computed."""
    ri = run_intervals(store, store_key, report, run_id, baseline, fingerprint)
    if ri is None:
        return None
    return {m.model: m.model_dump(exclude={"model"}) for m in ri.models}


def cell_bands(ri: Any, metric: str = "balanced_accuracy") -> dict[tuple[str, str, int], tuple[float, float] | None]:
    """(model, corruption, severity) -> the cell's 95 % interval of ``metric`` (a ``CellIntervals`` field),
    the clean pass under ("clean", 0); empty without intervals."""
    if ri is None:
        return {}
    return {(c.model, c.corruption, c.severity): getattr(c, metric) for c in ri.cells}


def with_ci_text(frame: pd.DataFrame, columns: Mapping[str, tuple[str, bool]]) -> pd.DataFrame:
    """``frame`` with, after each value column ``c`` of ``columns`` (a fraction where ``columns[c][1]`` says it is a
    rate) that has ``c_lo`` / ``c_hi`` (``data.corruption_bounds``, ``data.run_bounds``), the text column
    ``columns[c][0]`` holding "61.2 % (58.1–64.3)" ("0.894 (0.702–1.412)" for a ratio); the ``_lo`` / ``_hi`` columns
    dropped."""
    out = frame.copy()
    for c, (name, percent) in columns.items():
        if f"{c}_lo" not in out.columns:
            continue
        # an undefined value may be None (an object column) as well as NaN: both are "—"
        text = [pm(None if v is None or v != v else float(v), None if lo != lo else (float(lo), float(hi)), percent)
                for v, lo, hi in zip(out[c], out[f"{c}_lo"], out[f"{c}_hi"], strict=True)]
        out = out.drop(columns=[f"{c}_lo", f"{c}_hi"])
        out.insert(out.columns.get_loc(c) + 1, name, text)
    return out


def per_corruption_table(frame: pd.DataFrame, file: str, key: str) -> None:
    """A per-corruption frame with its bounds (``data.corruption_bounds``) as a table: the ratios as ratios, the
    accuracy in %, each value shown once, with its 95 % interval (the CSV keeps the value's column as well)."""
    from domainbench.frontend import exports, units
    from domainbench.frontend.data import PER_CORRUPTION_METRICS

    # the ratios under the names every other table and chart gives them (CE, rCE, FR: the registry's headers)
    header = {m: ("accuracy %" if m == "accuracy" else PER_CORRUPTION_METRICS[m].table_header) for m in PER_CORRUPTION_METRICS}
    ci = {m: ci_column(header[m].removesuffix(" %")) for m in PER_CORRUPTION_METRICS}
    shown = units.as_percent(with_ci_text(frame, {m: (ci[m], m == "accuracy") for m in PER_CORRUPTION_METRICS}),
                             {"accuracy": "accuracy %"})
    shown = shown.rename(columns={m: h for m, h in header.items() if m != "accuracy"})
    valued = {header[m]: c for m, c in ci.items()}
    ratios = [header[m] for m in PER_CORRUPTION_METRICS if m != "accuracy"]
    # the headers are the summary's (rCE is also the model's mean there): each column hovers to its own per-corruption
    # metric's help, given here, not looked up by header
    per = {header[m]: PER_CORRUPTION_METRICS[m] for m in PER_CORRUPTION_METRICS if m != "accuracy"}
    exports.table(shown, file, key, column_order=[c for c in shown.columns if valued.get(c) not in shown.columns],
                  column_config={**{c: st.column_config.NumberColumn(c, format="%.3f", help=per[c].help) for c in ratios},
                                 "accuracy %": st.column_config.NumberColumn("accuracy %", format="%.1f"),
                                 **{c: st.column_config.TextColumn(c, help=f"{per[value].help} {CI_WRITTEN}" if value in per
                                                                   else ci_help(value)) for value, c in valued.items()}})


def pm(value: float | None, interval: tuple[float, float] | None, percent: bool) -> str:
    """``61.2 % (58.1–64.3)``: the value and its interval's two ends (``stats.interval_text``, as ``show`` writes them)."""
    return interval_text(value, interval, percent)


def ci_column(name: str) -> str:
    """The text column of a value written with its 95 % interval: "rCE" -> "rCE (95 % CI)"."""
    return f"{name} (95 % CI)"


#: what a "(95 % CI)" column holds, said in its hover
CI_WRITTEN = "Shown as value (low–high): the two ends of its 95 % interval, which need not be symmetric around the value."


def _with_interval() -> list[Metric]:
    """The summary's metrics the statistics give an interval (the registry's), in the table's order."""
    return [m for m in metrics_of("model") if m.cli_header and m.interval]


#: a summary column -> the column of its value with the 95 % interval (``with_intervals``): "clean acc %" ->
#: "clean acc (95 % CI)", "mCE" -> "mCE (95 % CI)"
CI_COLUMNS = {m.table_header: ci_column(m.table_header.removesuffix(" %")) for m in _with_interval()}


def ci_help(header: str) -> str:
    """The hover of the "(95 % CI)" column of ``header``'s metric: the metric's help, then how the interval is written."""
    from domainbench.frontend.units import metric_columns

    return f"{metric_columns()[header].help} {CI_WRITTEN}"


def with_intervals(table: pd.DataFrame, report: RunReport, ci: dict[str, dict[str, Any]] | None) -> pd.DataFrame:
    """The summary table with, beside each value that has an interval, a text column holding it with its 95 % interval's
    ends."""
    if ci is None:
        return table
    rows = {r.model: r for r in report.table()}
    out = table.copy()
    for m in _with_interval():
        if m.table_header in out.columns:
            # "*": few images per class made the model's interval approximate (the note under the table says so)
            out.insert(out.columns.get_loc(m.table_header) + 1, CI_COLUMNS[m.table_header],
                       [pm(m.read(rows[model]), ci.get(model, {}).get(m.name), m.percent)
                        + ("*" if ci.get(model, {}).get("approximate") and m.interval == "smoothed"
                           and ci.get(model, {}).get(m.name) is not None else "")
                        for model in out["model"]])
    return out


@st.cache_data(show_spinner="comparing the models' label flips image by image…", max_entries=32)
def flip_verdicts(_store: Store, store_key: str, run_id: str, fingerprint: tuple[Any, ...]) -> tuple[list[str], str]:
    """An unlabelled run's verdict (``query.flip_verdicts``: by label flips, which need no labels), or why there is none."""
    from domainbench import query
    from domainbench.frontend.cached import read_outcomes

    try:
        return [v.sentence for v in query.flip_verdicts(_store, [run_id], read=read_outcomes)], ""
    except ValueError as e:  # no per-image predictions stored
        return [], str(e)
    except Exception as e:  # a partial run's data the statistics cannot use yet: say so, draw the rest
        log.warning("label-free verdict of run %s failed", run_id, exc_info=True)
        return [], f"the paired comparison of flips failed on this run's stored data ({type(e).__name__})"


def show_real_shift(store: Store, store_key: str, run_id: str, fingerprint: tuple[Any, ...]) -> None:
    """The result on the user's own images (``shift:NAME`` cells), first: the images the run is really about."""
    from domainbench.frontend.shift_section import markdown_safe, real_shift

    results, why = real_shift(store, store_key, run_id, fingerprint)
    if why:
        st.caption(f"No result on your own images: {why}")
    if not results:
        return
    with st.container(border=True):
        st.markdown("**On your own images** (real-shift cells: your photos, not synthesised; accuracy with its 95 % "
                    "interval over your images, paired test on the same images; table below, "
                    "docs/reading-the-numbers.md)")
        for r in results:
            st.markdown(markdown_safe(r.sentence))


def _unlabelled(store: Store, run_id: str) -> bool:
    run = store.get_run(run_id)
    return run is not None and run.dataset is not None and not run.dataset.labelled and len(run.config.models) > 1


def show(store: Store, store_key: str, run_id: str, fingerprint: tuple[Any, ...]) -> None:
    show_real_shift(store, store_key, run_id, fingerprint)
    if _unlabelled(store, run_id):
        # balanced accuracy needs labels; whether a corruption changes a model's answer does not
        sentences, why = flip_verdicts(store, store_key, run_id, fingerprint)
        if sentences:
            with st.container(border=True):
                st.markdown("**Verdict without labels** (label flips: how often a corruption changes each model's clean "
                            "prediction; paired sign-flip test on the same images, Holm-adjusted over the model pairs)")
                for s in sentences:
                    st.text(s)
        else:
            st.caption(f"No verdict: {why}")
        return
    sentences, why = verdicts(store, store_key, run_id, fingerprint)
    if sentences:
        with st.container(border=True):
            st.markdown("**Verdict** (balanced accuracy, paired test on the same images, Holm-adjusted over the model "
                        "pairs and the cells it counts; docs/reading-the-numbers.md)")
            for s in sentences:
                st.text(s)
    elif why:
        st.caption(f"No verdict: {why}")

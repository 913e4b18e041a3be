"""The pages' Streamlit caches over :mod:`domainbench.frontend.data`, shared so that the Runs and Compare
pages reuse each other's reports.

Every entry is keyed on the store (its description), the run, the baseline and the run's
fingerprint (``data.run_fingerprint``: its status, plus its progress while it is running), so a
finished run's report is read once per baseline and a running run's is rebuilt only when it
stored something new.
"""

from __future__ import annotations

import logging
import sys
import threading
from typing import Any

import pandas as pd
import streamlit as st

from domainbench import query
from domainbench.records.report import RunReport
from domainbench.query import Store
from domainbench.frontend import data

log = logging.getLogger("domainbench.ui")


@st.cache_resource(show_spinner="reading the run's report…", max_entries=64)
def run_view(
    _store: Store, store_key: str, run_id: str, baseline: str | None, fingerprint: tuple[Any, ...]
) -> data.RunView:
    """The run's record and report, once per run state and baseline, shared (read-only: no page changes it) by every
    session and rerun: a cache_data entry was unpickled, report and all, on every rerun of every page that reads it,
    the run page's fragment refreshes and each of Compare's runs included."""
    return data.load_run_view(_store, run_id, baseline)


@st.cache_data(show_spinner=False, max_entries=16)
def stability_frame(_store: Store, store_key: str, run_id: str, fingerprint: tuple[Any, ...]) -> pd.DataFrame:
    return data.stability_frame(_store, run_id)


def view_loader(store: Store) -> data.ViewLoader:
    """``data.compare_frame``'s loader, reading through the cache above."""

    def load(run_id: str, baseline: str | None) -> data.RunView:
        return run_view(store, store.description, run_id, baseline, data.run_fingerprint(store, run_id))

    return load


@st.cache_resource(show_spinner="reading the run's per-image outcomes…", max_entries=16)
def run_outcomes(_store: Store, store_key: str, run_id: str, fingerprint: tuple[Any, ...]) -> query.RunOutcomes:
    """``query.outcomes``: a run's per-image outcomes, read from its unit documents once per run state and shared
    (read-only, not copied) by its intervals, its resamples and its paired tests, on every page and session."""
    return query.outcomes(_store, run_id)


def read_outcomes(store: Store, run_id: str) -> query.RunOutcomes:
    """The ``read`` of the query functions: a run's outcomes through the cache above."""
    return run_outcomes(store, store.description, run_id, data.run_fingerprint(store, run_id))


@st.cache_data(show_spinner="resampling the run's images for the 95 % intervals…", max_entries=64)
def run_draws(_store: Store, store_key: str, _report: RunReport, run_id: str, baseline: str, resamples: int,
              seed: int | None, fingerprint: tuple[Any, ...]) -> Any:
    """``query.run_draws`` (``RunDraws``, or why there are none), once per run state, baseline and seed."""
    try:
        return query.run_draws(_store, _report, resamples, seed, read_outcomes)
    except Exception as e:  # the statistics cannot use this run's stored data: its aggregates show no interval
        log.warning("bootstrap draws of run %s failed", run_id, exc_info=True)
        return f"resampling failed on this run's stored data ({type(e).__name__})"


def compare_draws(store: Store, comparison: data.Comparison) -> data.Draws:
    """Per run of the comparison, its numbers under each bootstrap resample, paired across the runs
    (``query.draws``), each run's read through the cache above."""

    def load(s: Store, report: RunReport, resamples: int, seed: int | None) -> Any:
        return run_draws(s, s.description, report, report.run_id, report.baseline, resamples, seed,
                         data.run_fingerprint(s, report.run_id))

    runs = dict.fromkeys(comparison.frame["run"])
    return query.draws(store, [comparison.reports[r] for r in runs if r in comparison.reports], load=load)


@st.cache_data(show_spinner=False, max_entries=32)
def cell_predictions(
    _store: Store, store_key: str, run_id: str, corruption: str, severity: int, fingerprint: tuple[Any, ...]
) -> pd.DataFrame:
    return data.cell_predictions(_store, data.get_run(_store, run_id), corruption, severity)


@st.cache_data(show_spinner="re-creating the corrupted images from the run's seed…", max_entries=32)
def recreated_images(
    _store: Store, store_key: str, run_id: str, corruption: str, severity: int, indices: tuple[int, ...]
) -> tuple[Any, Any]:
    # pixels depend only on the run's seed, plan and dataset, never on its progress: no fingerprint
    return data.recreate_images(data.get_run(_store, run_id), corruption, severity, list(indices))


@st.cache_resource(show_spinner=False)
def warm_corruption_registry() -> threading.Thread:
    """Load the corruption kernels (albumentations, torch: 10 s and more) in the background once per
    server, so the Compare page's families and the gallery do not wait for them on first use."""

    def load() -> None:
        # scipy.stats first: imported while torch is half-imported (this thread), it reads the
        # partial torch module and fails in whichever thread imports it (a report's build). The
        # other way round too: when a page is importing torch (a plan, a gallery), wait for it
        # (the import's module lock) before scipy.stats reads it
        if "torch" in sys.modules:
            import torch  # noqa: F401
        import scipy.stats  # noqa: F401

        from domainbench import corruptions
        corruptions.names()
        # the run page's verdict and intervals (the statistics take seconds to import, once per server)
        import domainbench.query.compare  # noqa: F401
        import domainbench.query.confidence  # noqa: F401

    thread = threading.Thread(target=load, name="warm-corruptions", daemon=True)
    thread.start()
    return thread

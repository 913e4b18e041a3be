"""The run page's real-shift section: the user's own shifted images (``shift:NAME`` cells) against the plan.

Reads ``domainbench.query.real_shift`` only (through :func:`real_shift`, cached per run state), so the
table here and the sentence at the top of the page (and `show`'s) are one result: the same numbers, the same
intervals, the same synthetic cell that behaves most like the real images.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import pandas as pd
import streamlit as st

from domainbench.records.config import SHIFT_PREFIX
from domainbench.frontend import exports
from domainbench.frontend.ui import md_escape
from domainbench.stats import interval_text

log = logging.getLogger("domainbench.ui")

#: how a real-shift cell is marked wherever cells are listed: it is measured on real images, not synthesised
REAL_BADGE = "real"

#: the table's columns (numbers stay numbers for sorting; each interval is written beside its value)
COLUMNS = ["model", "cell", "kind", "images", "accuracy %", "accuracy (95 % CI)", "drop (points)",
           "flip probability %", "flip probability (95 % CI)", "ssim", "closest synthetic cell", "measure",
           "on your images", "in that cell"]


def is_real(corruption: str) -> bool:
    return corruption.startswith(SHIFT_PREFIX)


def _written(value: float | None, interval: tuple[float, float] | None) -> str | None:
    """A rate with its interval's ends, as the sentence writes it; None (the table's "—") without a value."""
    return None if value is None else interval_text(value, interval, True)


def shift_frame(results: Sequence[Any]) -> pd.DataFrame:
    """One row per model × real-shift cell (``query.RealShiftResult``): images, balanced accuracy with its interval
    and its drop from clean, flip rate with its interval and SSIM against the paired clean image (where the files
    pair), and the synthetic cell that behaves most like the real images with the measure on both."""
    from domainbench.query.shift import cell_text

    rows = []
    for r in results:
        measure = "accuracy drop (points)" if r.labelled else "flip rate %"
        for m in r.models:
            rows.append({"model": m.model, "cell": r.shift, "kind": REAL_BADGE, "images": m.n,
                         "accuracy %": None if m.accuracy is None else 100 * m.accuracy,
                         "accuracy (95 % CI)": _written(m.accuracy, m.accuracy_ci),
                         "drop (points)": m.drop,
                         "flip probability %": None if m.flip_rate is None else 100 * m.flip_rate,
                         "flip probability (95 % CI)": _written(m.flip_rate, m.flip_ci),
                         "ssim": m.ssim, "closest synthetic cell": None if m.closest is None else cell_text(m.closest),
                         "measure": measure, "on your images": m.real_value, "in that cell": m.closest_value})
    return pd.DataFrame(rows, columns=COLUMNS)


@st.cache_data(show_spinner="comparing the models on your own images…", max_entries=32)
def real_shift(_store: Any, store_key: str, run_id: str, fingerprint: tuple[Any, ...]) -> tuple[list[Any], str]:
    """Per real-shift cell (``query.real_shift``: the sentence ``show`` prints and the table's rows), or why none."""
    from domainbench import query
    from domainbench.frontend.cached import read_outcomes

    run = query.find_run(_store, run_id)
    if run is None or not run.domain.shift:  # most runs: nothing to read
        return [], ""
    try:
        return query.real_shift(_store, query.report(_store, run_id), read=read_outcomes), ""
    except Exception as e:  # a partial run's data the statistics cannot use yet: say so, draw the rest
        log.warning("real-shift result of run %s failed", run_id, exc_info=True)
        return [], f"the result on your own images failed on this run's stored data ({type(e).__name__})"


def show(store: Any, store_key: str, run_id: str, fingerprint: tuple[Any, ...]) -> None:
    """The per-model table of the result the verdict states at the top of the page (nothing without shifts)."""
    results, _ = real_shift(store, store_key, run_id, fingerprint)
    if not results:
        return
    st.subheader("Your own shifted images")
    st.badge(REAL_BADGE, icon=":material/photo_camera:", color="green")
    exports.plain_table(shift_frame(results), column_config={
        "accuracy %": st.column_config.NumberColumn(format="%.1f"),
        "drop (points)": st.column_config.NumberColumn(format="%.1f"),
        "flip probability %": st.column_config.NumberColumn(format="%.1f"),
        "ssim": st.column_config.NumberColumn(format="%.3f"),
        "on your images": st.column_config.NumberColumn(format="%.1f"),
        "in that cell": st.column_config.NumberColumn(format="%.1f")})
    st.caption("A real-shift cell (shift:NAME) is measured on your own images, not synthesised: it stays out of the "
               "plan's averages (mCE, mFR). Drop = clean balanced accuracy − the cell's, in points. The closest "
               "synthetic cell is, per model, the plan's cell whose drop is closest to the drop on your images (so "
               "whose accuracy is closest to it); an unlabelled shift is matched by flip rate instead. Flips and SSIM "
               "need files named like the dataset's images (paired). See docs/reading-the-numbers.md.")


def markdown_safe(text: str) -> str:
    """The sentence's backtick-quoted names stay code spans (shown literally); the text between is escaped."""
    parts = text.split("`")
    return "`".join(part if k % 2 else md_escape(part) for k, part in enumerate(parts))


#: the name it had (tests and callers written before)
_markdown_safe = markdown_safe

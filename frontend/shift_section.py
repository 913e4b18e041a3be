"""The run page's real-shift section: the user's own shifted images (``shift:NAME`` cells) against the plan.

Reads ``domainbench.query.shift_matches_of`` only, so the sentence here is the one ``show`` prints.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from domainbench import query
from domainbench.records.config import SHIFT_PREFIX
from domainbench.frontend import exports
from domainbench.frontend.ui import md_escape
from domainbench.records.report import RunReport

#: how a real-shift cell is marked wherever cells are listed: it is measured on real images, not synthesised
REAL_BADGE = "real"


def is_real(corruption: str) -> bool:
    return corruption.startswith(SHIFT_PREFIX)


def shift_frame(report: RunReport) -> pd.DataFrame:
    """One row per model × real-shift cell: images, balanced accuracy and its drop, flip rate, damage (SSIM)."""
    rows = []
    for m in report.models:
        for c in m.cells:
            if not is_real(c.corruption):
                continue
            drop = None if c.accuracy is None or m.clean_accuracy is None else 100 * (m.clean_accuracy - c.accuracy)
            rows.append({"model": m.model, "cell": c.corruption, "kind": REAL_BADGE, "images": c.n,
                         "accuracy %": None if c.accuracy is None else 100 * c.accuracy, "drop (points)": drop,
                         "flip probability %": None if c.lfp is None else 100 * c.lfp,
                         "ssim": None if c.damage is None else c.damage.ssim})
    return pd.DataFrame(rows, columns=["model", "cell", "kind", "images", "accuracy %", "drop (points)",
                                       "flip probability %", "ssim"])


def match_frame(report: RunReport) -> pd.DataFrame:
    """Per shift and model, the closest synthetic cell and both values."""
    rows = [{"shift": match.shift, "model": p.model, "measure": match.measure, "on your images": p.real,
             "closest cell": f"{p.cell[0]} s{p.cell[1]}", "there": p.synthetic}
            for match in query.shift_matches_of(report) for p in match.per_model]
    return pd.DataFrame(rows, columns=["shift", "model", "measure", "on your images", "closest cell", "there"])


def show(report: RunReport) -> None:
    """The match sentence per shift, its cells marked real, and the per-model detail (nothing without shifts)."""
    matches = query.shift_matches_of(report)
    if not matches:
        return
    st.subheader("Your own shifted images")
    for match in matches:
        st.badge(REAL_BADGE, icon=":material/photo_camera:", color="green")
        st.markdown(_markdown_safe(match.sentence))
    with st.expander("real-shift cells and the closest synthetic cell per model"):
        # each metric's column hovers to the registry's help
        exports.plain_table(shift_frame(report), column_config={
            "accuracy %": st.column_config.NumberColumn(format="%.1f"),
            "drop (points)": st.column_config.NumberColumn(format="%.1f"),
            "flip probability %": st.column_config.NumberColumn(format="%.1f"),
            "ssim": st.column_config.NumberColumn(format="%.3f")})
        exports.plain_table(match_frame(report), column_config={
            "on your images": st.column_config.NumberColumn(format="%.1f"),
            "there": st.column_config.NumberColumn(format="%.1f")})
        st.caption("A real-shift cell (shift:NAME) is measured on your own images, not synthesised: it stays out of the "
                   "plan's averages (mCE, mFR). Drop = clean balanced accuracy − the cell's, in points; an unlabelled "
                   "shift is matched by flip rate instead. See docs/reading-the-numbers.md.")


def _markdown_safe(text: str) -> str:
    """The sentence's backtick-quoted names stay code spans (shown literally); the text between is escaped."""
    parts = text.split("`")
    return "`".join(part if k % 2 else md_escape(part) for k, part in enumerate(parts))

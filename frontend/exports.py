"""Tables and figures drawn with their downloads: every table as CSV, every figure as PNG and HTML.

The files are made only when a button is clicked (Streamlit calls the callable then), so a
page pays nothing for them while it renders: a PNG starts a headless Chromium through
kaleido and takes seconds.

Every table is drawn here, so every column named for a metric hovers to the metric registry's help
(``units.column_help``), and a table's CSV is the table as shown: a rate in % under a name ending in "%".
"""

from __future__ import annotations

import os
import re
import shutil
from functools import cache
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from domainbench.frontend.units import column_help
#: what a table shows for an undefined value (not applicable: unlabelled data, no baseline), never "None" or 0
from domainbench.stats.written import MISSING

CHROMIUM = "/usr/bin/chromium"


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[:120] or "export"


@cache
def png_available() -> bool:
    """kaleido is installed and a Chrome/Chromium it can drive is present."""
    try:
        import kaleido  # noqa: F401
    except ImportError:
        return False
    if os.path.exists(CHROMIUM):
        os.environ.setdefault("BROWSER_PATH", CHROMIUM)  # kaleido's lookup finds Debian's chromium this way
        return True
    return any(shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome", "chrome"))


def figure_png(fig: go.Figure) -> bytes:
    return fig.to_image(format="png", width=1400, height=int(fig.layout.height or 600), scale=1)


def figure_html(fig: go.Figure) -> str:
    # self-contained (plotly.js inlined): the file opens offline, as the UI itself does
    return fig.to_html(include_plotlyjs=True, full_html=True)


def chart(fig: go.Figure, name: str, key: str) -> None:
    """The figure, then its PNG and HTML downloads (made on click)."""
    st.plotly_chart(fig, width="stretch", key=f"chart-{key}")
    # a row as wide as its buttons (fixed columns cut "HTML" to "HT…" at 1,024 px)
    c1 = c2 = st.container(horizontal=True)
    base = slug(name)
    if png_available():
        c1.download_button("PNG", lambda: figure_png(fig), file_name=f"{base}.png", mime="image/png",
                           key=f"png-{key}", icon=":material/image:", on_click="ignore")
    else:
        c1.caption("PNG export needs kaleido and Chromium")
    c2.download_button("HTML", lambda: figure_html(fig), file_name=f"{base}.html", mime="text/html",
                       key=f"html-{key}", icon=":material/code:", on_click="ignore")


def table(frame: pd.DataFrame, name: str, key: str, **dataframe_args: Any) -> Any:
    """The table, then its CSV download; returns what ``st.dataframe`` returns (a selection event).

    Every table of the UI is drawn here, so an undefined value reads the same everywhere (``MISSING``);
    the CSV keeps it empty."""
    shown = plain_table(frame, key=f"table-{key}", **dataframe_args)
    csv_button(frame, name, key)
    return shown


def csv_text(frame: pd.DataFrame) -> str:
    """The frame as CSV; its index is written only when it means something (a models × domains matrix)."""
    return frame.to_csv(index=not isinstance(frame.index, pd.RangeIndex))


def plain_table(frame: pd.DataFrame, **dataframe_args: Any) -> Any:
    """A table without a download (a plan preview, a view of an export offered beside it), undefined values
    shown as ``MISSING`` like every other table, each metric's column hovering to its meaning."""
    dataframe_args["column_config"] = column_help(frame.columns, dataframe_args.get("column_config"))
    return st.dataframe(frame, **{"hide_index": True, "width": "stretch", "placeholder": MISSING, **dataframe_args})


def csv_button(frame: pd.DataFrame, name: str, key: str, label: str = "CSV") -> None:
    st.download_button(label, lambda: csv_text(frame),
                       file_name=f"{slug(name)}.csv", mime="text/csv", key=f"csv-{key}", icon=":material/download:",
                       on_click="ignore")

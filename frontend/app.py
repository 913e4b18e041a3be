"""domainbench browser UI — the entry point of ``streamlit run frontend/app.py`` (``domainbench ui``).

Pages: Runs (one run in depth), Compare (models across domains), New domain (plan and launch), Glossary
(every metric's meaning).
"""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("NO_ALBUMENTATIONS_UPDATE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import streamlit as st  # noqa: E402

from domainbench.runtime import host_memory  # noqa: E402

host_memory.configure()

_VIEWS = Path(__file__).resolve().parent / "views"

# a product, not a dev server: no Deploy button or developer menu, however the app was started
# (the usage statistics are switched off by `domainbench ui`'s flags and .streamlit/config.toml)
st.set_option("client.toolbarMode", "viewer")
# a file, not a ":material/…:" icon: Streamlit fetches those as a favicon from fonts.gstatic.com
st.set_page_config(page_title="domainbench", page_icon=str(Path(__file__).resolve().parent / "favicon.png"),
                   layout="wide")
nav = st.navigation(
    [
        st.Page(str(_VIEWS / "runs.py"), title="Runs", icon=":material/list:", default=True),
        st.Page(str(_VIEWS / "compare.py"), title="Compare", icon=":material/bar_chart:"),
        st.Page(str(_VIEWS / "new_domain.py"), title="New domain", icon=":material/add_circle:"),
        st.Page(str(_VIEWS / "glossary.py"), title="Glossary", icon=":material/menu_book:"),
    ]
)
nav.run()

"""Streamlit glue shared by the pages: the cached store, error display, status badges."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import streamlit as st

from domainbench.errors import UserInputError
from domainbench.metrics.registry import Metric
from domainbench.runtime.settings import Settings
from domainbench.query import Store
from domainbench.service.runs import open_store

log = logging.getLogger("domainbench.ui")
DEMO_HINT = (
    "No runs yet. Create one from a terminal with **`make demo`** (plans a demo domain offline and "
    "evaluates both embedded models on the bundled sample in a few minutes), or plan your own "
    "domain on the **New domain** page."
)


@st.cache_resource(show_spinner=False)
def _cached_store(home: str, uri: str | None) -> Store:
    # keyed on the configuration, so changing DOMAINBENCH_HOME (tests, restarts) opens the right store
    return open_store(uri, Path(home))


def get_store() -> Store:
    settings = Settings.from_env()
    return _cached_store(os.path.abspath(settings.home), settings.store_uri)


def redact(text: str) -> str:
    """``text`` without the API keys and the database password the environment holds.

    Every message the pages show passes through here: an error from a store or an LLM
    endpoint may quote its URI or its key, and a page is often shared as a screenshot.
    """
    return Settings.from_env().redact(text)


def error_text(exc: BaseException) -> str:
    if isinstance(exc, ValueError):  # UserInputError and the metric / planner input errors
        return redact(str(exc))
    return redact(f"{type(exc).__name__}: {exc}")


@contextmanager
def guard(what: str) -> Iterator[None]:
    """Show a failure inside the block as ``st.error`` with its message, never a traceback.

    Streamlit's own control flow (rerun, stop) derives from BaseException and passes through.
    """
    try:
        yield
    except UserInputError as e:
        st.error(redact(f"{what}: {e}"))
    except Exception as e:  # the UI must survive anything a store or a metric raises
        log.warning("%s failed", what, exc_info=True)
        st.error(f"{what} failed — {error_text(e)}")


STATUS_COLOR = {"queued": "blue", "running": "orange", "done": "green", "failed": "red", "interrupted": "violet",
                "cancelled": "gray"}


def status_badge(status: str) -> str:
    """Markdown badge (Streamlit's ``:color-badge[...]``); for markdown contexts only."""
    return f":{STATUS_COLOR.get(status, 'gray')}-badge[{status}]"


def sidebar_store(store: Store) -> None:
    # the description redacts passwords; raw URIs and keys are never shown
    st.sidebar.caption(redact(f"Results store: {store.description}"))
    from domainbench.frontend.progress import workers_status

    level, text = workers_status(store)
    (st.sidebar.warning if level == "warning" else st.sidebar.caption)(redact(f"Workers: {text}"))


#: characters of a user's text shown before the rest is folded behind "more"
FOLD_CHARS = 300
_MD_SPECIAL = set("\\`*_{}[]()<>#|:$~^&")
_LIST_START = re.compile(r"^(\s*)([-+]|\d+)([.)]?)", re.M)


def md_escape(text: str) -> str:
    """``text`` for a Markdown context, shown literally: every punctuation a Markdown, LaTeX, link or
    ``:color[...]`` directive could start with is backslash-escaped (CommonMark escapes any ASCII
    punctuation), a line that would start a list too, and line breaks stay line breaks."""
    out = "".join(f"\\{ch}" if ch in _MD_SPECIAL else ch for ch in str(text).replace("\r\n", "\n"))
    out = _LIST_START.sub(lambda m: m.group(1) + ("\\" + m.group(2) if m.group(2) in "-+" else m.group(2) + "\\" * bool(m.group(3)))
                          + m.group(3), out)
    return out.replace("\n", "  \n")


def literal_text(label: str, text: str, fold: int = FOLD_CHARS) -> None:
    """A user's text (a domain description, a planner's reason) as plain text, never Markdown; a long
    one shows its first ``fold`` characters and folds the rest behind "more"."""
    text = text or "?"
    st.caption(label)
    if len(text) <= fold:
        st.text(text)
        return
    cut = text[:fold].rsplit(" ", 1)[0] if " " in text[:fold] else text[:fold]
    st.text(cut + " …")
    with st.expander(f"more ({len(text):,} characters)"):
        st.text(text)


def glossary(metrics: Iterable[Metric]) -> None:
    """The metrics' glossary: each one's name as the pages show it, its export name, and the registry's help
    (the paragraph its column hovers to and `domainbench metrics` prints)."""
    def formerly(m: Metric) -> str:
        return f" Deprecated name{'s' if len(m.aliases) > 1 else ''}: {', '.join(f'`{a}`' for a in m.aliases)}." \
            if m.aliases else ""

    st.markdown("\n".join(f"- **{md_escape(m.table_header)}** (`{m.name}`): {md_escape(m.help)}{formerly(m)}"
                           for m in metrics))

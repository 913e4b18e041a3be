"""A page's state in its link: each widget reads its value from a query parameter when drawn and writes
it back when the user changes it, so a reload or a shared link opens the page as it was left.

A value the URL holds that the widget cannot show (an unknown model, a status that does not exist) is
ignored: the widget opens on its default. Lists are repeated parameters (``?status=done&status=failed``),
so a value may hold any character.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import streamlit as st


def index(param: str, options: Sequence[Any], fallback: Any) -> int | None:
    """The position of the URL's choice among ``options`` (a selectbox's ``index``); else of ``fallback``,
    else the first option (None when there is none)."""
    wanted = st.query_params.get(param)
    as_text = [str(o) for o in options]  # compared as the URL holds them
    if wanted is not None and wanted in as_text:
        return as_text.index(wanted)
    return options.index(fallback) if fallback in options else (0 if options else None)


def chosen(param: str, options: Sequence[str]) -> list[str]:
    """The URL's values of a multiple choice that are among ``options``, in the URL's order, once each."""
    return [v for v in dict.fromkeys(st.query_params.get_all(param)) if v in options]


def text(param: str) -> str:
    return st.query_params.get(param) or ""


def write(param: str, value: Any) -> None:
    """Keep ``value`` in the URL; an empty one (None, "", []) leaves the parameter out."""
    if value is None or value == "" or (isinstance(value, list | tuple) and not value):
        st.query_params.pop(param, None)
    elif isinstance(value, list | tuple):
        st.query_params[param] = [str(v) for v in value]
    else:
        st.query_params[param] = str(value)


def bound(param: str, key: str) -> None:
    """A widget's ``on_change``: write its value (``st.session_state[key]``) into the URL."""
    write(param, st.session_state[key])

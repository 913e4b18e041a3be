"""The run page's actions: cancel a queued or running run, resume a stopped one, delete one.

Cancel and resume go through the store's queue (atomic per backend); delete through the store's
removal (``domainbench rm``), behind a confirmation that names the run.
"""

from __future__ import annotations

import streamlit as st

from domainbench.query import Store
from domainbench.service.runs import CANCELLABLE, REQUEUEABLE, cancel, delete_runs, requeue
from domainbench.frontend.ui import error_text

#: session-state key of the run whose delete awaits confirmation
CONFIRM_KEY = "confirm-delete"


def actions(store: Store, run_id: str, status: str, on_deleted: object = None, confirm_in: object = None) -> None:
    """Cancel / Resume / Delete buttons for a run in ``status`` (as users see it); ``confirm_in``: the container a
    delete's confirmation opens in (the buttons' own place when None)."""
    # a row as wide as its buttons (it wraps rather than cutting a label: fixed columns read "Del…" at 1,024 px)
    c1 = c2 = st.container(horizontal=True)
    if status in CANCELLABLE:
        if c1.button("Cancel run", icon=":material/stop_circle:", key=f"cancel-{run_id}",
                     help="Stops at the next finished unit; finished units are kept and the run can be resumed."):
            _do(lambda: cancel(store, run_id), f"Run {run_id} is cancelled: it stops after its current unit.")
    elif status in REQUEUEABLE:
        if c1.button("Resume", icon=":material/play_circle:", key=f"resume-{run_id}",
                     help="Puts the run back into the queue; a worker computes only the missing units."):
            _do(lambda: requeue(store, run_id), f"Run {run_id} is queued again; a worker resumes it.")
    if c2.button("Delete…", icon=":material/delete:", key=f"delete-{run_id}"):
        st.session_state[CONFIRM_KEY] = run_id
    if st.session_state.get(CONFIRM_KEY) == run_id:
        with confirm_in or st.container():  # type: ignore[attr-defined]
            _confirm_delete(store, run_id, status, on_deleted)


def _do(action: object, done: str) -> None:
    try:
        action()  # type: ignore[operator]
    except ValueError as e:  # UserInputError: the run changed state meanwhile
        st.error(error_text(e))
        return
    st.toast(done)
    st.rerun()


def _confirm_delete(store: Store, run_id: str, status: str, on_deleted: object) -> None:
    box = st.container(border=True)
    box.warning(f"Delete run {run_id} with all its results (units, stability, threat and FMR records)? "
                "This cannot be undone; its planned domain stays.", icon=":material/warning:")
    if status == "running":
        box.caption("The run is running: cancel it first, or delete it anyway (its process may write again).")
    c1, c2, _ = box.columns([2, 1, 3])
    if c1.button(f"Delete run {run_id}", type="primary", key=f"delete-yes-{run_id}"):
        try:
            delete_runs(store, [run_id], force=True)
        except ValueError as e:
            box.error(error_text(e))
            return
        st.session_state.pop(CONFIRM_KEY, None)
        st.toast(f"Run {run_id} was deleted.")
        if callable(on_deleted):
            on_deleted()
        st.rerun()
    if c2.button("Keep it", key=f"delete-no-{run_id}"):
        st.session_state.pop(CONFIRM_KEY, None)
        st.rerun()

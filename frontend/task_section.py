"""The run page of a VQA or retrieval run (issue 38): the stored table with intervals, the paired verdicts and
the answers side by side. The numbers are the run's stored rows (``query.task_run``), as `show` prints them."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from domainbench import query
from domainbench.query import Store


def show(store: Store, run_id: str) -> None:
    result = query.task_run(store, run_id)
    st.subheader(f"{result.task.upper() if result.task == 'vqa' else 'Retrieval'}: one row per model × cell")
    st.caption("95 % intervals in the _ci_low / _ci_high columns; `domainbench export` writes the same rows.")
    st.dataframe(pd.DataFrame(result.rows, columns=list(result.columns)), hide_index=True, key=f"{run_id}-task-rows")
    lines = query.task_verdict_lines(result)
    if lines:
        st.markdown("**Paired verdicts** (McNemar / sign-flip per cell, Holm-corrected)")
        for line in lines:
            st.text(line)
    columns = query.task_prediction_columns(result.task)
    st.markdown("**Answers** (the clean answer beside each corrupted one; `flipped` marks a changed answer)"
                if result.task == "vqa" else "**Queries** (the rank of each query's first correct item)")
    st.dataframe(pd.DataFrame(result.predictions, columns=list(columns)), hide_index=True,
                 key=f"{run_id}-task-predictions")

"""The run page of a VQA or retrieval run (issue 38): the stored table with intervals, the paired verdicts, the
VQA gallery (each image clean and corrupted, its questions with the references and every model's clean and
corrupted answers, flips marked) and the answers or queries table. The numbers are the run's stored rows
(``query.task_run``), as `show` prints them."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from domainbench import query
from domainbench.frontend import data
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
    if result.task == "vqa":
        gallery(result, run_id)
    columns = query.task_prediction_columns(result.task)
    st.markdown("**Answers** (the clean answer beside each corrupted one; `flipped` marks a changed answer)"
                if result.task == "vqa" else "**Queries** (the rank of each query's first correct item)")
    st.dataframe(pd.DataFrame(result.predictions, columns=list(columns)), hide_index=True,
                 key=f"{run_id}-task-predictions")


#: images the gallery shows at once (each is re-corrupted from the run's seed)
GALLERY_IMAGES = 6


def gallery_rows(predictions: pd.DataFrame, corruption: str, severity: int, flipped_only: bool,
                 limit: int = GALLERY_IMAGES) -> tuple[list[int], pd.DataFrame]:
    """(the images shown, first those with most flipped answers; their questions with every model's clean and
    corrupted answer) for one corrupted cell. A row per (image, question, model)."""
    cell = predictions[(predictions["corruption"] == corruption) & (predictions["severity"] == severity)]
    flips = cell.groupby("image")["flipped"].apply(lambda f: int(f.fillna(False).astype(bool).sum()))
    if flipped_only:
        flips = flips[flips > 0]
    order = sorted(flips.index, key=lambda i: (-flips[i], i))[:limit]
    return [int(i) for i in order], cell[cell["image"].isin(order)]


def _mark(flipped: object) -> str:
    return "⚠ flip" if flipped is True else ("same" if flipped is False else "")


def gallery(result: object, run_id: str) -> None:
    predictions = pd.DataFrame(result.predictions)  # type: ignore[attr-defined]
    cells = list(dict.fromkeys((c, int(s)) for c, s in zip(predictions["corruption"], predictions["severity"])
                               if c != "clean"))
    if not cells:
        return
    st.markdown("**Gallery**: each image clean (left) beside the corrupted one, its questions with the references "
                "and every model's clean and corrupted answer; ⚠ flip marks a changed answer")
    c1, c2 = st.columns([3, 2])
    corruption, severity = c1.selectbox("cell", cells, format_func=lambda c: f"{c[0]} / severity {c[1]}",
                                         key=f"{run_id}-task-gallery-cell")
    flipped_only = c2.checkbox("only images with a flipped answer", key=f"{run_id}-task-gallery-flipped")
    images, rows = gallery_rows(predictions, corruption, severity, flipped_only)
    if not images:
        st.info("no answer flipped in this cell")
        return
    try:
        clean, corrupted = query.task_gallery_pixels(result, corruption, severity, images)
    except (OSError, ValueError) as e:  # the manifest moved since the run: answers without the images
        st.caption(f"images not shown: {e}")
        clean = corrupted = None
    for k, image in enumerate(images):
        mine = rows[rows["image"] == image]
        with st.container(border=True):
            left, right = st.columns([1, 3])
            if clean is not None and corrupted is not None:
                a, b = left.columns(2)
                a.image(data.enlarge(clean[k]), caption="clean", width=112)
                b.image(data.enlarge(corrupted[k]), caption=f"{corruption}/{severity}", width=112)
            left.caption(str(mine["path"].iloc[0]).rsplit("/", 1)[-1])
            table = pd.DataFrame({
                "question": mine["question"],
                "references": [", ".join(r) if isinstance(r, list) else "" for r in mine["references"]],
                "model": mine["model"], "clean answer": mine["clean_answer"], "corrupted answer": mine["answer"],
                "": [_mark(f) for f in mine["flipped"]],
            })
            right.dataframe(table, hide_index=True, key=f"{run_id}-task-gallery-{corruption}-{severity}-{image}")

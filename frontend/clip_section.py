"""The run page of a clip run (issue 41): the stored rows with intervals, the paired verdicts, a clip strip
(sampled frames, clean above corrupted, each frame's prediction under it, flips marked) and a per-clip
prediction timeline. The numbers are the run's stored rows and frame predictions (``query.clip_run``), as
`show` and `export --predictions` give them; the strip's pixels are re-decoded from the run's clips."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from domainbench import query
from domainbench.query import Store

#: the mark under a frame whose prediction differs from the previous frame's
FLIP = "↯ flip"


def _cell_name(row: dict) -> str:
    if row["corruption"] == "clean":
        return "clean"
    return f"{row['corruption']}/{row['severity']}" + (f" ({row['mode']})" if row.get("mode") else "")


def show(store: Store, run_id: str) -> None:
    result = query.clip_run(store, run_id)
    st.subheader("Clips: one row per model × cell")
    st.caption("95 % intervals (bootstrap over clips) in the _ci_low / _ci_high columns; `domainbench export` writes "
               "the same rows. Definitions: docs/video.md.")
    rows = pd.DataFrame(result.rows)
    if "mode" in rows:  # a temporal corruption has no mode (it is one process across the frames): blank, not "None"
        rows["mode"] = rows["mode"].fillna("")
    st.dataframe(rows, hide_index=True, key=f"{run_id}-clip-rows",
                 column_config={"mode": st.column_config.TextColumn("mode", width="medium",
                                                                    help="an image corruption per clip: one draw for the "
                                                                         "whole clip (static) or one per frame "
                                                                         "(independent); blank for a temporal one")})
    lines = query.clip_verdict_lines(result)
    if lines:
        st.markdown("**Paired verdicts** (sign-flip over clips / McNemar per cell, Holm-corrected)")
        for line in lines:
            st.text(line)
    predictions = pd.DataFrame(query.clip_prediction_rows(result))
    models = list(dict.fromkeys(r["model"] for r in result.rows))
    cells = {_cell_name(r): r for r in result.rows if r["model"] == models[0]}
    corrupted = [c for c in cells if c != "clean"] or ["clean"]
    left, middle, right = st.columns(3)
    model = left.selectbox("model", models, key=f"{run_id}-clip-model")
    cell = middle.selectbox("cell", corrupted, key=f"{run_id}-clip-cell")
    clip = right.selectbox("clip", [c["clip"] for c in result.clips], key=f"{run_id}-clip-clip")
    row = cells[cell]
    mine = predictions[(predictions["model"] == model) & (predictions["clip"] == clip)]
    here = mine[(mine["corruption"] == row["corruption"]) & (mine["severity"] == row["severity"])
                & (mine["mode"].fillna("") == (row.get("mode") or ""))]
    clean = mine[mine["corruption"] == "clean"]
    _strip(result, clip, row, clean, here)
    _timeline(mine, clip, model)


def _strip(result: object, clip: str, row: dict, clean: pd.DataFrame, here: pd.DataFrame) -> None:
    st.markdown(f"**Clip strip**: {clip}, clean above {_cell_name(row)}; the prediction under each frame, "
                f"{FLIP} where it changed from the frame before")
    try:
        clean_frames, corrupted_frames = query.clip_strip(result, clip, row["corruption"], int(row["severity"]),
                                                          row.get("mode"))
    except Exception as e:  # the clips moved or no longer decode: the numbers stay, the pictures cannot
        st.info(f"The frames cannot be shown: {e}")
        return
    columns = st.columns(len(clean_frames))
    for t, col in enumerate(columns):
        c, k = clean.iloc[t], here.iloc[t]
        col.image(clean_frames[t], caption=f"#{c['frame_index']}: {c['prediction']}"
                  + (f" {FLIP}" if c["flipped"] == 1 else ""), width="stretch")
        col.image(corrupted_frames[t], caption=f"{k['prediction']}" + (f" {FLIP}" if k["flipped"] == 1 else "")
                  + (" ≠ clean" if k["prediction"] != c["prediction"] else ""), width="stretch")


def _timeline(mine: pd.DataFrame, clip: str, model: str) -> None:
    st.markdown(f"**Prediction timeline** of {clip} ({model}): the predicted class at each sampled frame, per cell")
    fig = go.Figure()
    for (corruption, severity, mode), part in mine.groupby(["corruption", "severity", mode_key(mine)], sort=False):
        name = "clean" if corruption == "clean" else f"{corruption}/{severity}" + (f" ({mode})" if mode else "")
        fig.add_trace(go.Scatter(x=part["time"], y=part["prediction"], mode="lines+markers", name=name,
                                 line={"shape": "hv"}))
    fig.update_layout(xaxis_title="time in the clip (s)", yaxis_title="predicted class", height=320,
                      margin={"l": 10, "r": 10, "t": 10, "b": 10})
    st.plotly_chart(fig, key=f"clip-timeline-{clip}-{model}")


def mode_key(frame: pd.DataFrame) -> pd.Series:
    return frame["mode"].fillna("")

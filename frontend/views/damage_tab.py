"""The run page's "Damage & calibration" tab: accuracy against damage (SSIM) or severity, the composed cells
with their steps, and per model the reliability diagram of the clean pass beside its worst cell."""

from __future__ import annotations

from typing import Any

import streamlit as st

from domainbench.frontend import damage_calibration as dc
from domainbench.frontend import exports, figures, units, verdict
from domainbench.frontend.ui import md_escape
from domainbench.metrics.registry import metric


def damage_tab(s: Any) -> None:
    """``s``: the run page's ``Shown`` (report, run id, the run's view)."""
    report, run_id = s.report, s.run_id
    frame = dc.damage_frame(report)
    if frame.empty:
        st.info("This run has no corrupted cell yet.")
        return
    colors = figures.model_colors(report.model_names)
    x = st.radio("x axis", list(dc.X_AXES), horizontal=True, key=f"damage-x-{run_id}",
                 format_func=lambda k: "damage (SSIM)" if k == "ssim" else "severity number",
                 help=units.options_help([metric("ssim")]))
    clean = {m.model: m.clean.accuracy for m in report.models if m.clean is not None}
    exports.chart(dc.accuracy_vs_damage(frame, x, colors, bands=verdict.cell_bands(getattr(s, "ci", None)),
                                        chance=getattr(s, "chance", None), clean=clean),
                  f"{run_id}-accuracy-vs-{x}", f"damage-{x}")
    st.caption("One panel per corruption, one line per model, starting from its clean accuracy (SSIM 1, severity 0); "
               "error bars: each cell's 95 % interval (as the summary's), dotted: chance (1 / classes). "
               "Severity numbers are not comparable across corruptions (severity 3 of one corruption can leave far "
               "less of the image than severity 3 of another); SSIM is: 1 = the pixels the models saw were the clean "
               f"ones, lower = more damage. PSNR {dc.psnr_label(float('inf'))} = identical pixels.")
    shown = frame.assign(psnr_db=[dc.psnr_label(v) for v in frame["psnr_db"]],
                         accuracy=100 * frame["accuracy"].astype(float)).rename(
        columns={"psnr_db": "PSNR dB", "accuracy": "accuracy %", "ssim": "SSIM", "ece": "ECE", "nll": "NLL"})
    # each column hovers to its metric's help (exports.table adds the registry's)
    exports.table(shown.sort_values(["SSIM", "model"]), f"{run_id}-damage", "damage", column_config={
        "SSIM": st.column_config.NumberColumn("SSIM", format="%.3f"),
        "accuracy %": st.column_config.NumberColumn("accuracy %", format="%.1f"),
        "ECE": st.column_config.NumberColumn("ECE", format="%.3f"),
        "NLL": st.column_config.NumberColumn("NLL", format="%.3f")})
    run = getattr(s.view, "run", None)
    composed = dc.composed_frame(report, getattr(run, "domain", None))
    if not composed.empty:
        st.markdown("**Composed cells** — their steps applied in order to each image")
        exports.table(composed, f"{run_id}-composed", "composed")
    st.markdown("**Reliability** — does the confidence still mean what it says?")
    model = st.selectbox("model", report.model_names, key=f"reliability-model-{run_id}")
    bins = dc.reliability_frame(report, model)
    if bins.empty:
        st.info(f"No calibration was recorded for {md_escape(model)} (it needs labelled images and class scores).")
        return
    exports.chart(dc.reliability_diagram(bins, model), f"{run_id}-reliability-{model}", "reliability")
    st.caption("Bars: accuracy of the images whose top-1 confidence falls in each of 15 bins, for the clean pass and "
               "the model's worst cell (lowest balanced accuracy). On the dashed diagonal the confidence is honest; "
               "bars below it mean overconfidence; error bars: each bin's 95 % interval (continuity-corrected "
               "Wilson over its images). ECE: the images-weighted mean gap.")

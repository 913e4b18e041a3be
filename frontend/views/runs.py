"""Runs: every stored run, and one run in depth (table, curves, flips, threat, stability, export)."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from backend.report import RunReport
from backend.store import Store
from backend.store.records import RunRecord
from frontend import cached, data, figures
from frontend.views import fmr_section
from frontend.ui import DEMO_HINT, get_store, guard, sidebar_store, status_badge


def summary_section(report: RunReport) -> None:
    table = data.summary_frame(report)
    st.dataframe(
        table, hide_index=True, width="stretch",
        column_config={
            "baseline": st.column_config.CheckboxColumn("baseline"),
            **{c: st.column_config.NumberColumn(c, format="%.1f") for c in ("clean acc %", "corrupted acc %", "safe-cell acc %")},
            **{c: st.column_config.NumberColumn(c, format="%.3f") for c in ("mCE", "rCE", "mFR", "corr(acc, LFP)")},
        },
    )
    st.caption(
        "mCE / rCE / mFR are relative to the baseline (1.0 = as robust as the baseline, lower is better); "
        "corr(acc, LFP) is the Pearson correlation of balanced accuracy and label flip probability over the "
        "corruption × severity cells; safe-cell accuracy averages the cells whose PD threat is label-preserving. "
        "Empty cells are not applicable (e.g. unlabelled data), never zero."
    )
    notes = data.model_notes(report)
    dropped = report.classification.dropped_cells
    if notes or dropped:
        with st.expander("notes on undefined numbers and left-out cells"):
            for model, lines in notes.items():
                for line in lines:
                    st.markdown(f"- **{model}**: {line}")
            for model, cells in dropped.items():
                st.markdown(f"- **{model}**: {len(cells)} cell(s) not shared by every model, left out of the aggregates")


def accuracy_tab(report: RunReport) -> None:
    if any(m.labeled for m in report.models):
        st.plotly_chart(figures.severity_lines(report, "accuracy"), width="stretch")
    else:
        st.info("The dataset is unlabelled: accuracy does not apply. Label flips are shown instead.")
        st.plotly_chart(figures.severity_lines(report, "lfp"), width="stretch")


def threat_tab(report: RunReport) -> None:
    if not report.threat:
        st.info("The PD threat was not measured for this run (it needs labelled images; `--no-threat` turns it off).")
        return
    st.plotly_chart(figures.threat_chart(report), width="stretch")
    unsafe = [figures.cell_label(t.corruption, t.severity) for t in report.unsafe_cells()]
    st.caption(
        "Projected Displacement: how far the corruption moves an image towards images of *other* classes "
        "(1 = half-way). Cells above 1 are unsafe: the corruption may have changed the true label, so an "
        "error there is not necessarily the model's fault."
        + (f" Unsafe cells: {', '.join(unsafe)}." if unsafe else " Every cell is safe.")
    )


def stability_tab(store: Store, store_key: str, report: RunReport, fingerprint: tuple[Any, ...]) -> None:
    # the one tab that draws per-image values, so the one place that loads per-image records
    frame = cached.stability_frame(store, store_key, report.run_id, fingerprint)
    if frame.empty:
        st.info("Embedding stability was not measured for this run (`--stability` turns it on).")
        return
    c1, c2 = st.columns(2)
    metric = c1.selectbox("stability metric", list(data.STABILITY_METRICS), format_func=data.STABILITY_METRICS.get,
                          key=f"stab-metric-{report.run_id}")
    kind = c2.radio("distribution as", ["box", "violin"], horizontal=True, key=f"stab-kind-{report.run_id}")
    st.plotly_chart(figures.stability_distribution(frame, metric, kind), width="stretch")
    st.plotly_chart(figures.stability_means(report.stability, metric), width="stretch")
    st.caption(
        "DivergenceRadius: radius of the smallest ball enclosing an image's clean and perturbed embeddings "
        "(equally spaced parameters of each corruption); larger = the embedding moves more = less robust."
    )


def confusion_tab(report: RunReport, run_id: str) -> None:
    c1, c2, c3 = st.columns([2, 2, 1])
    model = c1.selectbox("model", report.model_names, key=f"cm-model-{run_id}")
    cells = [(c.corruption, c.severity) for c in report.cells_of(model)]
    if not cells:
        st.info("No cells for this model yet.")
        return
    cell = c2.selectbox("cell", cells, format_func=lambda k: "clean" if k[1] == 0 else figures.cell_label(*k),
                        key=f"cm-cell-{run_id}")
    normalize = c3.toggle("row shares", value=False, key=f"cm-norm-{run_id}")
    cm = data.confusion_of(report, model, cell[0], cell[1])
    if cm is None:
        st.info("The dataset is unlabelled: there is no confusion matrix.")
        return
    title = f"{model} — {'clean' if cell[1] == 0 else figures.cell_label(*cell)}"
    st.plotly_chart(figures.confusion_heatmap(cm, report.classification.classes, title, normalize), width="stretch")


def export_tab(run: RunRecord, report: RunReport) -> None:
    c1, c2 = st.columns(2)
    suffix = f"{run.run_id}-{report.baseline.replace(':', '_').replace('/', '_')}"
    c1.download_button("Download cells as CSV", data.export_csv(report), file_name=f"{suffix}.csv", mime="text/csv")
    c2.download_button("Download run + report as JSON", data.export_json(run, report), file_name=f"{suffix}.json",
                       mime="application/json")
    st.dataframe(data.cells_frame(report), hide_index=True, width="stretch")


def run_header(view: data.RunView) -> None:
    run = view.run
    st.subheader(f"{status_badge(view.status)} · {view.run_id}")
    st.markdown(f"**Domain:** {run.domain.domain or '?'}")
    cfg, env = run.config, run.environment
    c1, c2, c3, c4 = st.columns(4)
    c1.metric("models", len(view.models))
    c2.metric("dataset", run.dataset.name if run.dataset else cfg.dataset,
              help=f"{run.dataset.size if run.dataset else '?'} images")
    c3.metric("cells done", f"{view.done_cells} / {view.total_cells}")
    c4.metric("device", str(env.get("gpu") or env.get("device") or "?"))
    with st.expander("corruptions of this domain and run configuration"):
        st.dataframe(corruptions_frame(run), hide_index=True, width="stretch")
        st.json({"models": cfg.models, "baseline": cfg.baseline, "dataset": cfg.dataset, "limit": cfg.limit,
                 "seed": cfg.seed, "created": run.created_at, "finished": run.finished_at, "environment": env},
                expanded=False)
    if view.status == "failed":
        st.error(f"The run failed: {run.error or 'no message recorded'}. Finished units are kept; "
                 f"continue with `domainbench run --resume {view.run_id}`.")
    elif view.status == "interrupted":
        st.warning(f"The run was interrupted. Continue it with `domainbench run --resume {view.run_id}`.")


def corruptions_frame(run: RunRecord) -> pd.DataFrame:
    return pd.DataFrame([{"corruption": c.name, "severities": ", ".join(map(str, c.severities)), "reason": c.reason}
                         for c in run.domain.corruptions], columns=["corruption", "severities", "reason"])


def live_progress(store: Store, run_id: str, fingerprint: tuple[Any, ...]) -> None:
    @st.fragment(run_every=5)
    def _poll() -> None:
        with guard("refreshing the run"):
            now = data.run_fingerprint(store, run_id)
            if now != fingerprint:  # new units or a status change: redraw the page from the new data
                st.rerun()
            st.caption(":material/autorenew: live: new results appear automatically every few seconds")

    _poll()


def show_run(store: Store, store_key: str, run_id: str) -> None:
    fingerprint = data.run_fingerprint(store, run_id)
    run = store.get_run(run_id)
    if run is None:
        st.error(f"Run {run_id} is no longer in the store.")
        return
    models = run.config.models
    baseline = st.selectbox(
        "baseline model for mCE / rCE / mFR (recomputed from stored statistics, no re-evaluation)",
        models, index=models.index(run.config.baseline_model), key=f"baseline-{run_id}",
    )
    view = cached.run_view(store, store_key, run_id, baseline, fingerprint)
    run_header(view)
    if view.status == "running":
        live_progress(store, run_id, fingerprint)
    if view.partial and view.report is not None:
        st.warning(
            f"**Partial results** — the run is {view.status} and {view.done_cells} of {view.total_cells} "
            f"(model, corruption, severity) cells have stored units ({view.n_units} units). Every number below "
            "is computed from what is stored so far and will change."
        )
    if view.report is None:
        st.info(f"No results yet: {view.error}")
        return
    report = view.report
    summary_section(report)
    fmr_section.show(store, report)
    tabs = st.tabs(["Accuracy vs severity", "Label flips", "PD threat", "Stability", "Confusion matrix", "Export"])
    with tabs[0], guard("drawing the accuracy curves"):
        accuracy_tab(report)
    with tabs[1], guard("drawing the label flips"):
        st.plotly_chart(figures.lfp_heatmap(report), width="stretch")
    with tabs[2], guard("drawing the PD threat"):
        threat_tab(report)
    with tabs[3], guard("drawing the stability"):
        stability_tab(store, store_key, report, fingerprint)
    with tabs[4], guard("drawing the confusion matrix"):
        confusion_tab(report, run_id)
    with tabs[5], guard("preparing the downloads"):
        export_tab(view.run, report)


def main() -> None:
    st.title("Runs")
    chosen: str | None = None
    with guard("opening the results store"):
        store = get_store()
        sidebar_store(store)
        runs = data.runs_frame(store)
        if runs.empty:
            st.info(DEMO_HINT)
            return
        st.dataframe(runs, hide_index=True, width="stretch",
                     column_config={"status": st.column_config.TextColumn("status"),
                                    "images": st.column_config.NumberColumn("images", format="%d")})
        ids = runs["run"].tolist()
        status = dict(zip(runs["run"], runs["status"], strict=True))
        domain = dict(zip(runs["run"], runs["domain"], strict=True))
        wanted = st.query_params.get("run")
        chosen = st.selectbox(
            "run", ids, index=ids.index(wanted) if wanted in ids else 0,
            format_func=lambda r: f"[{status[r]}] {data.short_text(domain[r], 60)} · {r}",
        )
        st.query_params["run"] = chosen
        if st.button("Refresh", icon=":material/refresh:"):
            st.cache_data.clear()
        store_key = store.description
    if chosen is not None:
        st.divider()
        with guard(f"showing run {chosen}"):
            show_run(store, store_key, chosen)


main()

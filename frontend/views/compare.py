"""Compare: the same models across domains (runs), e.g. mCE or accuracy per model per domain."""

from __future__ import annotations

import streamlit as st

from backend.engine.status import run_status
from frontend import cached, data, figures
from frontend.ui import DEMO_HINT, get_store, guard, sidebar_store


def main() -> None:
    st.title("Compare models across domains")
    with guard("opening the results store"):
        store = get_store()
        sidebar_store(store)
        runs = store.list_runs()
        if not runs:
            st.info(DEMO_HINT)
            return
        by_id = {r.run_id: r for r in runs}
        status = {r.run_id: run_status(r) for r in runs}
        done = [rid for rid, s in status.items() if s == data.FINISHED]
        chosen = st.multiselect(
            "runs (one per domain, ideally the same models and dataset)", list(by_id), default=done or list(by_id)[:1],
            format_func=lambda r: f"[{status[r]}] {data.run_label(by_id[r])}",
        )
        if not chosen:
            st.info("Choose at least one run.")
            return
        c1, c2 = st.columns(2)
        metric = c1.selectbox("metric", list(data.COMPARE_METRICS), format_func=lambda k: data.COMPARE_METRICS[k][0])
        shared = data.shared_models(store, chosen)
        base = c2.selectbox(
            "baseline for mCE / rCE / mFR", ["(each run's own)", *shared],
            help="A model evaluated in every chosen run makes the relative metrics comparable across domains.",
        )
        baseline = None if base.startswith("(") else base
        # one cached report per run and baseline, shared with the Runs page
        frame, problems = data.compare_frame(store, chosen, baseline, load_view=cached.view_loader(store))
        for p in problems:
            st.warning(f"left out: {p}")
        if frame.empty:
            st.info("None of the chosen runs has results yet.")
            return
        if frame["partial"].any():
            partial = sorted(set(frame.loc[frame["partial"], "domain"]))
            st.warning(f"**Partial results** for {', '.join(partial)}: those runs are not finished; their numbers "
                       "cover the units stored so far.")
        if baseline is None and frame["baseline"].nunique() > 1:
            st.caption("The runs use different baselines, so mCE / rCE / mFR are not directly comparable across "
                       "domains; pick a shared baseline above.")
        label, lower_better = data.COMPARE_METRICS[metric]
        st.plotly_chart(figures.compare_bars(frame, metric, label), width="stretch")
        st.caption(f"{label}: {'lower' if lower_better else 'higher'} is better.")
        pct = metric in ("acc", "mean_corrupted_acc", "safe_acc")
        pivot = frame.pivot_table(index="model", columns="domain", values=metric, aggfunc="first", dropna=False)
        pivot = pivot * 100.0 if pct else pivot
        st.dataframe(pivot, width="stretch", column_config={
            c: st.column_config.NumberColumn(c, format="%.1f %%" if pct else "%.3f") for c in pivot.columns})
        with st.expander("all numbers"):
            st.dataframe(frame.drop(columns=["domain_text"]), hide_index=True, width="stretch")
            st.download_button("Download as CSV", frame.to_csv(index=False), file_name="domainbench-compare.csv",
                               mime="text/csv")


main()

"""Compare: models across domains — a models × domains heatmap, a ranking with its change from
clean to corrupted, and a per-family breakdown, over any set of runs kept in the URL (``?runs=a,b``).

Runs of one domain on the same dataset and image count share a column (averaged); runs that
differ from the rest in dataset, image count or models are flagged, never silently mixed.
"""

from __future__ import annotations

import streamlit as st

from domainbench.store.status import run_status
from domainbench.store import Store
from domainbench.store.records import RunRecord
from domainbench.frontend import cached, data, exports, figures
from domainbench.frontend.ui import DEMO_HINT, get_store, guard, sidebar_store

RUNS_PARAM = "runs"
SELECT_KEY = "compare-runs"
#: at most this many runs are chosen when the URL names none (the newest finished run per domain)
DEFAULT_RUNS = 8
FAMILY_METRICS = {"accuracy": ("balanced accuracy", False, True), "ce": ("CE", True, False),
                  "rce": ("rCE", True, False), "fr": ("FR", True, False)}


def default_selection(runs: list[RunRecord]) -> list[str]:
    """The newest finished run of each domain (newest domains first), at most DEFAULT_RUNS."""
    chosen: dict[str, str] = {}
    for r in runs:  # newest first
        if r.domain_id not in chosen and run_status(r) == data.FINISHED:
            chosen[r.domain_id] = r.run_id
    return list(chosen.values())[:DEFAULT_RUNS]


def _add_domain_runs(by_domain: dict[str, list[str]]) -> None:
    did = st.session_state.get("compare-add-domain")
    if did:
        current = st.session_state.get(SELECT_KEY, [])
        st.session_state[SELECT_KEY] = list(dict.fromkeys([*current, *by_domain[did]]))


def choose_runs(runs: list[RunRecord]) -> list[str]:
    by_id = {r.run_id: r for r in runs}
    status = {r.run_id: run_status(r) for r in runs}
    from_url = [r for r in st.query_params.get(RUNS_PARAM, "").split(",") if r]
    unknown = [r for r in from_url if r not in by_id]
    if unknown:
        st.warning(f"Not in this store, left out: {', '.join(unknown)}")
    known = [r for r in from_url if r in by_id]
    # a default only for the session's first draw: afterwards the widget's own state rules
    # (the "add a domain" button writes it), and Streamlit refuses both at once
    default = None if SELECT_KEY in st.session_state else (known if from_url else default_selection(runs))
    chosen = st.multiselect(
        f"runs ({len(runs)} stored; runs of one domain share a column)", list(by_id), default=default,
        format_func=lambda r: f"[{status[r]}] {data.run_label(by_id[r])}", key=SELECT_KEY,
        placeholder="choose runs to compare",
    )
    by_domain: dict[str, list[str]] = {}
    for r in runs:
        if status[r.run_id] == data.FINISHED:
            by_domain.setdefault(r.domain_id, []).append(r.run_id)
    text = {r.domain_id: data.short_text(r.domain.domain or "?", 60) for r in runs}
    c1, c2 = st.columns([4, 1])
    c1.selectbox("add every finished run of a domain", list(by_domain), index=None, key="compare-add-domain",
                 format_func=lambda d: f"{text[d]} ({len(by_domain[d])} runs)", placeholder="choose a domain")
    c2.button("Add", on_click=_add_domain_runs, args=(by_domain,), key="compare-add")
    st.query_params[RUNS_PARAM] = ",".join(chosen)  # the selection is part of the link
    return chosen


def flagged_note(comparison: data.Comparison) -> None:
    if not comparison.flagged:
        return
    lines = "\n".join(f"- `{rid}`: {why}" for rid, why in comparison.flagged.items())
    st.warning("**Not comparable with the rest** — these runs differ from most chosen runs; a domain with runs on "
               "several datasets or image counts gets one column per setup:\n" + lines)


def heatmap_section(comparison: data.Comparison, metric: str) -> None:
    label, lower_better = data.COMPARE_METRICS[metric]
    pct = metric in ("acc", "mean_corrupted_acc", "safe_acc")
    matrix = data.metric_matrix(comparison.frame, metric)
    per_group = {g: len(r) for g, r in data.group_runs(comparison.frame).items()}
    exports.chart(figures.metric_heatmap(matrix, label, lower_better, pct, per_group), f"compare-{metric}", "heatmap")
    shown = matrix * 100.0 if pct else matrix
    exports.table(shown, f"compare-{metric}-models-x-domains", "heatmap", hide_index=False,
                  column_config={c: st.column_config.NumberColumn(c, format="%.1f" if pct else "%.3f")
                                 for c in shown.columns})


def ranking_section(comparison: data.Comparison) -> None:
    st.subheader("Ranking: clean → corrupted")
    ranking = data.ranking_frame(comparison.frame)
    exports.table(ranking, "compare-ranking", "ranking", column_config={
        "clean acc %": st.column_config.NumberColumn("clean acc %", format="%.1f"),
        "corrupted acc %": st.column_config.NumberColumn("corrupted acc %", format="%.1f"),
        "mean mCE": st.column_config.NumberColumn("mean mCE", format="%.3f"),
        "rank change": st.column_config.NumberColumn("rank change", format="%+d",
                                                     help="clean rank − corrupted rank: positive climbs under corruption"),
    })
    exports.chart(figures.rank_change(ranking), "compare-rank-change", "rank-change")
    st.caption("Accuracies are averaged over the domain columns a model was evaluated in (`domains`).")


def family_section(comparison: data.Comparison) -> None:
    st.subheader("Per corruption family")
    metric = st.radio("family metric", list(FAMILY_METRICS), format_func=lambda k: FAMILY_METRICS[k][0],
                      horizontal=True, key="compare-family-metric")
    label, lower_better, pct = FAMILY_METRICS[metric]
    matrix = data.family_matrix(comparison.per_corruption, metric)
    exports.chart(figures.metric_heatmap(matrix, label, lower_better, pct, x_title="corruption family"),
                  f"compare-family-{metric}", "family")
    exports.table(comparison.per_corruption, "compare-per-corruption", "per-corruption")


def show_comparison(store: Store, chosen: list[str]) -> None:
    c1, c2 = st.columns(2)
    metric = c1.selectbox("metric", list(data.COMPARE_METRICS), format_func=lambda k: data.COMPARE_METRICS[k][0])
    shared = data.shared_models(store, chosen)
    base = c2.selectbox(
        "baseline for mCE / rCE / mFR", ["(each run's own)", *shared],
        help="A model evaluated in every chosen run makes the relative metrics comparable across domains.",
    )
    baseline = None if base.startswith("(") else base
    # one cached report per run and baseline, shared with the Runs page
    comparison = data.compare_runs(store, chosen, baseline, load_view=cached.view_loader(store))
    for p in comparison.problems:
        st.warning(f"left out: {p}")
    frame = comparison.frame
    if frame.empty:
        st.info("None of the chosen runs has results yet.")
        return
    flagged_note(comparison)
    if frame["partial"].any():
        partial = sorted(set(frame.loc[frame["partial"], "domain"]))
        st.warning(f"**Partial results** for {', '.join(partial)}: those runs are not finished; their numbers "
                   "cover the units stored so far.")
    if baseline is None and frame["baseline"].nunique() > 1:
        st.caption("The runs use different baselines, so mCE / rCE / mFR are not directly comparable across "
                   "domains; pick a shared baseline above.")
    heatmap_section(comparison, metric)
    ranking_section(comparison)
    with guard("drawing the family breakdown"):
        family_section(comparison)
    with st.expander("all numbers, one row per run and model"):
        exports.table(frame.drop(columns=["domain_text"]), "domainbench-compare", "all")


def main() -> None:
    st.title("Compare models across domains")
    with guard("opening the results store"):
        store = get_store()
        sidebar_store(store)
        cached.warm_corruption_registry()
        runs = store.list_runs()
        if not runs:
            st.info(DEMO_HINT)
            return
        chosen = choose_runs(runs)
        if not chosen:
            st.info("Choose at least one run (or add every run of a domain).")
            return
        show_comparison(store, chosen)


main()

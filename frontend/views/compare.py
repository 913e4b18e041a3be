"""Compare: models across domains — a models × domains heatmap, a ranking with its change from
clean to corrupted, and a per-family breakdown, over any set of runs kept in the URL (``?runs=a,b``).

Runs of one domain on the same dataset and image count share a column (averaged); runs that
differ from the rest in dataset, image count or models are flagged, never silently mixed.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from domainbench import query
from domainbench.query import RunRecord, Store, run_status
from domainbench.metrics.registry import metric, metrics_of
from domainbench.stats.bootstrap import DEFAULT_RESAMPLES
from domainbench.frontend import cached, data, decision, exports, figures, units, url_state, verdict
from domainbench.frontend.views import fmr_section
from domainbench.frontend.ui import DEMO_HINT, get_store, guard, md_escape, sidebar_store

RUNS_PARAM = "runs"
SELECT_KEY = "compare-runs"
#: at most this many runs (one per domain) are chosen when the URL names none
DEFAULT_RUNS = 8
#: ratios to the baseline: their colour scales are centred on 1.0
RATIO_METRICS = data.RATIO_FIELDS
#: per-corruption metrics: column of the comparison's per-corruption frame -> (label, lower is better, percent)
FAMILY_METRICS = {
    "accuracy": (metric("balanced_accuracy").display, metric("balanced_accuracy").lower_is_better, True),
    **{m.field: (m.display, m.lower_is_better, m.percent) for m in metrics_of("corruption") if m.field},
}


METRIC_PARAM, BASELINE_PARAM, FLAGGED_PARAM = "metric", "baseline", "flagged"
OWN_BASELINE = "(each run's own)"


def default_selection(runs: list[RunRecord]) -> data.DefaultSelection:
    """Per domain the most complete comparable run (``data.default_selection``), at most DEFAULT_RUNS."""
    return data.default_selection(runs, DEFAULT_RUNS)


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
    default = None if SELECT_KEY in st.session_state else (known if from_url else None)
    if SELECT_KEY not in st.session_state and not from_url:
        picked = default_selection(runs)
        default = picked.runs
        n_fmr = sum(1 for r in runs if r.fmr is not None)
        setup = ("" if picked.setup is None else f", all on {picked.setup[0]} with {picked.setup[1]} images and "
                 f"models {', '.join(picked.setup[2])}")
        # one caption, not two: at 1,024 px the verdict must start on the first screen
        st.caption(f"Chosen by default: the most complete finished corruption run of each domain ({len(default)} runs"
                   f"{setup}), so every one is comparable with the others"
                   + (f"; the {n_fmr} FMR run(s) are compared in their own section below." if n_fmr else ".")
                   + " Change the selection below; the link keeps it."
                   + (" Not in the default: " + "; ".join(f"{md_escape(d)} ({why})" for d, why in picked.left_out.items())
                      + "." if picked.left_out else ""))
    chosen = st.multiselect(
        f"runs ({len(runs)} stored; runs of one domain share a column)", list(by_id), default=default,
        # the whole run id, first: Streamlit tells options apart by their label, and a chip too narrow for it (1,024 px)
        # cuts the end, the domain's text, which the id's own slug begins anyway
        format_func=lambda r: f"{r} [{status[r]}] · {data.short_text(by_id[r].domain.domain or '?', 40)}", key=SELECT_KEY,
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


def flagged_note(flagged: dict[str, str]) -> bool:
    """Name the runs that cannot be compared with the rest; whether the user includes them anyway."""
    if not flagged:
        return False
    lines = "\n".join(f"- `{rid}`: {md_escape(why)}" for rid, why in flagged.items())
    st.warning("**Not comparable with the rest** — these runs differ from most chosen runs (other images, "
               "models or severity ladders), so they are left out of the heatmap, the ranking, the averages and the "
               "choice of the shared baseline:\n" + lines)
    include = st.checkbox("include them anyway", value=st.query_params.get(FLAGGED_PARAM) == "1",
                          key="compare-include-flagged")
    st.query_params[FLAGGED_PARAM] = "1" if include else "0"
    return include


#: the ranking's averages shown with their interval -> (the column of that text, the header of the metric averaged);
#: the run page's names
RANKING_CI = {"clean acc %": (verdict.CI_COLUMNS["clean acc %"], "clean acc %"),
              "corrupted acc %": (verdict.CI_COLUMNS["corrupted acc %"], "corrupted acc %"),
              "mean mCE": (verdict.ci_column("mean mCE"), "mCE")}


def ranking_with_intervals(comparison: data.Comparison, draws: data.Draws) -> pd.DataFrame:
    """The ranking (``data.ranking_frame``) with the 95 % intervals of its averages and ranks (``data.RANKING_INTERVALS``'
    columns) and, beside each average of ``RANKING_CI``, its "61.2 % (58.1–64.3)" column."""
    ranking = data.ranking_frame(comparison.frame)
    bounds = data.ranking_intervals(comparison.frame, draws)
    out = ranking.join(bounds, on="model")
    for column, (ci, _) in RANKING_CI.items():
        _, low, high = data.RANKING_INTERVALS[column]
        scale = 100.0 if column.endswith("%") else 1.0
        text = [verdict.pm(v / scale, None if np.isnan(lo) else (lo / scale, hi / scale), scale == 100.0)
                for v, lo, hi in zip(out[column], out[low], out[high], strict=True)]
        out.insert(out.columns.get_loc(column) + 1, ci, text)
    return out


def overall_sentence(ranking: pd.DataFrame) -> str | None:
    """Across the domain columns: which model keeps the most accuracy under corruption (with its 95 % interval),
    and the runner-up."""
    ranking = ranking.dropna(subset=["corrupted acc %"])
    if ranking.empty:
        return None
    best = ranking.iloc[0]
    corrupted = verdict.CI_COLUMNS["corrupted acc %"]
    line = (f"Across {int(best['domains'])} domain(s), {best['model']} keeps the most accuracy under corruption: "
            f"{best[corrupted]} (clean {best[verdict.CI_COLUMNS['clean acc %']]})")
    def fewer(row: pd.Series) -> str:  # the ranking's note on fewer domains (not its mCE note: no mCE is in here)
        return row["note"].split(";")[0] if row["note"].startswith("averaged over") else ""

    if len(ranking) > 1:
        second = ranking.iloc[1]
        line += f", ahead of {second['model']} ({second[corrupted]}" + (f"; {fewer(second)})" if fewer(second) else ")")
    if fewer(best):
        line += f" — {best['model']} is {fewer(best)}, so this is not a like-for-like average"
    return line + ". Per domain, the paired test on the same images says:"


VERDICTS_PARAM = "verdicts"
#: domains whose paired verdict is computed without being asked
VERDICT_RUNS = 3


def _all_verdicts() -> None:
    st.query_params[VERDICTS_PARAM] = "all" if st.session_state["compare-all-verdicts"] else "first"


def verdict_section(store: Store, comparison: data.Comparison, ranking: pd.DataFrame) -> None:
    """The answer first: the overall ranking in a sentence, then each domain's verdict (the run page's own,
    the statistics' paired test with its 95 % interval), before any table or chart."""
    runs = list(dict.fromkeys(comparison.frame["run"]))
    groups = dict(zip(comparison.frame["run"], comparison.frame["group"], strict=True))
    lines, missing = [], []
    # each domain's paired test reads its run's per-image outcomes (seconds per run the first time, cached
    # after): the first VERDICT_RUNS at once, the rest when asked (the choice lives in the link)
    everything = st.query_params.get(VERDICTS_PARAM) == "all"
    later = [] if everything else runs[VERDICT_RUNS:]
    for rid in runs[: len(runs) - len(later)]:
        sentences, why = verdict.verdicts(store, store.description, rid, data.run_fingerprint(store, rid))
        if sentences:
            lines += [(groups[rid], s) for s in sentences]
        else:
            missing.append(f"{groups[rid]}: {why}")
    overall = overall_sentence(ranking)
    with st.container(border=True, key="compare-verdict"):
        st.markdown("**Verdict** (95 % intervals; a difference is called only where the paired test finds it)")
        if overall:
            st.text(overall)
        for group, sentence in lines:
            st.text(f"{group}: {sentence}")
        if missing:
            st.caption("No verdict for " + "; ".join(missing))
        if later or everything and len(runs) > VERDICT_RUNS:
            st.checkbox(f"the paired verdict of every domain ({len(runs)}; {len(later)} more, a few seconds each the "
                        "first time)", value=everything, key="compare-all-verdicts", on_change=_all_verdicts)


#: what every interval of this page is, said once under the heatmap and referred to below it
INTERVAL_NOTE = ("(low–high) and bars: 95 % intervals, normal with a smoothed per-class variance, drawn {resamples:,} times "
                 "with one multiplier per image of each run (docs/reading-the-numbers.md). The cells of a run are the "
                 "same images, so a mean over them (the corrupted average, a family) is drawn jointly; runs on the "
                 "same images are drawn jointly, runs on other images independently, and a mean over runs averages "
                 "their values draw by draw.")


def interval_table(matrix: pd.DataFrame, bounds: tuple[pd.DataFrame, pd.DataFrame], pct: bool) -> pd.DataFrame:
    """The matrix as text, each value with its interval's ends: "61.2 % (58.1–64.3)" (a value without one: "61.2 %")."""
    low, high = (b.reindex(index=matrix.index, columns=matrix.columns) for b in bounds)

    def cell(r: str, c: str) -> str:
        v, lo, hi = matrix.loc[r, c], low.loc[r, c], high.loc[r, c]
        return verdict.pm(None if np.isnan(v) else float(v), None if np.isnan(lo) else (float(lo), float(hi)), pct)

    return pd.DataFrame([[cell(r, c) for c in matrix.columns] for r in matrix.index], index=matrix.index,
                        columns=matrix.columns)


def draws_note(draws: data.Draws) -> None:
    """The method of the page's intervals, and the runs that have none (and why)."""
    resamples = next((d.resamples for d in draws.values() if not isinstance(d, str)), DEFAULT_RESAMPLES)
    st.caption(INTERVAL_NOTE.format(resamples=resamples))
    by_reason: dict[str, list[str]] = {}
    for rid, why in data.draws_problems(draws).items():
        by_reason.setdefault(why, []).append(rid)
    if by_reason:
        st.caption("No interval on the averages that include " + "; ".join(
            f"{', '.join(rids)} ({why})" for why, rids in by_reason.items()))


def heatmap_section(comparison: data.Comparison, metric: str, draws: data.Draws) -> None:
    label, lower_better = data.COMPARE_METRICS[metric]
    pct = metric in ("acc", "mean_corrupted_acc", "safe_acc")
    matrix = data.metric_matrix(comparison.frame, metric)
    bounds = data.metric_intervals(comparison.frame, draws, metric)
    per_group = {g: len(r) for g, r in data.group_runs(comparison.frame).items()}
    center = 1.0 if metric in RATIO_METRICS else None
    exports.chart(figures.metric_heatmap(matrix, label, lower_better, pct, per_group, center=center, bounds=bounds),
                  f"compare-{metric}", "heatmap")
    # the metric's meaning from the registry; a ratio's colour scale is centred on the baseline's 1.0
    st.caption(units.metric_line(units.model_metric(metric))
               + (" 1.0 (as robust as the baseline) is the neutral colour." if center is not None else ""))
    # each value with its interval; the CSV's corner cell names the metric and its unit (the columns are domains)
    shown = interval_table(matrix, bounds, pct).rename_axis(f"model · {units.model_metric(metric).table_header}")
    exports.table(shown, f"compare-{metric}-models-x-domains", "heatmap", hide_index=False)
    if metric not in data.DRAWN_METRICS:
        st.caption(f"{label} has no interval here (no per-resample value is computed for it).")
    draws_note(draws)


def ranking_section(ranking: pd.DataFrame, groups: dict[str, str] | None = None) -> None:
    st.subheader("Ranking: clean → corrupted")
    shown = ranking.drop(columns=[c for _, low, high in data.RANKING_INTERVALS.values() for c in (low, high)])
    ci_note = "The interval is of the average over the domain columns (drawn, see above)."
    # an average shown once, with its interval ("82.9 % (63.0–98.2)"), so the table fits 1,024–1,400 px; the CSV keeps
    # the bare value beside it
    order = [c for c in shown.columns if not (c in RANKING_CI and RANKING_CI[c][0] in shown.columns)]
    exports.table(shown, "compare-ranking", "ranking", column_order=order, column_config={
        "clean acc %": st.column_config.NumberColumn("clean acc %", format="%.1f"),
        "corrupted acc %": st.column_config.NumberColumn("corrupted acc %", format="%.1f"),
        **{ci: st.column_config.TextColumn(ci, help=f"{verdict.ci_help(header)} {ci_note}")
           for ci, header in RANKING_CI.values()},
        "mean mCE": st.column_config.NumberColumn("mean mCE", format="%.3f",
                                                  help=f"{metric('mce').help} Averaged over the domain columns."),
        "rank change": st.column_config.NumberColumn("rank change", format="%+d",
                                                     help="clean rank − corrupted rank: positive climbs under corruption"),
    })
    if ranking["note"].astype(bool).any():
        st.warning("Not every model has every domain: " + "; ".join(
            f"{m}: {n}" for m, n in zip(ranking["model"], ranking["note"], strict=True) if n)
            + ". Its averages cover only its own domains (the note column).")
    fig = figures.rank_change(ranking, groups)
    # the tied groups' clause on a line of its own: in one line the title runs past the column at 1,024–1,400 px
    if fig.layout.title.text and "; letters:" in fig.layout.title.text:
        fig.update_layout(title_text=fig.layout.title.text.replace("; letters:", ";<br>letters:", 1),
                          margin={"t": max(fig.layout.margin.t or 0, 90)})
    exports.chart(fig, "compare-rank-change", "rank-change")
    st.caption("Accuracies (%) are averaged over the domains a model was evaluated in (`domains`; a domain with "
               "several columns counts once, its columns averaged first); mean mCE is "
               "a ratio to the baseline (1.0 = as robust as the baseline, lower is better). A rank's bar is the 95 % "
               "interval of the model's rank over the same resamples as the accuracies' intervals.")


def groups_section(joint: decision.JointGroups) -> None:
    """The chosen runs' tied groups in a line under the ranking (their letters are beside the ranks above)."""
    with st.container(key="compare-groups"):
        if joint.letters:
            st.text(joint.sentence)
            st.caption("Tied groups over every chosen run together: one paired test per pair of models over all the "
                       "runs' corrupted cells (each cell once, a cell two runs made alike counted once), the run "
                       "verdicts' test, Holm-adjusted; the rank chart writes each model's letters beside its corrupted "
                       "rank.")
        else:
            st.caption(f"No tied groups across the chosen runs: {md_escape(joint.why)}")


def cost_section(comparison: data.Comparison, records: list[RunRecord], ranking: pd.DataFrame,
                 joint: decision.JointGroups) -> None:
    """Cost beside robustness over the chosen runs: each model's corrupted accuracy (the ranking's, with its
    interval) against its images/s over all of them, the Pareto-efficient models starred (``metrics.cost``)."""
    from domainbench.frontend import cost_view

    st.subheader("Cost beside robustness")
    runs = set(comparison.frame["run"])
    costs = decision.costs_across([r.timings for r in records if r.run_id in runs], ranking)
    if not any(c.images_per_second is not None for c in costs):
        st.info("None of the chosen runs stored stage timings for its models, so their images/s are not known.")
        return
    # one chance line where every chosen run guesses among as many classes (an average over domains of different
    # class counts has no single chance level)
    counts = {len(r.dataset.classes) for r in records if r.run_id in runs and r.dataset is not None}
    chance = 1.0 / counts.pop() if len(counts) == 1 else None
    exports.chart(cost_view.pareto_figure(costs, decision.bounds_of(ranking), chance=chance), "compare-cost", "cost")
    line = decision.cost_sentence(costs, joint)
    if line:
        st.text(line[0].upper() + line[1:] + ".")
    exports.table(pd.DataFrame([{"model": c.model, "images": c.images, "seconds": c.seconds,
                                 "images/s": c.images_per_second,
                                 "corrupted acc %": None if c.corrupted_accuracy is None else 100 * c.corrupted_accuracy,
                                 "group": joint.letters.get(c.model, ""), "Pareto-efficient": c.pareto}
                                for c in costs]),
                  "compare-cost", "cost-table", column_config={
                      "seconds": st.column_config.NumberColumn("seconds", format="%.2f"),
                      "images/s": st.column_config.NumberColumn("images/s", format="%.1f"),
                      "corrupted acc %": st.column_config.NumberColumn("corrupted acc %", format="%.1f")})
    st.caption("images/s: the images each model scored over its preprocess + forward seconds, summed over the chosen "
               "runs (each on its own machine, shared with what else ran there: it ranks these runs' models, it is "
               "no benchmark across machines). Accuracy: the ranking's corrupted accuracy over the domain columns, "
               "with its 95 % interval. Stars: Pareto-efficient, no other model at least as accurate and as fast.")


def family_section(comparison: data.Comparison, draws: data.Draws) -> None:
    st.subheader("Per corruption family")
    metric = st.radio("family metric", list(FAMILY_METRICS), format_func=lambda k: FAMILY_METRICS[k][0],
                      horizontal=True, key="compare-family-metric",
                      help=units.options_help(data.PER_CORRUPTION_METRICS[k] for k in FAMILY_METRICS))
    label, lower_better, pct = FAMILY_METRICS[metric]
    matrix = data.family_matrix(comparison.per_corruption, metric)
    bounds = data.family_intervals(comparison.per_corruption, draws, metric)
    exports.chart(figures.metric_heatmap(matrix, label, lower_better, pct, x_title="corruption family",
                                         center=1.0 if metric in RATIO_METRICS else None, bounds=bounds),
                  f"compare-family-{metric}", "family")
    if not matrix.empty:
        shown = interval_table(matrix, bounds, pct).rename_axis(f"model · {label}{' %' if pct else ''}")
        exports.table(shown, f"compare-family-{metric}-models-x-families", "family-table", hide_index=False)
        st.caption("A family's value averages its corruptions' values over every chosen run; its interval resamples "
                   "each run's images once for all of that run's cells (see the note above). Compositions (stacked "
                   f"corruptions) are the `{data.COMPOSED}` column; real-shift cells are never in a family (below).")
        if metric in data.RATIO_FIELDS and (mixed := data.mixed_baselines(data.family_rows(comparison.per_corruption),
                                                                          "family")):
            st.warning(f"{label} refused (—) in " + ", ".join(mixed) + ": its runs use different baselines ("
                       + ", ".join(sorted({b for v in mixed.values() for b in v})) + "); choose a shared baseline above.")
    # per run × model × corruption, each value with the run's own interval (the real-shift cells apart, below)
    verdict.per_corruption_table(data.corruption_bounds(data.family_rows(comparison.per_corruption), draws),
                                 "compare-per-corruption", "per-corruption")


def shift_section(store: Store, comparison: data.Comparison) -> None:
    """The real-shift cells (the user's own images) apart from every family and average, each with its run's
    own 95 % interval (the run page's cell interval)."""
    rows = data.shift_rows(comparison.per_corruption)
    if rows.empty:
        return
    st.subheader("Real shift: your own images")
    parts = []
    for rid, part in rows.groupby("run", sort=False):
        report = comparison.reports[rid]
        ri = verdict.run_intervals(store, store.description, report, rid, report.baseline,
                                   data.run_fingerprint(store, rid))
        parts.append(data.corruption_bounds(part, {}, rid, cells=verdict.cell_bands(ri)))
    frame = pd.concat(parts, ignore_index=True)
    shown = units.as_percent(verdict.with_ci_text(frame[["group", "run", "model", "corruption", "accuracy",
                                                         "accuracy_lo", "accuracy_hi"]],
                                                  {"accuracy": (verdict.ci_column("accuracy %"), True)}),
                             {"accuracy": "accuracy %"})
    exports.table(shown.rename(columns={"group": "domain", "corruption": "shift"}), "compare-real-shift", "shift",
                  column_order=[c for c in shown.rename(columns={"group": "domain", "corruption": "shift"}).columns
                                if c != "accuracy %"])
    st.caption("Balanced accuracy on each run's own shifted images, with the cell's 95 % interval as on the run page. "
               "These cells stay out of every family, average and ranking above (as out of the run's mCE).")


def show_comparison(store: Store, chosen: list[str], runs: list[RunRecord]) -> None:
    by_id = {r.run_id: r for r in runs}
    fmr_runs = [r for r in chosen if by_id[r].fmr is not None]
    chosen = [r for r in chosen if by_id[r].fmr is None]
    if chosen:
        corruption_comparison(store, chosen, [by_id[r] for r in chosen])
    else:
        st.info("No corruption run is chosen: add one above (FMR runs are compared in their own section below).")
    fmr_comparison(store, fmr_runs, runs)


def corruption_comparison(store: Store, chosen: list[str], records: list[RunRecord]) -> None:
    c1, c2 = st.columns(2)
    metrics = list(data.COMPARE_METRICS)
    metric = c1.selectbox("metric", metrics, index=url_state.index(METRIC_PARAM, metrics, "mce"),
                          format_func=lambda k: data.COMPARE_METRICS[k][0], key="compare-metric",
                          on_change=url_state.bound, args=(METRIC_PARAM, "compare-metric"),
                          help=units.options_help(units.model_metric(k) for k in metrics))
    # what is not comparable is left out before anything is read, the baseline's choice included
    _, flagged = data.included_runs(records, True)
    include = flagged_note(flagged)
    included, _ = data.included_runs(records, include)
    if not included:
        st.info("Every chosen run is flagged as not comparable; include them above to see their numbers.")
        return
    shared = data.shared_of(included)
    options = [*shared, OWN_BASELINE]
    base = c2.selectbox(
        "baseline for mCE / rCE / mFR", options,
        index=url_state.index(BASELINE_PARAM, options, data.default_baseline(included, shared) or OWN_BASELINE),
        help="One model evaluated in every compared run, so the ratios of every domain share a reference; by "
             "default the baseline the runs' own pages use. With each run's own, ratios to different baselines "
             "are never averaged.",
        key="compare-baseline", on_change=url_state.bound, args=(BASELINE_PARAM, "compare-baseline"),
    )
    baseline = None if base == OWN_BASELINE else base
    # one cached report per run and baseline, shared with the Runs page
    comparison = data.compare_runs(store, [r.run_id for r in included], baseline, load_view=cached.view_loader(store))
    comparison.flagged = flagged
    for p in comparison.problems:
        st.warning(f"left out: {p}")
    frame = comparison.frame
    if frame.empty:
        st.info("None of the chosen runs has results yet.")
        return
    if frame["partial"].any():
        partial = sorted(set(frame.loc[frame["partial"], "domain"]))
        st.warning(f"**Partial results** for {md_escape(', '.join(partial))}: those runs are not finished; their "
                   "numbers cover the units stored so far.")
    mixed_note(comparison)
    draws = cached.compare_draws(store, comparison)
    ranking = ranking_with_intervals(comparison, draws)
    with guard("comparing the models image by image"):
        verdict_section(store, comparison, ranking)
    heatmap_section(comparison, metric, draws)
    joint = decision.JointGroups(why="the paired comparison failed")
    with guard("grouping the models by what the data can tell apart"):
        joint = decision.groups_of(store, list(dict.fromkeys(frame["run"])))
    ranking_section(ranking, joint.letters)
    groups_section(joint)
    with guard("setting cost beside robustness"):
        cost_section(comparison, records, ranking, joint)
    with guard("drawing the family breakdown"):
        family_section(comparison, draws)
    with guard("showing the real-shift cells"):
        shift_section(store, comparison)
    with st.expander("all numbers, one row per run and model"):
        all_numbers(frame, draws)


def mixed_note(comparison: data.Comparison) -> None:
    """Say which columns' ratios are refused: their runs use different baselines (a mean of them is no ratio)."""
    mixed = data.mixed_baselines(comparison.frame)
    if mixed:
        st.warning("**Ratios refused** in " + "; ".join(f"{md_escape(g)} (baselines {', '.join(b)})"
                                                        for g, b in mixed.items())
                   + ": the runs of the column use different baselines, so mCE / rCE / mFR and their per-corruption "
                   "ratios are not averaged there (shown as —). Choose one shared baseline above.")
    elif comparison.frame["baseline"].nunique() > 1:
        st.caption("The domains use different baselines, so their mCE / rCE / mFR are not on one scale and no mean "
                   "over domains is shown; pick a shared baseline above.")


def all_numbers(frame: pd.DataFrame, draws: data.Draws) -> None:
    """Per run × model, every number of the run's summary; each value with its interval (the run's own, from
    its draws) shown in its place, as on the run page (the CSV keeps both)."""
    headers = {m.field: m.table_header for m in metrics_of("model") if m.field}
    ci = {f: (verdict.CI_COLUMNS[headers[f]], f in units.rate_fields()) for f in data.DRAWN_METRICS}
    shown = units.as_percent(verdict.with_ci_text(data.run_bounds(frame, draws), ci).drop(columns=["domain_text"]),
                             {f: headers[f] for f in units.rate_fields()})
    shown = shown.rename(columns={f: headers[f] for f in units.ratio_fields() | {"corr"} if f in headers})
    exports.table(shown, "domainbench-compare", "all",
                  column_order=[c for c in shown.columns if verdict.CI_COLUMNS.get(c) not in shown.columns],
                  column_config={**{headers[f]: st.column_config.NumberColumn(headers[f], format="%.1f")
                                    for f in units.rate_fields()},
                                 **{headers[f]: st.column_config.NumberColumn(headers[f], format="%.3f")
                                    for f in units.ratio_fields()},
                                 **{c: st.column_config.TextColumn(c, help=verdict.ci_help(h))
                                    for h, c in verdict.CI_COLUMNS.items()}})


def fmr_comparison(store: Store, chosen: list[str], runs: list[RunRecord]) -> None:
    """FMR runs side by side: their own numbers (SA, PA, FMR), never mixed into the corruption ranking."""
    stored = [r for r in runs if r.fmr is not None]
    if not stored:
        return
    st.subheader("FMR runs")
    if not chosen:
        st.caption(f"{len(stored)} FMR run(s) stored; add them to the selection above to compare them here.")
        return
    load = cached.view_loader(store)
    by_id = {r.run_id: r for r in runs}
    reports = [(rid, by_id[rid].domain.domain, v.report) for rid in chosen if (v := load(rid, None)).report is not None]
    frame = fmr_section.compare_frame(reports)
    exports.table(frame, "compare-fmr", "fmr", column_config={
        **fmr_section.column_config(), "domain": st.column_config.TextColumn("domain", width="medium")})
    if frame["note"].astype(bool).any():
        st.warning("A tested model that is also an oracle member gets FMR near 100 by construction; those rows are "
                   "marked in the note column.")


def main() -> None:
    st.title("Compare models across domains")
    with guard("opening the results store"):
        store = get_store()
        sidebar_store(store)
        cached.warm_corruption_registry()
        runs = query.list_runs(store)
        if not runs:
            st.info(DEMO_HINT)
            return
        chosen = choose_runs(runs)
        if not chosen:
            st.info("Choose at least one run (or add every run of a domain).")
            return
        show_comparison(store, chosen, runs)


main()

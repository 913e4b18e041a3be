"""Runs: every domain and run (filter, search, live progress), and one run in depth at ``?run=ID``.

The run view reads the run's stored report (cached per baseline and progress) and draws only
the open tab; the open tab and the baseline live in the URL (``&tab=…&baseline=…``), so a link
shares them and a refresh of a running run's numbers (a fragment re-run every few seconds) never
resets them. The list's filters live in the URL too (``?search=…&status=…&dataset=…&domain=…``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import streamlit as st

from domainbench import query
from domainbench.query import RunRecord, Store, run_status
from domainbench.records.report import RunReport
from domainbench.runtime.literal import printable
from domainbench.frontend import (cached, data, exports, figures, ladder, progress, run_actions, shift_section, units,
                                  url_state, verdict)
from domainbench.frontend.views import fmr_section
from domainbench.frontend.views.damage_tab import damage_tab
from domainbench.frontend.ui import (DEMO_HINT, get_store, glossary, guard, literal_text, md_escape, sidebar_store,
                                     status_badge)
from domainbench.metrics.letters import GROUP_NOTE
from domainbench.metrics.registry import metric as declared
from domainbench.metrics.threat import UNSAFE_SHARE_CUT
from domainbench.stats.bootstrap import DEFAULT_RESAMPLES
from domainbench.stats.smoothed import FEW_IMAGES_NOTE

REFRESH_S = 5
#: the Runs list's progress column: the share of the run's units stored, in %
PROGRESS = "progress %"
#: statuses in which a run may change without the user doing anything
LIVE_STATUSES = ("queued", "running", "interrupted")
RUN_PARAM = "run"
TAB_KEY = "tab"  # also the query parameter holding the open tab
#: the run page's baseline; the list's filters
BASELINE_PARAM = "baseline"
SEARCH_PARAM, STATUS_PARAM, DATASET_PARAM, DOMAIN_PARAM = "search", "status", "dataset", "domain"
STATUSES = ["queued", "running", "done", "failed", "interrupted", "cancelled"]


# --------------------------------------------------------------------------- the list


def open_run(run_id: str) -> None:
    st.query_params[RUN_PARAM] = run_id


def domains_section(store: Store, runs: list[RunRecord]) -> str | None:
    """Every domain with its plan in brief; the chosen one in full. Returns the chosen domain id."""
    st.subheader("Domains")
    domains = data.domains_frame(runs)
    # the plan in brief: its corruptions' names, shortened to the column (at 1,024 px the full "name (severities)"
    # list was cut mid-name and pushed the run count off the table); the full list is the CSV's and, for a chosen
    # domain, the plan below
    table = domains.drop(columns=["domain_id"]).rename(columns={"corruptions": PLAN_FULL}).assign(
        latest=domains["latest"].str.slice(0, 10),
        corruptions=[corruption_names(r.domain.corruptions) for r in
                     (next(x for x in runs if x.domain_id == d) for d in domains["domain_id"])])
    exports.table(table, "domains", "domains", column_order=["domain", "runs", "latest", "corruptions"],
                  column_config={"domain": st.column_config.TextColumn("domain", width=DOMAIN_WIDTH),
                                 "runs": st.column_config.NumberColumn("runs", width=45),
                                 "latest": st.column_config.TextColumn("latest run", width=90,
                                                                       help="the date (UTC) of its newest run"),
                                 "corruptions": st.column_config.TextColumn(
                                     "corruptions", width=PLAN_WIDTH,
                                     help="the plan's corruptions (how many: their names); choose the domain below for "
                                          "its severities and reasons; the CSV holds them all")})
    text = dict(zip(domains["domain_id"], domains["domain"], strict=True))
    options = [None, *domains["domain_id"]]
    chosen = st.selectbox("domain (its plan below; filters the runs)", options,
                          index=url_state.index(DOMAIN_PARAM, options, None),
                          format_func=lambda d: "all domains" if d is None else text[d], key="domain-filter",
                          on_change=url_state.bound, args=(DOMAIN_PARAM, "domain-filter"))
    # planned-but-never-run domains belong on New domain, not beside the runs
    freq = data.selection_frequencies(store, only={r.domain_id for r in runs})
    if chosen is not None:
        plan = next(r.domain for r in runs if r.domain_id == chosen)
        literal_text("Description", plan.domain)
        exports.table(data.plan_frame(plan), f"plan-{chosen}", "plan",
                      column_config={"reason": st.column_config.TextColumn("reason", width="large"),
                                     "selected in %": st.column_config.NumberColumn("selected in %", format="%.0f")})
    with st.expander("selection frequency of every corruption in every planned domain", expanded=chosen is not None):
        highlight = None if chosen is None else data.short_text(text[chosen], 32)
        exports.chart(figures.selection_heatmap(freq, highlight=highlight), "selection-frequency", "selection")
    return chosen


#: the Domains table at a 1,024 px window (about 560 px of table): the description's and the plan's columns (px) and
#: the plan's characters (about 7 px each; the shortened list keeps its head and tail, the CSV's PLAN_FULL all of it)
DOMAIN_WIDTH, PLAN_WIDTH, PLAN_CHARS = 220, 205, 26
PLAN_FULL = "corruptions (severities)"


def corruption_names(choices: Any) -> str:
    """"3: gaussian_noise, brightness, saturate": how many corruptions a plan has and their names, shortened to
    ``PLAN_CHARS`` characters (the count first, so it is never the part cut)."""
    names = [c.name for c in choices]
    return f"{len(names)}: " + figures.short_label(", ".join(names), PLAN_CHARS) if names else "none"


def runs_section(store: Store, runs: list[RunRecord], domain_id: str | None) -> None:
    st.subheader("Runs")
    c1, c2, c3 = st.columns([3, 2, 2])
    search = c1.text_input("search", url_state.text(SEARCH_PARAM), placeholder="run id, domain, model or dataset words",
                           key="runs-search", on_change=url_state.bound, args=(SEARCH_PARAM, "runs-search"))
    statuses = c2.multiselect("status", STATUSES, url_state.chosen(STATUS_PARAM, STATUSES), key="runs-status",
                              on_change=url_state.bound, args=(STATUS_PARAM, "runs-status"))
    names = sorted({r.dataset.name if r.dataset else r.config.dataset for r in runs})
    datasets = c3.multiselect("dataset", names, url_state.chosen(DATASET_PARAM, names), key="runs-dataset",
                              on_change=url_state.bound, args=(DATASET_PARAM, "runs-dataset"))
    # a running run's status and progress refresh in place, without redrawing the page
    live = any(r.status == "running" for r in runs)
    st.fragment(runs_table, run_every=REFRESH_S if live else None)(store, search, statuses, datasets, domain_id, live)


def run_id_width(ids: list[str]) -> int:
    """Pixels for the run column: the longest id in the table's font (about 7.5 px a character) and the cell's padding."""
    return int(7.5 * max(map(len, ids), default=10)) + 24


def runs_table(store: Store, search: str, statuses: list[str], datasets: list[str], domain_id: str | None,
               live: bool) -> None:
    frame = data.filter_runs(data.runs_frame(store), search, statuses, datasets, domain_id)
    if frame.empty:
        st.info("No run matches these filters.")
        return
    # a share in %, under a name that says so (the CSV is the table as shown)
    shown = frame.assign(created=frame["created"].str.slice(0, 16).str.replace("T", " "),
                         progress=100.0 * frame["progress"]).rename(columns={"progress": PROGRESS})
    ids = frame["run"].tolist()
    event = exports.table(
        shown, "runs", "runs", on_select="rerun", selection_mode="single-row",
        column_order=["run", "status", "kind", PROGRESS, "units", "created", "dataset", "images", "domain", "models"],
        # pixel widths: at a 1,400 px window the facts (status .. images) fit before the long texts; the run id (what a
        # user copies) first, pinned and as wide as the longest, so it is never cut or scrolled away
        column_config={
            "run": st.column_config.TextColumn("run", width=run_id_width(ids), pinned=True),
            "status": st.column_config.TextColumn("status", width=85),
            "kind": st.column_config.TextColumn("kind", width=120, help="what the run measures: corruption (the plan's "
                                                "cells), FMR (generated images), adaptive (cells stopped once decided), "
                                                "real shift (your own images beside the plan), composed (stacked "
                                                "corruptions)"),
            # one colour whatever the share: a full bar is done, not an alarm (the theme's red was)
            PROGRESS: st.column_config.ProgressColumn(PROGRESS, min_value=0.0, max_value=100.0, format="%.0f%%",
                                                      width=100, color="blue", help="share of the run's units stored "
                                                      "(a unit: one model × corruption × severity × shard of images)"),
            "units": st.column_config.TextColumn("units", width=120, help="units stored of units planned"),
            "created": st.column_config.TextColumn("created (UTC)", width=135),
            "dataset": st.column_config.TextColumn("dataset", width=110),
            "images": st.column_config.NumberColumn("images", format="%d", width=65),
            "domain": st.column_config.TextColumn("domain", width=200),
            "models": st.column_config.TextColumn("models", width=170),
        },
    )
    label = dict(zip(frame["run"], frame["domain"], strict=True))
    status = dict(zip(frame["run"], frame["status"], strict=True))
    chosen = st.selectbox("open a run (or click its row)", ids, index=None, placeholder="choose a run to open",
                          format_func=lambda r: f"[{status[r]}] {data.short_text(label[r], 60)} · {r}", key="open-run")
    if live:
        st.caption(f":material/autorenew: live: status and progress refresh every {REFRESH_S} s")
    rows = event.selection.rows if event is not None and hasattr(event, "selection") else []
    target = ids[rows[0]] if rows else chosen
    if target:
        open_run(target)
        st.rerun()  # the whole page, not only this fragment: it becomes the run's page


def runs_list(store: Store) -> None:
    runs = query.list_runs(store)
    if not runs:
        st.info(DEMO_HINT)
        return
    domain_id = domains_section(store, runs)
    runs_section(store, runs, domain_id)


# --------------------------------------------------------------------------- one run


@dataclass
class Shown:
    """What every tab of the run view draws from."""

    store: Store
    store_key: str
    view: data.RunView
    report: RunReport
    fingerprint: tuple[Any, ...]
    #: the report's 95 % intervals (``metrics.confidence.RunIntervals``); None where they cannot be computed
    ci: Any = None

    @property
    def run_id(self) -> str:
        return self.view.run_id

    @property
    def chance(self) -> float | None:
        """Balanced accuracy of guessing (1 / classes), for the chance line of every accuracy chart."""
        n = len(self.report.classification.classes)
        return 1.0 / n if n else None


def summary_section(report: RunReport, ci: dict[str, Any] | None = None, notes: list[str] | None = None,
                    groups: dict[str, str] | None = None) -> None:
    """The summary table; ``notes``: the intervals' cautions (``RunIntervals.notes``: few images per class, an
    unresolved rCE), shown under it; ``groups``: each model's tied group letters, a column beside its name."""
    table = verdict.with_intervals(data.summary_frame(report), report, ci)
    if groups:
        table.insert(table.columns.get_loc("model") + 1, "group", [groups.get(m, "") for m in table["model"]])
    shown, folded = summary_columns(table)
    config = {
        "model": st.column_config.TextColumn("model", width=MODEL_WIDTH, pinned=True),
        "baseline": st.column_config.CheckboxColumn("baseline"),
        "group": st.column_config.TextColumn("group", width=GROUP_WIDTH, help=f"Tied groups: {GROUP_NOTE} 0.05."),
        # each metric's header hovers to the registry's help (exports.table adds it)
        **{m.table_header: st.column_config.NumberColumn(m.table_header, format="%.1f" if m.percent else "%.3f",
                                                         width=VALUE_WIDTH)
           for m in data.summary_metrics()},
        **{ci: st.column_config.TextColumn(ci, help=verdict.ci_help(base), width=CI_WIDTH)
           for base, ci in verdict.CI_COLUMNS.items()},
    }
    exports.table(table, f"{report.run_id}-summary", "summary", column_order=shown, column_config=config)
    if folded:
        with st.expander(f"more columns: {', '.join(folded)}"):
            exports.plain_table(table, column_order=["model", *folded], column_config=config, key="summary-more")
    st.caption(
        f"Baseline: {md_escape(report.baseline)} (change it above). "
        "mCE / rCE / mFR are relative to the baseline (1.0 = as robust as the baseline, lower is better). Hover a "
        "column's name for what it means, or open the glossary below (every metric: the Glossary page). "
        f"{exports.MISSING} = not applicable (e.g. unlabelled data), never zero."
    )
    for note in notes or []:
        # a few-images note explains the * beside the intervals it makes approximate
        st.warning(("\\* " if note.startswith(FEW_IMAGES_NOTE) else "") + md_escape(note))
    with st.expander("what the columns mean"):
        glossary(data.summary_metrics())
    notes = data.model_notes(report)
    dropped = report.classification.dropped_cells
    if notes or dropped:
        with st.expander("notes on undefined numbers and left-out cells"):
            for model, lines in notes.items():
                for line in lines:
                    st.markdown(f"- **{md_escape(model)}**: {line}")
            for model, cells in dropped.items():
                st.markdown(f"- **{md_escape(model)}**: {len(cells)} cell(s) not shared by every model, left out of the aggregates")


#: the summary's column widths (px), measured in Chromium: a model name such as "embedded:fmnist-augmented" (about
#: 7 px a character) and a "(95 % CI)" text such as "0.103 (-0.080 to 0.368)*" (about 6 px a character) whole
MODEL_WIDTH, GROUP_WIDTH, CI_WIDTH, VALUE_WIDTH = 200, 50, 165, 80
#: the run page's content width at a 1,400 px window (the sidebar and the page's padding taken off; measured in
#: Chromium): the summary's shown columns fit in it, so nothing is cut or scrolled away
CONTENT_1400 = 940
#: the summary's secondary columns: in a folded "more columns" table (and the CSV), not beside the headline numbers
SECONDARY = ("rCE", "safe-cell acc %", "corr(acc, LFP)", "kind", "baseline")


def summary_columns(table: Any) -> tuple[list[str], list[str]]:
    """(the summary's shown columns, its folded ones): the model, its group, then the headline metrics, those with a
    value first (on an unlabelled run mFR, the one defined number, comes before the accuracies it lacks); where a value
    has its "(95 % CI)" column, that column in its place (the CSV keeps both)."""
    columns = [c for c in table.columns if verdict.CI_COLUMNS.get(c) not in table.columns]
    base = {ci: b for b, ci in verdict.CI_COLUMNS.items()}
    secondary = {*SECONDARY, *(verdict.CI_COLUMNS.get(c) for c in SECONDARY)}

    def defined(c: str) -> bool:
        values = table[base.get(c, c)]
        return bool(values.notna().any()) if values.dtype != object else bool(values.map(lambda v: v is not None).any())

    lead = [c for c in ("model", "group") if c in columns]
    metrics = [c for c in columns if c not in lead and c not in secondary]
    folded = [c for name in SECONDARY for c in (name, verdict.CI_COLUMNS.get(name)) if c in columns]
    return lead + [c for c in metrics if defined(c)] + [c for c in metrics if not defined(c)], folded


def cost_tab(s: Shown) -> None:
    """Cost beside robustness (``metrics.cost``): accuracy against images/s, the Pareto-efficient models starred."""
    from domainbench.frontend import cost_view

    view, ri = s.view, s.ci
    costs = cost_view.costs_of(view.run, view.report)
    if not any(c.images_per_second is not None for c in costs):
        st.info("This run stored no stage timings for its models, so their images/s are not known.")
        return
    bounds = {m.model: m.mean_corrupted_accuracy for m in ri.models} if ri is not None else {}
    exports.chart(cost_view.pareto_figure(costs, bounds, chance=s.chance), f"{view.run.run_id}-cost", "cost")
    st.caption("images/s: the images each model scored over its preprocess + forward seconds on the run's machine "
               "(shared with what else ran there: it ranks this run's models). Stars: Pareto-efficient, no other "
               "model at least as accurate and as fast.")
    cost_view.resource_table(costs, f"{view.run.run_id}-resources")


def pd_kinds(report: RunReport) -> dict[str, list[str]]:
    """The unsafe and borderline cells by the report's one verdict (``ThreatCell.safety``), as every tab names them."""
    return {k: [figures.cell_label(t.corruption, t.severity) for t in report.cells_by_safety(k)]
            for k in ("unsafe", "borderline")}


#: the PD verdict in words, under the PD-threat chart (the rule is ``metrics.threat.pd_safety``'s)
PD_RULE = (f"A cell is safe when the 95 % interval (Clopper–Pearson, the error bar) of the share of its images with PD "
           f"threat above 1 lies below {100 * UNSAFE_SHARE_CUT:g} %, unsafe when it lies above, borderline when it "
           "crosses it.")


def accuracy_tab(s: Shown) -> None:
    report = s.report
    metric = "accuracy" if any(m.labeled for m in report.models) else "lfp"
    if metric == "lfp":
        st.info("The dataset is unlabelled: accuracy does not apply. Label flips are shown instead.")
    shown = "balanced_accuracy" if metric == "accuracy" else "label_flip_probability"
    bands = verdict.cell_bands(s.ci, shown)
    exports.chart(figures.severity_lines(report, metric, bands=bands), f"{s.run_id}-{metric}-vs-severity", "severity")
    kinds = pd_kinds(report)
    few = s.ci is not None and metric == "accuracy" and any(c.approximate for c in s.ci.cells)
    st.caption(f"{units.metric_line(declared(shown))} Shaded red: PD-unsafe severities, amber: borderline (the "
               "corruption may have changed the true label; see the PD threat tab)."
               + (f" Unsafe: {', '.join(kinds['unsafe'])}." if kinds["unsafe"] else " No cell is unsafe.")
               + (f" Borderline: {', '.join(kinds['borderline'])}." if kinds["borderline"] else "")
               + (f" Bands: {FEW_IMAGES_NOTE} (median {s.ci.median_images_per_class:g} per class)." if few else ""))


def per_corruption_tab(s: Shown) -> None:
    # the run's numbers under each of its resamples (the summary's intervals' rows), cached with Compare's
    draws = cached.run_draws(s.store, s.store_key, s.report, s.run_id, s.report.baseline, DEFAULT_RESAMPLES, None,
                             s.fingerprint)
    frame = data.corruption_bounds(data.per_corruption_frame(s.report), {s.run_id: draws}, s.run_id,
                                   cells=verdict.cell_bands(s.ci))
    metrics = data.PER_CORRUPTION_METRICS
    # the tab opens on a metric this run defines (an unlabelled run has no CE: FR, its flips)
    defined = [k for k in metrics if k in frame.columns and frame[k].notna().any()]
    metric = st.radio("metric", list(metrics), horizontal=True, key=f"percorr-{s.run_id}",
                      index=list(metrics).index(defined[0]) if defined else 0,
                      format_func=lambda k: metrics[k].display, help=units.options_help(metrics.values()))
    exports.chart(figures.per_corruption_bars(frame, metric, metrics[metric].display, chance=s.chance),
                  f"{s.run_id}-{metric}-per-corruption", "percorr")
    st.caption("CE, rCE and FR are ratios to the baseline (1.0 = as robust as the baseline, lower is better); mCE, "
               "rCE and mFR are their means. Accuracy (%) is averaged over the corruption's severities. (low–high) and error "
               "bars: 95 % intervals, normal with a smoothed per-class variance, drawn with one multiplier per image (a "
               "corruption's severities are the same images, so their mean is drawn jointly; "
               "docs/reading-the-numbers.md)."
               + (f" No interval: {draws}." if isinstance(draws, str) else ""))
    verdict.per_corruption_table(frame, f"{s.run_id}-per-corruption", "percorr")


def flips_tab(s: Shown) -> None:
    bands = verdict.cell_bands(s.ci, "label_flip_probability")
    cells = figures.lfp_cells(s.report)
    if len(cells) <= figures.LFP_HEATMAP_MAX_COLUMNS:
        exports.chart(figures.lfp_heatmap(s.report, bands), f"{s.run_id}-label-flips", "lfp")
        st.caption(f"{units.metric_line(declared('label_flip_probability'))} Each cell: the value in % and its 95 % "
                   "interval (continuity-corrected Wilson) as (low–high).")
        return
    # too many columns for a heatmap to stay readable: the same numbers, one row per cell, sortable by any model
    table = figures.lfp_table(s.report, bands)
    exports.table(table, f"{s.run_id}-label-flips", "lfp", column_order=list(table.columns[1:]), column_config={
        "corruption": st.column_config.TextColumn("corruption", width=150),
        "severity": st.column_config.NumberColumn("severity", width=70),
        **{c: st.column_config.NumberColumn(c, format="%.1f", help="label flip probability in %")
           for c in table.columns if c.endswith(" LFP %")},
        **{c: st.column_config.TextColumn(c, help="95 % interval of the flip probability in % (continuity-corrected "
                                                  "Wilson)") for c in table.columns if c.endswith(" 95 % CI")}})
    st.caption(f"{units.metric_line(declared('label_flip_probability'))} {len(cells)} cells: too many for a readable "
               "heatmap, so one row per cell; click a column's name to sort by it (most flips first: the model's "
               "LFP % column). Values in %, each with its 95 % interval (continuity-corrected Wilson).")


def threat_tab(s: Shown) -> None:
    report = s.report
    if not report.threat:
        st.info("The PD threat was not measured for this run (it needs labelled images; `--no-threat` turns it off).")
        return
    exports.chart(figures.threat_chart(report), f"{s.run_id}-pd-threat", "threat")
    kinds = pd_kinds(report)
    st.caption(
        f"{units.metric_line(declared('mean_pd_threat'))} {PD_RULE}"
        + (f" Unsafe: {', '.join(kinds['unsafe'])}." if kinds["unsafe"] else " No cell is unsafe.")
        + (f" Borderline: {', '.join(kinds['borderline'])}." if kinds["borderline"] else "")
    )


def stability_tab(s: Shown) -> None:
    # the one tab that draws per-image values, so the one place that loads per-image records
    frame = cached.stability_frame(s.store, s.store_key, s.run_id, s.fingerprint)
    if frame.empty:
        st.info("Embedding stability was not measured for this run (`--stability` turns it on).")
        return
    c1, c2 = st.columns(2)
    metric = c1.selectbox("stability metric", list(data.STABILITY_METRICS), format_func=data.STABILITY_METRICS.get,
                          key=f"stab-metric-{s.run_id}",
                          help=units.options_help(declared(k) for k in data.STABILITY_METRICS))
    kind = c2.radio("distribution as", ["box", "violin"], horizontal=True, key=f"stab-kind-{s.run_id}")
    exports.chart(figures.stability_distribution(frame, metric, kind), f"{s.run_id}-{metric}-per-image", "stab-dist")
    exports.chart(figures.stability_means(s.report.stability, metric, data.stability_mean_bounds(frame, metric)),
                  f"{s.run_id}-{metric}-means", "stab-means")
    st.caption(
        f"{subset_line(s)}. {units.metric_line(declared(metric))} Bars on the means: 95 % intervals, a percentile "
        f"bootstrap over the images ({DEFAULT_RESAMPLES:,} resamples). The cosine and Euclidean radii are "
        "DivergenceRadius's two closed forms; for all three, larger = the embedding moves more = less stable. "
        "A corruption can lower "
        "accuracy a lot while barely moving the embeddings (the radius measures movement, not which side of a "
        "class boundary the image lands on)."
    )


def radius_tab(s: Shown) -> None:
    bins, summary = data.link_bins_frame(s.report), data.link_summary_frame(s.report)
    exports.chart(figures.accuracy_vs_radius(bins, summary, chance=s.chance), f"{s.run_id}-accuracy-vs-radius", "radius")
    if summary.empty:
        return
    st.caption(f"{subset_line(s)}. Per image, accuracy under perturbation is the share of its evaluated severities "
               "classified correctly; images are binned by DivergenceRadius quantile, and the dashed line is the "
               "least-squares line of exactly the plotted bins. The table's slope / intercept / mse are the report's "
               "regression, fitted on a random half of the images and scored on the other half (so it need not pass "
               "through the plotted points). drop_corr_r correlates each corruption's accuracy drop with its mean radius.")
    shown = units.as_percent(summary, {"accuracy_clean": "clean accuracy %", "accuracy_perturbed": "perturbed accuracy %"})
    radius = declared("divergence_radius").table_header  # the mean over the images: it hovers to the metric's help
    exports.table(shown.rename(columns={"slope": "held-out slope", "intercept": "held-out intercept",
                                        "mse": "held-out mse", "mean_radius": radius}), f"{s.run_id}-stability-link",
                  "radius",
                  column_config={**{c: st.column_config.NumberColumn(c, format="%.3f")
                                    for c in (radius, "held-out slope", "held-out intercept", "held-out mse",
                                              "drop_corr_r", "drop_corr_p")},
                                 **{c: st.column_config.NumberColumn(c, format="%.1f")
                                    for c in ("clean accuracy %", "perturbed accuracy %")}})


def subset_line(s: Shown) -> str:
    """"stability: 64 of 150 images": the subset the stability numbers are measured on."""
    size = s.view.run.dataset.size if s.view.run.dataset else None
    n = max((m.n_images for m in s.report.stability), default=None) if s.report.stability else None
    if n is None:
        return "stability: not measured"
    return f"stability: {n:,} of {size:,} images" if size else f"stability: {n:,} images"


def _cell_choice(s: Shown, key: str) -> tuple[str, int] | None:
    # a real-shift cell's images are the user's files, not re-created from the clean ones: not offered here
    cells = sorted({(c.corruption, c.severity) for m in s.report.models for c in m.cells
                    if not shift_section.is_real(c.corruption)})
    if not cells:
        st.info("No corrupted cell is stored yet.")
        return None
    return st.selectbox("cell (corruption, severity)", cells, format_func=lambda k: figures.cell_label(*k),
                        key=f"{key}-{s.run_id}")


GALLERY_FILTERS = {"all": "every image", "flipped": "flipped for some model", "differ": "flipped for one model, not another"}


def gallery_tab(s: Shown) -> None:
    c1, c2, c3 = st.columns([2, 3, 1])
    with c1:
        cell = _cell_choice(s, "gallery-cell")
    if cell is None:
        return
    only = c2.radio("images", list(GALLERY_FILTERS), format_func=GALLERY_FILTERS.get, horizontal=True,
                    key=f"gallery-only-{s.run_id}")
    limit = c3.number_input("how many", 1, 48, 8, key=f"gallery-n-{s.run_id}")
    preds = cached.cell_predictions(s.store, s.store_key, s.run_id, cell[0], cell[1], s.fingerprint)
    indices = data.gallery_indices(preds, only, int(limit))
    if not indices:
        st.info(f"No image of {figures.cell_label(*cell)} is {GALLERY_FILTERS[only]}.")
        return
    images, kept = cached.recreated_images(s.store, s.store_key, s.run_id, cell[0], cell[1], tuple(indices))
    clean, _ = cached.recreated_images(s.store, s.store_key, s.run_id, "clean", 0, tuple(int(i) for i in kept))
    if ladder.no_effect(clean, images):
        st.warning(f"{figures.cell_label(*cell)} has no effect on these images (mean absolute pixel difference "
                   f"{ladder.pixel_change(clean, images):.2f} < {ladder.NO_EFFECT_PIXELS} of 255, SSIM ≥ "
                   f"{ladder.NO_EFFECT_SSIM}): e.g. a colour corruption on "
                   "grayscale images. Its cells count in the averages as published, but they measure nothing.")
    st.caption(f"{figures.cell_label(*cell)}: each image clean (left) beside the corrupted version the models saw "
               f"(right), re-created from the run's seed ({s.view.run.config.seed}); per model the clean prediction → "
               "the corrupted one; ✓ correct, ✗ wrong, :red[flipped] = the prediction changed.")
    by_index = {i: part for i, part in preds.groupby("index")}
    per_row = 2  # pairs of images
    for k, (before, image, index) in enumerate(zip(clean, images, kept, strict=True)):
        if k % per_row == 0:  # one row of columns at a time, so the pairs line up row by row
            columns = st.columns(per_row, border=True)
        with columns[k % per_row]:
            part = by_index[int(index)]
            a, b = st.columns(2)
            # one width for both, so the pair compares pixel for pixel whatever the captions' lengths
            a.image(data.enlarge(before), caption=f"#{int(index)} clean · true: {part['label'].iloc[0] or '?'}", width=112)
            b.image(data.enlarge(image), caption=figures.cell_label(*cell), width=112)
            st.markdown("  \n".join(_prediction_line(row) for row in part.itertuples(index=False)))


def _prediction_line(row: Any) -> str:
    mark = "" if row.correct is None else ("✓ " if row.correct else "✗ ")
    flip = " :red[flipped]" if row.flipped else ""
    model = str(row.model).replace("`", "'")  # a code span shows its text literally, backticks aside
    line = f"{mark}`{model}`: {md_escape(row.clean_pred)} → **{md_escape(row.pred)}**{flip}"
    if getattr(row, "answer", None):  # a generative model's own words, shown literally
        line += f"  \n  answer: “{md_escape(row.answer)}”"
    return line


def flip_differences_tab(s: Shown) -> None:
    cell = _cell_choice(s, "diff-cell")
    if cell is None:
        return
    preds = cached.cell_predictions(s.store, s.store_key, s.run_id, cell[0], cell[1], s.fingerprint)
    st.markdown("**Images the row model flips and the column model keeps**")
    exports.table(data.flip_matrix(preds), f"{s.run_id}-{figures.cell_label(*cell)}-flip-matrix", "flip-matrix",
                  hide_index=False)
    diffs = data.flip_differences(preds)
    if diffs.empty:
        st.info(f"Under {figures.cell_label(*cell)} every image flips for all models or for none.")
        return
    st.markdown(f"**{len(diffs)} image(s) flip for one model but not another** (see them in the Gallery tab with "
                f"*{GALLERY_FILTERS['differ']}*)")
    exports.table(diffs, f"{s.run_id}-{figures.cell_label(*cell)}-flip-differences", "flip-diffs")


def confusion_tab(s: Shown) -> None:
    report, run_id = s.report, s.run_id
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
    fig = figures.confusion_heatmap(cm, report.classification.classes, title, normalize)
    exports.chart(fig, f"{run_id}-confusion-{model}-{title}", "confusion")


def export_tab(s: Shown) -> None:
    run, report = s.view.run, s.report
    c1, c2 = st.columns(2)
    suffix = exports.slug(f"{run.run_id}-{report.baseline}")
    store = get_store()
    c1.download_button("Download cells as CSV", data.export_csv(report, store), file_name=f"{suffix}.csv", mime="text/csv")
    c2.download_button("Download run + report as JSON", data.export_json(run, report, store), file_name=f"{suffix}.json",
                       mime="application/json")
    exports.plain_table(data.cells_frame(report))


#: tab label -> what draws it; only the open tab is drawn
TABS: dict[str, Callable[[Shown], None]] = {
    "Accuracy vs severity": accuracy_tab,
    "Per corruption": per_corruption_tab,
    "Label flips": flips_tab,
    "PD threat": threat_tab,
    "Stability": stability_tab,
    "Accuracy vs radius": radius_tab,
    "Damage & calibration": damage_tab,
    "Cost": cost_tab,
    "Gallery": gallery_tab,
    "Flip differences": flip_differences_tab,
    "Confusion matrix": confusion_tab,
    "Export": export_tab,
}


#: characters of a value a metric card shows at a 1,400 px window before it would cut it (the full value hovers)
CARD_CHARS = 22


def card_value(text: str, n: int = CARD_CHARS) -> str:
    """``text`` short enough for a metric card: its head and tail kept, so ``sample[:16]`` and a path's file stay readable."""
    text = " ".join(str(text).split())
    if len(text) <= n:
        return text
    keep = n - 1
    return text[: keep - keep // 3] + "…" + text[-(keep // 3):]


def config_frame(run: RunRecord) -> Any:
    """The run's configuration as (setting, value) rows: what a reader looks up, not collapsed raw JSON."""
    import json

    import pandas as pd

    cfg, env = run.config, run.environment
    rows = [("models", ", ".join(cfg.models)), ("baseline", cfg.baseline_model),
            ("dataset", cfg.dataset), ("dataset as evaluated", run.dataset.name if run.dataset else None),
            ("dataset path", run.dataset.path if run.dataset else None),
            ("images", run.dataset.size if run.dataset else None), ("image limit", cfg.limit), ("seed", cfg.seed),
            ("device", str(env.get("gpu") or env.get("device") or "?")),
            ("created (UTC)", run.created_at), ("finished (UTC)", run.finished_at)]
    rows += [(f"environment: {k}", v) for k, v in sorted(env.items())]
    text = [(k, None if v is None else v if isinstance(v, str) else json.dumps(v, default=str)) for k, v in rows]
    return pd.DataFrame(text, columns=["setting", "value"])


def run_header(view: data.RunView) -> None:
    run = view.run
    st.subheader(f"{status_badge(view.status)} · {md_escape(printable(view.run_id))}")
    literal_text("Domain", run.domain.domain)
    cfg = run.config
    # cards as wide as their values, in a row that wraps: fixed columns cut them at 1,024 px ("evalu… 1…",
    # "sample[:2…"); a long dataset name (a folder) is shortened in its card, whole on hover
    cards = st.container(horizontal=True, gap="medium")
    cards.metric("models", len(view.models), help=", ".join(view.models), width="content")
    dataset = run.dataset.name if run.dataset else cfg.dataset
    cards.metric("dataset", card_value(dataset), help=f"{dataset} ({run.dataset.size if run.dataset else '?'} images)",
                 width="content")
    if run.kind == "clip":  # a clip dataset counts clips; its frames per clip are the run's sampling
        sampling = (run.kind_settings or {}).get("sampling") or {}
        cards.metric("clips", run.dataset.size if run.dataset else "?", width="content",
                     help=", ".join(f"{k} {v}" for k, v in sampling.items() if v is not None) or None)
    else:
        cards.metric("images", run.dataset.size if run.dataset else "?", width="content")
    done = progress.progress_of(run, view.report, view.n_units, view.total_cells)
    if run.kind in ("vqa", "retrieval", "clip"):  # one stored unit per (model, cell): the share of those stored
        cards.metric("evaluated", f"{100 * view.done_cells / max(view.total_cells, 1):.0f} %",
                     help=f"{view.done_cells} of {view.total_cells} (model, cell) units stored", width="content")
    else:
        cards.metric("evaluated", f"{100 * done.share:.0f} %", help=done.line(), width="content")
    cards.metric("created", run.created_at[:10], help=f"{run.created_at} (UTC)", width="content")
    # what kind of run this is, beside its progress: an adaptive run's cells stop early, a shift cell has its own images
    n = f"{done.n_min:,}" if done.n_min == done.n_max else f"{done.n_min:,}–{done.n_max:,}"
    st.caption(f"Run kind: {data.run_kind(run)}"
               + (f". Cells stop adaptively once decided: {n} images per cell of "
                  f"{run.dataset.size if run.dataset else '?'}; evaluated counts what each cell needed"
                  if cfg.adaptive else "")
               + (". Real-shift cells are evaluated on your own images (their own count)" if run.domain.shift else "")
               + ".")
    for line in query.finetune_lineage(cfg.models):  # a fine-tuned model says what it was trained from
        st.caption(f":material/account_tree: {md_escape(line)}")


def configuration_section(run: RunRecord) -> None:
    """The run's plan and settings, folded: details a reader opens, below the verdict and the summary."""
    with st.expander("corruptions of this domain and run configuration"):
        exports.table(data.plan_frame(run.domain), f"{run.run_id}-plan", "run-plan")
        exports.table(config_frame(run), f"{run.run_id}-configuration", "run-config",
                      column_config={"setting": st.column_config.TextColumn("setting", width="medium"),
                                     "value": st.column_config.TextColumn("value", width="large")})


def status_notes(view: data.RunView) -> None:
    if view.status == "failed":
        st.error(f"The run failed: {view.run.error or 'no message recorded'}. Finished units are kept; "
                 f"continue with `domainbench run --resume {view.run_id}`.")
    elif view.status == "interrupted":
        st.warning(f"The run was interrupted. Continue it with `domainbench run --resume {view.run_id}` or Resume above.")
    elif view.status == "cancelled":
        st.info("The run was cancelled; its finished units are kept. Resume it with the button above.")
    alive = progress.liveness(view.run, view.status)
    if alive is not None:
        (st.warning if alive[0] == "warning" else st.caption)(f"Worker: {alive[1]}")
    if view.partial and view.report is not None:
        done = progress.progress_of(view.run, view.report, view.n_units, view.total_cells)
        st.warning(
            f"**Partial results** — the run is {view.status}: {done.line()}. Every number below is computed from "
            "what is stored so far" + (" and will change." if view.status in LIVE_STATUSES else ".")
        )


def run_body(store: Store, store_key: str, run_id: str, baseline: str, drawn_status: str) -> None:
    """Everything that changes while a run is running; re-run alone (a fragment) to stay live."""
    with guard(f"showing run {run_id}"):
        _run_body(store, store_key, run_id, baseline, drawn_status)


def _run_body(store: Store, store_key: str, run_id: str, baseline: str, drawn_status: str) -> None:
    if query.find_run(store, run_id) is None:
        st.rerun()  # deleted meanwhile: the page says so
    fingerprint = data.run_fingerprint(store, run_id)
    view = cached.run_view(store, store_key, run_id, baseline, fingerprint)
    if view.status != drawn_status:
        st.rerun()  # started, finished or stopped: redraw the page (its buttons, whether it refreshes)
    run_header(view)
    # a corruption run's settings fold under its summary (its first screen: verdict and summary); other kinds' here
    ranked = view.run.kind not in ("vqa", "retrieval", "clip") and view.report is not None and view.run.fmr is None
    if not ranked:
        configuration_section(view.run)
    if view.status in LIVE_STATUSES:
        st.caption(f":material/autorenew: live: this page refreshes itself every {REFRESH_S} s")
    with st.container():  # always present, so the tabs below keep their place when notes come and go
        status_notes(view)
    if view.run.kind in ("vqa", "retrieval"):  # a task run: its rows are on the run record (engine.task_kind)
        from domainbench.frontend import task_section

        task_section.show(store, run_id)
        return
    if view.run.kind == "clip":  # a clip run: its rows and frame predictions are on the run record (engine.clip_kind)
        from domainbench.frontend import clip_section

        if view.status == "done":
            clip_section.show(store, run_id)
        else:
            st.info(f"No results yet: the clip run is {view.status}; `domainbench run --resume {run_id}` continues it")
        return
    if view.report is None:
        st.info(f"No results yet: {view.error}")
        return
    if view.run.fmr is not None:
        # an FMR run measures one thing on generated images: its own layout, no evaluation tabs left empty
        fmr_section.show(store, view.report)
        return
    verdict.show(store, store_key, run_id, fingerprint)
    ri = verdict.run_intervals(store, store_key, view.report, run_id, baseline, fingerprint)
    summary_section(view.report, verdict.intervals(store, store_key, view.report, run_id, baseline, fingerprint),
                    notes=[] if ri is None else ri.notes, groups=verdict.groups(store, store_key, run_id, fingerprint))
    verdict.anytime_note(ri)
    configuration_section(view.run)
    shift_section.show(store, store_key, run_id, fingerprint)
    shown = Shown(store, store_key, view, view.report, fingerprint, ri)
    tabs = st.tabs(list(TABS), key=TAB_KEY, on_change="rerun", bind="query-params")
    for tab, (label, draw) in zip(tabs, TABS.items(), strict=True):
        with tab:
            if tab.open is not False:  # None: state not tracked (never here), draw to be safe
                with guard(f"drawing {label.lower()}"):
                    draw(shown)


#: the run page's baseline selector (px): a model name such as "embedded:fmnist-augmented" whole
BASELINE_WIDTH = 240


def _back_to_list() -> None:
    for param in (RUN_PARAM, BASELINE_PARAM):  # the list's filters stay
        st.query_params.pop(param, None)
    for key in ("open-run", "table-runs"):  # else the list would open the same run again at once
        st.session_state.pop(key, None)


def show_run(store: Store, store_key: str, run_id: str) -> None:
    run = query.find_run(store, run_id)
    if run is None:
        st.error(f"Run {run_id} is no longer in the store.")
        return
    models = run.config.models
    # the way back, the baseline and the run's actions in one row that wraps (three rows pushed the summary below a
    # 1,400 x 900 window's first screen); a delete's confirmation opens under the row, full width
    row, below = st.container(horizontal=True, vertical_alignment="bottom", gap="small"), st.container()
    row.button("All runs", icon=":material/arrow_back:", on_click=_back_to_list)
    # only a corruption run has ratios to a baseline (mCE / rCE / mFR): an FMR search, a task or a clip run has none
    ratios = run.fmr is None and run.kind not in ("vqa", "retrieval", "clip")
    baseline = row.selectbox(
        "baseline for mCE / rCE / mFR", models, index=url_state.index(BASELINE_PARAM, models, run.config.baseline_model),
        key=f"baseline-{run_id}", on_change=url_state.bound, args=(BASELINE_PARAM, f"baseline-{run_id}"),
        width=BASELINE_WIDTH, help="The model the ratios are relative to; changing it recomputes them from the stored "
                                   "statistics, with no re-evaluation.",
    ) if ratios else run.config.baseline_model
    status = run_status(run)
    with row:
        run_actions.actions(store, run_id, status, on_deleted=_back_to_list, confirm_in=below)
    # a run that may still change (a worker may take a queued or interrupted one) redraws itself
    body = st.fragment(run_body, run_every=REFRESH_S if status in LIVE_STATUSES else None)
    body(store, store_key, run_id, baseline, status)


def main() -> None:
    wanted = st.query_params.get(RUN_PARAM)
    if not wanted:  # a run's page is titled by the run (its status and id), the sidebar names the page
        st.title("Runs")
    with guard("opening the results store"):
        store = get_store()
        sidebar_store(store)
        if wanted:
            if query.find_run(store, wanted) is not None:
                with guard(f"showing run {wanted}"):
                    show_run(store, store.description, wanted)
                return
            st.title("Runs")
            st.error(f"There is no run {wanted!r} in {store.description}: the link may be mistyped or the run "
                     "deleted. Choose a run below.")
        runs_list(store)
        # after the list is drawn: the gallery and Compare's families need the corruption kernels
        cached.warm_corruption_registry()


main()

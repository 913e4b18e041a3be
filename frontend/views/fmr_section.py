"""The FMR section of a run page: SA / PA / FMR per tested model, the oracle's reliability, and the
generated images next to their originals with the tested model's predictions and the oracle's votes.

The frames are built by pure functions (``fmr_frame``, ``gallery_rows``) so they are tested
without Streamlit; ``show`` only draws them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from domainbench.fmr.images import from_png_b64
from domainbench.metrics.registry import Metric, metric, metrics_of
from domainbench.query import fmr_records
from domainbench.records.report import FmrOracleReport, FmrReport, RunReport
from domainbench.query import FmrUnitRecord, Store

PAGE = 12
_NO_ORACLE = FmrOracleReport(members=[], clean_agreement=None, member_accuracy={})


#: the FMR table's columns that are not metrics -> their help (each metric's column hovers to the registry's help)
COLUMN_HELP = {
    "images": "labelled images the search started from",
    "note": "why a value cannot be read at face value",
}


def column_config() -> dict[str, Any]:
    """The FMR table's formats; each metric's column hovers to the registry's help (``exports`` adds it)."""
    import streamlit as st

    return {
        **{m.table_header: st.column_config.NumberColumn(m.table_header, format=f"%.{m.decimals or 1}f")
           for m in metrics_of("fmr")},
        "images": st.column_config.NumberColumn("images", help=COLUMN_HELP["images"]),
        "note": st.column_config.TextColumn("note", help=COLUMN_HELP["note"]),
    }


def oracle_member(f: FmrReport, model: str) -> bool:
    """Whether the tested model votes in the oracle zoo: then the zoo cannot disagree with it by much,
    and with a zoo of one (or a majority it decides) FMR is 100 by construction."""
    return model in f.oracle.members


def oracle_note(f: FmrReport, model: str) -> str:
    if not oracle_member(f, model):
        return ""
    return (f"{model} is one of the {len(f.oracle.members)} oracle members: the oracle's majority follows its own "
            "vote, so it is rarely counted wrong and FMR is near 100 by construction (100 with a zoo of one), "
            "not a sign of robustness. Test it against an oracle it is not part of.")


#: the FMR metrics with an interval (``metrics.confidence.FmrIntervals``' fields: Wilson, as the export's)
FMR_INTERVALS = ("sa", "pa")


def ci_header(m: Metric) -> str:
    return f"{m.table_header.removesuffix(' %')} (95 % CI)"


def fmr_frame(f: FmrReport, intervals: Any = None) -> pd.DataFrame:
    """One row per tested model: the registry's FMR metrics under their UI headers (rates in %); with the run's
    ``intervals`` (``RunIntervals``), SA and PA also written with their 95 % interval's ends ("61.2 % (55.0–67.1)")."""
    from domainbench.stats import interval_text

    def shown(metric: Metric, m: Any) -> float | None:
        v = metric.read(m)
        return 100.0 * v if metric.percent and v is not None else v

    metrics = metrics_of("fmr")
    bounds = {iv.model: iv for iv in getattr(intervals, "fmr", None) or []}
    with_ci = [x for x in metrics if x.name in FMR_INTERVALS] if bounds else []
    return pd.DataFrame(
        [{"model": m.model, "images": m.n, **{x.table_header: shown(x, m) for x in metrics},
          **{ci_header(x): interval_text(x.read(m), getattr(bounds.get(m.model), x.name, None), x.percent)
             for x in with_ci},
          "note": "oracle member: FMR by construction" if oracle_member(f, m.model) else ""} for m in f.models],
        columns=["model", "images", *(x.table_header for x in metrics), *(ci_header(x) for x in with_ci), "note"],
    )


def compare_frame(reports: Sequence[tuple[str, str, RunReport]]) -> pd.DataFrame:
    """FMR runs side by side: (run id, domain text, report) -> one row per run and tested model."""
    parts = [fmr_frame(r.fmr).assign(run=run_id, domain=domain) for run_id, domain, r in reports if r.fmr is not None]
    columns = ["run", "domain", *fmr_frame(FmrReport(search="", budget=0, candidates=0, step_size=0.0,
                                                     oracle=_NO_ORACLE, models=[])).columns]
    return pd.concat(parts, ignore_index=True)[columns] if parts else pd.DataFrame(columns=columns)


@dataclass(frozen=True)
class GalleryItem:
    index: int
    label: str
    clean_pred: str
    final_pred: str
    steps: int
    ops: str
    votes: str
    original: np.ndarray
    generated: np.ndarray

    @property
    def flipped(self) -> bool:
        return self.clean_pred == self.label and self.final_pred != self.label


def gallery_rows(records: Sequence[FmrUnitRecord], classes: Sequence[str], oracle: Sequence[str],
                 flipped_only: bool = False) -> list[GalleryItem]:
    """Perturbed images of the records (those with stored payloads), in dataset order."""
    items = []
    for r in sorted(records, key=lambda r: r.shard):
        for i, idx in enumerate(r.indices):
            if r.images[i] is None or r.originals[i] is None:
                continue
            votes = ", ".join(f"{m.split('/')[-1]}: {classes[v]}" for m, v in zip(oracle, r.oracle_final[i]))
            item = GalleryItem(
                index=idx, label=classes[r.labels[i]], clean_pred=classes[r.clean_preds[i]],
                final_pred=classes[r.final_preds[i]], steps=r.steps[i],
                ops=" → ".join(f"{n} {v:g}" for n, v in r.ops[i]), votes=votes,
                original=from_png_b64(r.originals[i]), generated=from_png_b64(r.images[i]),
            )
            if not flipped_only or item.flipped:
                items.append(item)
    return items


def show(store: Store, report: RunReport) -> None:
    """Draw the section; nothing when the run has no FMR results."""
    import streamlit as st

    f = report.fmr
    if f is None:
        return
    st.subheader("Foundation-model-oriented robustness (FMR)")
    for m in f.models:
        if oracle_member(f, m.model):
            st.error(oracle_note(f, m.model), icon=":material/warning:")
    from domainbench.frontend import exports, units

    from domainbench.frontend import verdict
    from domainbench.query import run_fingerprint

    ri = verdict.run_intervals(store, store.description, report, report.run_id, report.baseline,
                               run_fingerprint(store, report.run_id))
    frame = fmr_frame(f, ri)
    # SA and PA are shown once, with their interval where it is known
    hidden = {metric(n).table_header for n in FMR_INTERVALS} if ri is not None and ri.fmr else set()
    exports.plain_table(frame, column_config=column_config(),
                        column_order=[c for c in frame.columns if c not in hidden])
    agreement = exports.MISSING if f.oracle.clean_agreement is None else f"{100 * f.oracle.clean_agreement:.1f} %"
    members = ", ".join(f"{m} ({exports.MISSING if a is None else f'{100 * a:.1f} %'})"
                        for m, a in f.oracle.member_accuracy.items())
    st.caption(
        f"{f.search} search, budget {f.budget} steps, step size {f.step_size:g}. {units.metric_line(metric('fmr'))} "
        f"The oracle's majority vote agrees with the labels on {agreement} of clean images (members: {members}); a low value means "
        "the oracle itself is unreliable for this domain."
    )
    models = [m.model for m in f.models]
    c1, c2 = st.columns([3, 1])
    model = c1.selectbox("tested model", models, key=f"fmr-model-{report.run_id}")
    records = fmr_records(store, report.run_id, model)
    every = gallery_rows(records, report.classification.classes, f.oracle.members)
    # open on something to see: flipped predictions where there are some, else every perturbed image
    any_flipped = any(i.flipped for i in every)
    flipped = c2.toggle("prediction flipped only", value=any_flipped, key=f"fmr-flipped-{report.run_id}-{model}",
                        disabled=not any_flipped, help=None if any_flipped else "no prediction flipped for this model")
    items = [i for i in every if i.flipped] if flipped else every
    if not items:
        st.info("No image was perturbed for this model: the oracle accepted no perturbation step (see the "
                "validation rate above).")
        return
    page = st.number_input(f"page (of {(len(items) + PAGE - 1) // PAGE})", min_value=1,
                           max_value=(len(items) + PAGE - 1) // PAGE, value=1, key=f"fmr-page-{report.run_id}")
    for item in items[(page - 1) * PAGE : page * PAGE]:
        cols: Any = st.columns([1, 1, 3])
        cols[0].image(item.original, caption=f"#{item.index} original · {item.label} · model: {item.clean_pred}", clamp=True)
        cols[1].image(item.generated, caption=f"generated · model: {item.final_pred}", clamp=True)
        cols[2].markdown(f"**{item.steps} step{'' if item.steps == 1 else 's'}**: {item.ops or '—'}  \n"
                         f"oracle votes: {item.votes}")

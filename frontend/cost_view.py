"""Cost beside robustness as a figure: each model's mean corrupted balanced accuracy (with its interval) against
its images/s (``metrics.cost``), the Pareto-efficient models as stars. The run page and ``domainbench report``
draw the same figure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from domainbench.metrics.cost import ModelCost, fastest_not_worse, model_costs

if TYPE_CHECKING:
    import plotly.graph_objects as go

TITLE = "cost beside robustness (stars: Pareto-efficient; bars: 95 % intervals)"


def costs_of(run: Any, report: Any, comparison: Any = None) -> list[ModelCost]:
    """Per model its throughput from the run's timings and its mean corrupted accuracy (the comparison's, as the
    verdicts measure it, else the report's); empty without timings."""
    if not any(m in run.timings for m in report.model_names):
        return []
    accuracy = (comparison.groups.accuracy if comparison is not None
                else {m.model: m.mean_corrupted_accuracy for m in report.models})
    return model_costs(run.timings, report.model_names, accuracy)


def sentence(costs: Sequence[ModelCost], comparison: Any) -> str | None:
    return fastest_not_worse(costs, comparison)


def pareto_figure(costs: Sequence[ModelCost], bounds: Mapping[str, tuple[float, float] | None],
                  chance: float | None = None) -> go.Figure:
    """``bounds``: per model the interval of its mean corrupted accuracy (fractions), drawn as error bars;
    ``chance``: balanced accuracy of guessing (1 / classes), a dotted line."""
    import plotly.graph_objects as go  # here: `report --format md` draws nothing and stays without plotly

    from domainbench.frontend.figures import model_colors

    colors = model_colors([c.model for c in costs])
    fig = go.Figure()
    for c in costs:
        if c.images_per_second is None or c.corrupted_accuracy is None:
            continue
        iv = bounds.get(c.model)
        err = None if iv is None else dict(type="data", symmetric=False, array=[100 * (iv[1] - c.corrupted_accuracy)],
                                           arrayminus=[100 * (c.corrupted_accuracy - iv[0])])
        fig.add_trace(go.Scatter(x=[c.images_per_second], y=[100 * c.corrupted_accuracy], mode="markers", name=c.model,
                                 error_y=err, marker=dict(size=14, color=colors[c.model],
                                                          symbol="star" if c.pareto else "circle")))
    fig.update_layout(title=TITLE, xaxis_title="images/s (preprocess + forward, the run's machine)",
                      yaxis_title="mean corrupted balanced accuracy (%)", height=420)
    if chance:
        fig.add_hline(y=100.0 * chance, line_dash="dot", line_color="#777", annotation_text=f"chance ({100 * chance:.0f} %)",
                      annotation_position="bottom right")
    return fig


#: under the resource table: how each column was measured (``engine.resources``)
RESOURCE_NOTE = ("parameters: of the torch modules the model holds (the embedded models' shared text tower is not "
                 "theirs); peak memory: its weights plus the most one batch took above what was allocated before it "
                 "(CUDA's allocator on a GPU, the process's peak resident set on the host); requests and tokens: what "
                 "an endpoint model sent and its answers reported (answers from the cache cost nothing).")


def resource_table(costs: Sequence[ModelCost], name: str) -> None:
    """Per model what the run measured besides time, where it measured any (runs before it was recorded have none)."""
    import pandas as pd
    import streamlit as st

    from domainbench.frontend import exports

    rows = [{"model": c.model, "images/s": c.images_per_second, **c.resource_columns()} for c in costs]
    if not any(len(r) > 2 for r in rows):
        st.caption("This run stored no parameter counts, memory or request counts (runs before they were recorded, or "
                   "run on Ray).")
        return
    frame = pd.DataFrame(rows)
    measured = [c for c in frame.columns if c not in ("model", "images/s")]
    frame[measured] = frame[measured].fillna("n/a")
    exports.table(frame, name, "resources",
                  column_config={"images/s": st.column_config.NumberColumn("images/s", format="%.1f")})
    st.caption(RESOURCE_NOTE)

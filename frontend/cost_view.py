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


def pareto_figure(costs: Sequence[ModelCost], bounds: Mapping[str, tuple[float, float] | None]) -> go.Figure:
    """``bounds``: per model the interval of its mean corrupted accuracy (fractions), drawn as error bars."""
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
    return fig

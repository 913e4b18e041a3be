"""Charts that read at 1,024 and 1,400 px (issue 37, defects 8, 9 and 12), checked on the Plotly figures' layout: long
names shortened with the full text on hover, the PD-threat chart's plot area kept whatever its labels, legends where
nothing cuts them, panel axis titles that fit their panel, and a heatmap's colour bar with a few ticks."""

from __future__ import annotations

import numpy as np
import pandas as pd

from domainbench.frontend import figures

LONG = "a very long description of night-time dash-cam footage in heavy rain, domain 1"


def test_12_compare_heatmap_labels_are_shortened_whole_and_told_apart_and_the_colour_bar_has_few_ticks() -> None:
    matrix = pd.DataFrame(np.array([[0.8, 1.2, 13.0], [1.0, 1.0, 1.0]]),
                          columns=[LONG, LONG.replace("domain 1", "domain 2"), "x-rays"], index=["A", "B"])
    fig = figures.metric_heatmap(matrix, "mCE", True, center=1.0)
    hm = fig.data[0]
    assert all(len(x) <= figures.COLUMN_LABEL_CHARS + 4 for x in hm.x)
    assert len(set(hm.x)) == 3 and hm.x[2] == "x-rays"  # two domains alike at the start stay two columns
    assert [hm.customdata[0][i][1] for i in range(3)] == list(matrix.columns)  # the full text on hover
    assert fig.layout.xaxis.automargin and fig.layout.yaxis.automargin
    assert hm.colorbar.nticks == 5 and hm.colorbar.title.side == "right"


def test_9_the_pd_threat_chart_keeps_its_plot_area_and_its_legend_above_it() -> None:
    from domainbench.records.report import ThreatCell

    cells = [ThreatCell(corruption=f"compose:{'brightness+' * 3}noise-{i}", severity=s, n=60, std_threat=0.1, max_threat=2.0,
                        frac_unsafe_images=0.5 if s > 3 else 0.0, frac_unsafe_ci_low=0.37 if s > 3 else 0.0,
                        frac_unsafe_ci_high=0.63 if s > 3 else 0.06, mean_threat=1.0, safety="unsafe" if s > 3 else "safe")
             for i in range(10) for s in range(1, 6)]

    class Report:  # the chart reads only the report's threat cells
        threat = cells

    fig = figures.threat_chart(Report())  # type: ignore[arg-type]
    label = max(len(x) for t in fig.data for x in t.x)
    # the plot area (the height less the margins and the tilted labels) stays THREAT_PLOT_HEIGHT tall
    assert fig.layout.height >= figures.THREAT_PLOT_HEIGHT + fig.layout.margin.t + 5 * label * 0.7
    assert fig.layout.legend.orientation == "h" and fig.layout.legend.y > 1  # above the plot: never cut
    assert fig.layout.xaxis.automargin and fig.layout.xaxis.tickangle == -45
    # a Plotly title never wraps: in lines that fit a 1,024 px window's chart (about 560 px: 80 characters of its
    # smaller second line, 40 of the first)
    import re

    first, second = fig.layout.title.text.split("<br>")
    assert len(first) <= 40 and len(re.sub("<[^>]+>", "", second)) <= 80


def test_8_panel_titles_and_axis_titles_fit_their_panels() -> None:
    bins = pd.DataFrame([{"model": "A", "corruption": c, "bin": b, "mean_radius": 0.1 * b, "accuracy": 0.9 - 0.1 * b,
                          "count": 10} for c in ("compose:brightness+gaussian_noise+motion_blur+fog", "blur", "noise",
                                                 "fog") for b in range(3)])
    fig = figures.accuracy_vs_radius(bins, pd.DataFrame([{"model": "A", "corruption": "blur"}]), columns=3)
    titles = [a for a in fig.layout.annotations if a.hovertext]
    assert all(len(a.text) <= figures.PANEL_TITLE_CHARS for a in titles)
    assert "compose:brightness+gaussian_noise+motion_blur+fog" in [a.hovertext for a in titles]
    x_titles = [fig.layout[k].title.text for k in fig.layout.to_plotly_json() if k.startswith("xaxis")]
    # a short title, under each column's lowest panel only (the two rows' long titles overprinted each other)
    assert [t for t in x_titles if t] == ["radius R_dr"] * 3
    import re

    lines = [re.sub("<[^>]+>", "", ln) for ln in fig.layout.title.text.split("<br>")]
    assert len(lines) == 3 and all(len(ln) <= 80 for ln in lines)  # a title never wraps: lines that fit 1,024 px
    assert figures.short_label("compose:brightness+gaussian_noise+motion_blur+fog", 20) == "compose:brigh…ur+fog"

"""Glossary: every metric of the registry, what it means, its unit and which direction is better.

The same paragraph each metric's column hovers to and `domainbench metrics` prints (``Metric.help``).
"""

from __future__ import annotations

import streamlit as st

from domainbench.frontend.ui import glossary
from domainbench.metrics.registry import metrics_of

#: the registry's levels, as a reader looks them up (the summary first)
SECTIONS = {
    "model": "Per model: the run's summary and Compare",
    "corruption": "Per model and corruption: the Per corruption tab",
    "cell": "Per model, corruption and severity: the charts, the Damage & calibration tab and the export's rows",
    "image": "Per image: the Stability tab",
    "fmr": "FMR runs",
    "clip": "Clip runs (video): per model and cell, over the clips' sampled frames",
}
UNITS = (
    "Units: accuracies and rates are shown in % (a column's name ends in %), ratios to the baseline model as "
    "ratios (1.0 = as robust as the baseline). A table's CSV download is the table as shown. The run's export "
    "files (`domainbench export`, the Export tab) keep fractions from 0 to 1 under the metric's export name "
    "(the code after each name below); the JSON export names each column's unit in its `units` section."
)


def main() -> None:
    st.title("Glossary")
    st.caption("What every number means, in the words each column's hover uses; `domainbench metrics` prints the same.")
    st.markdown(UNITS)
    for level, title in SECTIONS.items():
        st.subheader(title)
        glossary(metrics_of(level, always=False))  # type: ignore[arg-type]


main()

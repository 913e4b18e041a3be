"""Metrics only some runs have: their columns are added to a run's export when it has them."""

from __future__ import annotations

from domainbench.metrics.registry import Metric

METRICS = (
    Metric("unparseable_rate", "unparseable answers", "fraction", "lower",
           "fraction of a generative model's free answers that named no class (counted wrong)", "cell",
           ("vlm: parsed answers",), "unparsed answers summed over the cell's shards, over its images", order=90,
           always=False),
    Metric("breaking_point", "breaking point", "fraction", "higher",
           "where on the corruption's continuous scale (0 weakest, 1 strongest) balanced accuracy falls below the "
           "threshold", "corruption", ("images scored along the scale (run --breaking-point)",),
           "bisection of the scale, balanced accuracy at each point evaluated", interval="smoothed", order=40,
           always=False, field="breaking_point"),
)

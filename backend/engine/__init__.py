"""The run engine: shards, tasks, executors (local and Ray), scoring, the report built and stored at a run's end
(reading results, exports and comparisons are the query floor's: ``domainbench.query``)."""

"""The run engine: shards, tasks, executors (local and Ray), scoring, reports and exports."""

"""Plain typed data every floor above shares (records floor): run and domain configs, unit documents and
summaries, the report, confusion counts, mergeable unit sums, label sets, the model backends as data,
packed per-image arrays. Importing any of it loads no torch (tested)."""

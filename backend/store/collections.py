"""The store's collections, named once: every other module refers to them through ``Collection``.

A ``Collection`` is a ``StrEnum``: its members are the collection names themselves (the SQLite
table and the MongoDB collection), so they can index plain dicts and reach pymongo unchanged.
"""

from __future__ import annotations

from enum import StrEnum


class Collection(StrEnum):
    DOMAINS = "domains"
    RUNS = "runs"
    #: sufficient statistics of one unit of work
    UNITS = "units"
    #: per-image stability metrics of one (model, corruption) over one shard
    STABILITY = "stability"
    #: PD threat sums of one corruption cell over one shard (model-independent)
    THREAT = "threat"
    #: FMR outcomes and generated images of one tested model over one shard
    FMR = "fmr"
    #: one (model, cell) of a VQA or retrieval run: its outcomes, answers or ranks and prediction rows
    TASK_UNITS = "task_units"
    #: one (model, cell) of a clip run: each sampled frame's prediction and each clip's mean-embedding one
    CLIP_UNITS = "clip_units"
    #: a finished run's report (rebuildable from the other records)
    SUMMARIES = "summaries"
    #: class lists too long to repeat in every unit, stored once by digest (labelsets.py)
    LABELSETS = "labelsets"
    #: zero-shot classifiers (class-prompt embeddings) by model, classes and templates (engine/text_cache.py)
    TEXT_EMBEDDINGS = "text_embeddings"


#: collection -> key fields (the upsert key; queries filter on a prefix of it)
KEY_FIELDS: dict[Collection, tuple[str, ...]] = {
    Collection.DOMAINS: ("domain_id",),
    Collection.RUNS: ("run_id",),
    Collection.UNITS: ("run_id", "model", "corruption", "severity", "shard"),
    Collection.STABILITY: ("run_id", "model", "corruption", "shard"),
    Collection.THREAT: ("run_id", "corruption", "severity", "shard"),
    Collection.FMR: ("run_id", "model", "shard"),
    Collection.TASK_UNITS: ("run_id", "model", "corruption", "severity"),
    Collection.CLIP_UNITS: ("run_id", "model", "cell"),
    Collection.SUMMARIES: ("run_id",),
    Collection.LABELSETS: ("labelset_id",),
    Collection.TEXT_EMBEDDINGS: ("cache_key",),
}

"""Launching a run into the queue: every input is checked here, before anything is stored.

A run found wrong by a worker would be found wrong seconds or minutes later, on whichever
machine took it; so the dataset, the model names, the baseline and the plan are checked
where the user still is (the UI's launch button, the CLI), without loading any model.
"""

from __future__ import annotations

import difflib
from pathlib import Path

from domainbench.config import DomainConfig, FmrSettings, RunConfig
from domainbench.errors import UserInputError
from domainbench.store import Store
from domainbench.store.records import RunRecord

#: backends that accept any name their library knows (a hub id, a pretrained tag, a path):
#: only the prefix can be checked up front; the worker reports a name its library lacks
OPEN_ENDED_PREFIXES = ("open_clip", "hf", "local", "hf-vlm", "openai-vlm")


def check_model_name(name: str) -> None:
    """Raise ``UserInputError`` naming the model and the close names when ``name`` is not known."""
    from domainbench.models import MODEL_BACKENDS, UnknownModelError, list_models

    prefix, sep, rest = name.strip().partition(":")
    known = list_models()
    close = difflib.get_close_matches(name, known, n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else " (see `domainbench models`)"
    if not sep or not rest or prefix not in MODEL_BACKENDS:
        raise UnknownModelError(f"unknown model {name!r}: a model name is PREFIX:NAME with PREFIX one of "
                                f"{', '.join(MODEL_BACKENDS.names())}{hint}")
    if prefix == "local" and not Path(rest).expanduser().exists():
        raise UnknownModelError(f"model {name!r}: the path {rest} does not exist; give a model folder or file")
    if prefix not in OPEN_ENDED_PREFIXES and name not in known:
        raise UnknownModelError(f"unknown model {name!r}: {prefix} has {', '.join(n for n in known if n.startswith(prefix + ':'))}"
                                f"{hint}")


def check_dataset(cfg: RunConfig, labelled: bool = False) -> RunConfig:
    """The config with its dataset checked (it opens, has two classes, and labels where ``labelled``)
    and its path made absolute.

    Absolute, because the worker that runs it may start in another directory.
    """
    from domainbench.data import open_dataset

    from domainbench.label_sets import check_unique, resolve_classes

    ds = open_dataset(cfg.dataset, classes=resolve_classes(cfg.classes), image_size=cfg.image_size).subset(cfg.limit)
    check_unique(ds.classes, f"dataset {cfg.dataset}")
    if not cfg.skip_unreadable:
        from domainbench.data.readable import check_readable

        check_readable(ds.paths)
    if len(ds.classes) < 2:
        raise UserInputError(f"dataset {cfg.dataset} has a single class {ds.classes}: zero-shot accuracy would be 1 by "
                             "construction; give at least two classes")
    if len(ds) == 0:
        raise UserInputError(f"dataset {cfg.dataset} has no images; give a folder with images or `sample`")
    if labelled and not ds.labelled:
        raise UserInputError(f"dataset {cfg.dataset} has no labels: FMR compares predictions with true labels")
    path = Path(cfg.dataset).expanduser()
    if path.exists():
        cfg = cfg.model_copy(update={"dataset": str(path.resolve())})
    return cfg


def check_inputs(domain: DomainConfig, cfg: RunConfig, fmr: FmrSettings | None = None) -> RunConfig:
    """Everything a worker would reject, checked now; returns the config as it is stored."""
    if not domain.domain.strip():
        raise UserInputError("the domain description is empty; describe where your images come from")
    if not domain.corruptions:
        raise UserInputError("the plan has no corruption; add at least one before launching")
    domain.check_catalogue()
    if fmr is not None:
        from domainbench.fmr.oracle import CLASSIFIER_PREFIXES, check_oracle_names

        check_oracle_names(fmr.oracle)
        for m in fmr.oracle:
            check_model_name(m)
    for m in cfg.models:
        # an FMR run may test plain classifiers: their configs and callables are checked when a worker loads them
        if fmr is None or m.partition(":")[0] not in CLASSIFIER_PREFIXES:
            check_model_name(m)
    if cfg.baseline is not None and cfg.baseline not in cfg.models:  # RunConfig checks it too; say it the same way
        raise UserInputError(f"baseline {cfg.baseline!r} is not among the run's models {cfg.models}")
    return check_dataset(cfg, labelled=fmr is not None)


def enqueue_run(store: Store, domain: DomainConfig, cfg: RunConfig, run_id: str | None = None,
                fmr: FmrSettings | None = None) -> RunRecord:
    """Check the inputs, then store the domain and a queued run that any worker can take (an FMR
    search with ``fmr`` settings).

    ``DuplicateRunError`` (with the other run's id) when the same work is already queued or running.
    """
    from domainbench.engine.lifecycle import queue_run

    return queue_run(store, domain, check_inputs(domain, cfg, fmr), run_id, fmr=fmr)

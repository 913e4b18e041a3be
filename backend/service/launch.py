"""Launching a run into the queue: every input is checked here, before anything is stored.

A run found wrong by a worker would be found wrong seconds or minutes later, on whichever
machine took it; so the dataset, the model names, the baseline and the plan are checked
where the user still is (the UI's launch button, the CLI), without loading any model.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from domainbench.records.config import DomainConfig, FmrSettings, RunConfig
from domainbench.errors import UserInputError
from domainbench.store import Store
from domainbench.store.records import RunRecord

if TYPE_CHECKING:
    from domainbench.data.clips import Sampling

def check_model_name(name: str) -> None:
    """Raise ``UserInputError`` naming the model and the close names when ``name`` is not known.

    A backend that accepts any name its library knows (``open_ended``: a hub id, a pretrained tag, a
    path) has only its prefix checked here, and its own ``check_name`` (a path exists); the worker
    reports a name its library lacks."""
    from domainbench.models import MODEL_BACKENDS, UnknownModelError, list_models

    prefix, sep, rest = name.strip().partition(":")
    if sep and rest and prefix in MODEL_BACKENDS:
        backend = MODEL_BACKENDS.get(prefix)
        if backend.check_name is not None:
            backend.check_name(rest)
        if backend.capabilities.open_ended:
            return
    known = list_models()
    close = difflib.get_close_matches(name, known, n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else " (see `domainbench models`)"
    if not sep or not rest or prefix not in MODEL_BACKENDS:
        raise UnknownModelError(f"unknown model {name!r}: a model name is PREFIX:NAME with PREFIX one of "
                                f"{', '.join(MODEL_BACKENDS.names())}{hint}")
    if name not in known:
        raise UnknownModelError(f"unknown model {name!r}: {prefix} has {', '.join(n for n in known if n.startswith(prefix + ':'))}"
                                f"{hint}")


def check_dataset(cfg: RunConfig, labelled: bool = False) -> RunConfig:
    """The config with its dataset checked (it opens, has two classes, and labels where ``labelled``)
    and its path made absolute.

    Absolute, because the worker that runs it may start in another directory.
    """
    from domainbench.data import open_dataset

    from domainbench.records.label_sets import check_unique, resolve_classes

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
        from domainbench.fmr.oracle import check_oracle_names

        check_oracle_names(fmr.oracle)
        for m in fmr.oracle:
            check_model_name(m)
    for m in cfg.models:
        check_model_name(m)
    check_model_args(cfg.model_args, [*cfg.models, *(fmr.oracle if fmr is not None else [])])
    if cfg.baseline is not None and cfg.baseline not in cfg.models:  # RunConfig checks it too; say it the same way
        raise UserInputError(f"baseline {cfg.baseline!r} is not among the run's models {cfg.models}")
    return check_dataset(cfg, labelled=fmr is not None)


def check_model_args(model_args: dict[str, dict[str, Any]], models: list[str], given_as: str = "--model-arg") -> None:
    """Every model given options is one the run loads, and its options fit its backend's schema."""
    from domainbench.models import validate_options

    for name, options in model_args.items():
        if name not in models:
            raise UserInputError(f"{given_as} {name}: {name!r} is not among the run's models {models}; "
                                 "add it to --models (or --oracle) or fix the name")
        validate_options(name, options, given_as)


def enqueue_run(store: Store, domain: DomainConfig, cfg: RunConfig, run_id: str | None = None,
                fmr: FmrSettings | None = None, sampling: Sampling | None = None) -> RunRecord:
    """Check the inputs, then store the domain and a queued run that any worker can take (an FMR
    search with ``fmr`` settings; a clip run when ``cfg.dataset`` is a clip folder or ``sampling`` is given:
    ``domainbench.data.clips.Sampling``, default 8 frames per clip).

    ``DuplicateRunError`` (with the other run's id) when the same work is already queued or running.
    """
    from domainbench.engine.lifecycle import queue_run

    if cfg.task != "classification" and fmr is None:  # a VQA or retrieval run: its manifest and models checked
        from domainbench.engine.task_kind import check_task_inputs

        if not domain.domain.strip():
            raise UserInputError("the domain description is empty; describe where your images come from")
        return queue_run(store, domain, check_task_inputs(domain, cfg), run_id, kind=cfg.task)
    if fmr is None and cfg.task == "classification":
        from domainbench.data.clips import Sampling as ClipSampling, is_clip_dataset

        if sampling is not None or is_clip_dataset(cfg.dataset):
            from domainbench.engine.clip_kind import CLIP_KIND, check_clip_inputs

            if not domain.domain.strip():
                raise UserInputError("the domain description is empty; describe where your clips come from")
            cfg, settings = check_clip_inputs(domain, cfg, sampling or ClipSampling(seed=cfg.seed))
            for m in cfg.models:
                check_model_name(m)
            check_model_args(cfg.model_args, cfg.models)
            return queue_run(store, domain, cfg, run_id, kind=CLIP_KIND, kind_settings=settings)
    if fmr is None:
        from domainbench.engine.clip_kind import still_image_plan

        domain, _ = still_image_plan(domain)  # the queued run stores the plan it evaluates: its image corruptions
    return queue_run(store, domain, check_inputs(domain, cfg, fmr), run_id, fmr=fmr)

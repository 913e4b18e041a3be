"""A run evaluates one dataset for its whole life: the path is made absolute and the content fingerprinted.

Without this a ``--resume`` from another working directory resolved a relative path to another
folder (or a folder whose files had changed) and silently mixed two datasets in one run.
"""

from __future__ import annotations

import os
from pathlib import Path

from domainbench.records.config import RunConfig
from domainbench.data import Dataset, open_dataset
from domainbench.data.fingerprint import dataset_fingerprint
from domainbench.data.readable import check_readable
from domainbench.errors import UserInputError
from domainbench.records.label_sets import check_unique, resolve_classes
from domainbench.store.records import DatasetInfo, RunRecord


def pinned_config(cfg: RunConfig) -> RunConfig:
    """``cfg`` with its dataset as an absolute path where it names a file or folder (``sample`` stays)."""
    path = Path(cfg.dataset).expanduser()
    if cfg.dataset == "sample" or not path.exists():
        return cfg
    return cfg.model_copy(update={"dataset": os.path.abspath(path)})


def dataset_info(ds: Dataset, cfg: RunConfig) -> DatasetInfo:
    """What a run records about the dataset it evaluates."""
    return DatasetInfo(name=ds.name, size=len(ds), classes=ds.classes, labelled=ds.labelled, path=cfg.dataset,
                       fingerprint=dataset_fingerprint(ds))


def check_same_dataset(run: RunRecord, ds: Dataset) -> None:
    """Refuse to resume ``run`` on a dataset whose content differs from the one it started on."""
    stored = run.dataset.fingerprint if run.dataset is not None else None
    if stored is None:  # a queued run's first start, or a run from before fingerprints
        return
    now = dataset_fingerprint(ds)
    changed = stored.differences(now)
    if changed:
        raise UserInputError(
            f"run {run.run_id} was evaluated on dataset {run.config.dataset} ({stored.describe()}), but it now reads "
            f"{now.describe()}: the {changed} changed; restore the dataset or start a new run")


def open_run_dataset(cfg: RunConfig) -> Dataset:
    from domainbench.corruptions.api import MIN_SIDE

    if not cfg.dataset.strip():  # "" would open the working directory as an image folder
        raise UserInputError("dataset is empty; give `sample`, a folder of class folders, a manifest or an image folder")
    ds = open_dataset(cfg.dataset, classes=resolve_classes(cfg.classes), image_size=cfg.image_size).subset(cfg.limit)
    check_unique(ds.classes, f"dataset {cfg.dataset}")
    if not cfg.skip_unreadable:
        check_readable(ds.paths)
    if len(ds.classes) < 2:
        raise UserInputError(
            f"dataset {cfg.dataset} has a single class {ds.classes}: zero-shot accuracy would be 1 by construction; "
            "give at least two classes (--classes a,b for candidate names)"
        )
    if ds.image_size < MIN_SIDE:  # found here, before the run is stored, not by the first corrupted shard
        raise UserInputError(f"image_size = {ds.image_size}: corruptions need images of at least {MIN_SIDE}x{MIN_SIDE} "
                             f"pixels; set image_size to {MIN_SIDE} or more (run config or --run-config)")
    return ds

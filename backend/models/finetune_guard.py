"""A fine-tuned model is never scored on its own training images by accident.

A run that evaluates a ``local:`` fine-tune (a folder with ``finetune.json``) on a dataset holding
any of the files it was trained on is refused with one line naming the overlap: its accuracy and
stability there measure memorisation, not the held-out behaviour the fine-tune is judged on. Two
ways to see an overlap, both from what the fine-tune recorded:

* the run's dataset has the fine-tune's dataset fingerprint (the same folder, a copy of it, or the
  bundled sample): its training indices are the run's images at those positions;
* otherwise the files themselves: the run's files, resolved, against the fine-tune's training files
  (its dataset listed again at the recorded indices; a dataset that no longer exists has none).

The built-in evaluation (``OUT/heldout/manifest.csv``) lists only held-out files and passes. This module
reads ``finetune.json`` as plain JSON (the engine calls it; ``domainbench.tuning`` imports the engine).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from domainbench.errors import UserInputError


#: the state file ``domainbench.tuning.train`` writes (``STATE_FILE`` there)
STATE_FILE = "finetune.json"


@dataclass(frozen=True)
class _Trained:
    dataset: str
    fingerprint: dict[str, Any]
    n_images: int
    train_indices: list[int]
    image_size: int


def _state_of(model: str) -> _Trained | None:
    if not model.startswith("local:"):
        return None
    path = Path(model.removeprefix("local:")).expanduser() / STATE_FILE
    if not path.is_file():
        return None
    try:
        raw = json.loads(path.read_text())
        return _Trained(str(raw["dataset"]), dict(raw["fingerprint"]), int(raw["n_images"]),
                        [int(i) for i in raw["train_indices"]], int(raw["options"]["image_size"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None  # not a fine-tune this version wrote: loading the model reports what is wrong with it


def overlap(state: _Trained, ds: Any, fingerprint: Any) -> list[str]:
    """The run's images (as names) that ``state``'s fine-tune trained on."""
    from domainbench.data.fingerprint import DatasetFingerprint

    train = state.train_indices
    if not DatasetFingerprint.model_validate(state.fingerprint).differences(fingerprint):  # the same content, wherever it lies
        if ds.paths is not None:
            return [str(ds.paths[i]) for i in train]
        return [f"image {i} of {state.dataset}" for i in train]
    if ds.paths is None:
        return []
    from domainbench.data import open_dataset

    try:
        trained = open_dataset(state.dataset, image_size=state.image_size)
    except UserInputError:
        return []  # the training dataset is gone: no file of it can be in this run
    if trained.paths is None or len(trained) != state.n_images:
        return []
    files = {Path(trained.paths[i]).resolve() for i in train}
    return [str(p) for p in ds.paths if Path(p).resolve() in files]


def check_not_training_images(models: Sequence[str], ds: Any) -> None:
    """Refuse a run that would score a fine-tuned model on images it was trained on (one ``UserInputError``)."""
    states = [(m, s) for m in models if (s := _state_of(m)) is not None]
    if not states:
        return
    from domainbench.data.fingerprint import dataset_fingerprint

    fingerprint = dataset_fingerprint(ds)
    for model, state in states:
        hits = overlap(state, ds, fingerprint)
        if hits:
            folder = model.removeprefix("local:")
            raise UserInputError(
                f"{model} was fine-tuned on {len(hits)} of this dataset's {len(ds)} images (e.g. {hits[0]}): scores on its "
                f"training images say nothing about held-out ones; evaluate it on {Path(folder) / 'heldout' / 'manifest.csv'} "
                f"(`domainbench finetune` writes it) or on images it never saw")


def lineage(model: str) -> str | None:
    """One line of where a ``local:`` fine-tune comes from (base, plan, λ), from its folder; None for any other model.

    Read as plain JSON and TOML (no torch, no model loaded): the run page shows it for every run that names one."""
    if not model.startswith("local:"):
        return None
    folder = Path(model.removeprefix("local:")).expanduser()
    try:
        raw = json.loads((folder / STATE_FILE).read_text())
        o = raw["options"]
        parts = [f"λ {float(o['lam']):g}", f"{int(raw.get('epochs_done', 0))} epoch(s)", f"trainable {o.get('trainable', 'all')}"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    domain = None
    try:
        import tomllib

        domain = tomllib.loads((folder / "plan.toml").read_text()).get("domain")
    except (OSError, ValueError):
        pass
    plan = f" under the plan {domain!r}" if isinstance(domain, str) else ""
    return (f"{model} is a fine-tune of {raw.get('base')}{plan}: {', '.join(parts)}, "
            f"{len(raw.get('train_indices', []))} training images of {raw.get('dataset')}")

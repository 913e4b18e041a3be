"""The held-out images of a fine-tune, as a dataset a run can evaluate (never a training image).

The split is by file: a CSV manifest lists the held-out files of a file dataset where they lie; the
bundled sample's held-out images are written once as PNG files beside the manifest (the same pixels:
PNG is lossless, and grey decodes to RGB as training fed them, see ``train._as_rgb``).
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from domainbench.errors import UserInputError
from domainbench.tuning.train import STATE_FILE, FinetuneState

HELDOUT_DIR = "heldout"


def read_state(out: Path) -> FinetuneState:
    if not (out / STATE_FILE).is_file():
        raise UserInputError(f"{str(out)!r} is not a fine-tuned model folder (no {STATE_FILE}); give the -o folder of `domainbench finetune`")
    return FinetuneState.model_validate_json((out / STATE_FILE).read_text())


def heldout_manifest(out: Path) -> tuple[Path, list[str]]:
    """(manifest of the held-out images with their labels, the dataset's class names in order)."""
    from PIL import Image

    from domainbench.data import open_dataset

    state = read_state(out)
    ds = open_dataset(state.dataset, image_size=state.options.image_size)
    if ds.labels is None:
        raise UserInputError(f"the dataset {state.dataset!r} has no labels: the held-out evaluation reports accuracy, so it "
                             "needs class folders or a manifest with labels (the training itself never reads them)")
    idx = np.asarray(state.heldout_indices, dtype=np.int64)
    folder = out / HELDOUT_DIR
    folder.mkdir(exist_ok=True)
    rows: list[tuple[str, str]] = []
    for i in idx:
        if ds.paths is not None:
            path = str(Path(ds.paths[i]).resolve())
        else:
            img = ds.arrays[i] if ds.arrays is not None else ds.load(np.array([i])).images[0]
            path = f"{int(i):06d}.png"
            if not (folder / path).is_file():
                Image.fromarray(np.asarray(img, dtype=np.uint8)).save(folder / path)
        rows.append((path, ds.classes[int(ds.labels[i])]))
    manifest = folder / "manifest.csv"
    with manifest.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["path", "label"])
        w.writerows(rows)
    return manifest, list(ds.classes)

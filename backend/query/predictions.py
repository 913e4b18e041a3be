"""Per-image predictions of a run as a file: one row per (model, corruption, severity, image).

For failure analysis: which images a model gets wrong under which corruption, and how sure it
was. Rows come from the stored units (packed predictions, correctness bits, confidences) and
the clean pass's labels; ``path`` is read from the run's dataset when it can still be opened.
"""

from __future__ import annotations

import csv
import io
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from domainbench.records.config import SHIFT_PREFIX
from domainbench.errors import UserInputError
from domainbench.store import Store
from domainbench.store.records import RunRecord, UnitRecord

#: the columns, in order, and what each holds
PREDICTION_COLUMNS: dict[str, str] = {
    "model": "registry name of the model",
    "corruption": "corruption name, or 'clean'",
    "severity": "severity 1..5 (0 for the clean pass)",
    "image": "index of the image in the run's dataset (a shift:NAME cell of class folders: in its folder's sorted files)",
    "path": "the image file (empty for in-memory datasets such as the sample; for a shift:NAME cell, its file in the shift's folder)",
    "label": "true class name (empty when the dataset is unlabelled)",
    "prediction": "predicted class name (empty: a generative model's answer named no class)",
    "correct": "whether the prediction is the true class (empty when unlabelled)",
    "confidence": "softmax probability of the predicted class over the label set, at the model's logit scale "
                  "(empty for units stored before confidences were)",
}


def prediction_rows(store: Store, run_id: str) -> Iterator[dict[str, Any]]:
    """Rows model by model, cells in (clean first, corruption, severity) order, images by index."""
    run = store.get_run(run_id)
    if run is None:
        raise UserInputError(f"no run {run_id!r} in {store.description}; see `domainbench ls`")
    ds = _dataset(run)
    paths = None if ds is None or ds.paths is None else [str(p) for p in ds.paths]
    # checked here, before any row (or a CSV header) is written: a changed dataset is refused up front
    return _rows(store, run, paths, _shift_files(run, ds))


def _rows(store: Store, run: RunRecord, paths: list[str] | None,
          shift_files: dict[str, dict[int, str]]) -> Iterator[dict[str, Any]]:
    run_id = run.run_id
    for model in run.config.models:
        units = store.units(run_id, model=model)
        labels = _labels(units)
        order = sorted(units, key=lambda u: (u.corruption != "clean", u.corruption, u.severity, u.shard))
        for u in order:
            if u.corruption.startswith(SHIFT_PREFIX):  # its own images: its own labels, paths from its folder
                yield from _unit_rows(u, _labels([u]), shift_files.get(u.corruption))
            else:
                yield from _unit_rows(u, labels, paths)


def _unit_rows(u: UnitRecord, labels: dict[int, int], paths: list[str] | dict[int, str] | None) -> Iterator[dict[str, Any]]:
    classes = u.classes
    idx = np.asarray(u.indices, dtype=np.int64).tolist()
    preds = np.asarray(u.preds, dtype=np.int64).tolist()
    conf = [None] * len(idx) if u.confidence is None else np.asarray(u.confidence).tolist()
    hits = None if u.hits is None else np.asarray(u.hits).tolist()
    for k, (i, p) in enumerate(zip(idx, preds)):
        y = labels.get(i)
        correct = None if y is None else (bool(hits[k]) if hits is not None else p == y)
        yield {
            "model": u.model, "corruption": u.corruption, "severity": u.severity, "image": i,
            "path": _path_of(paths, i),
            "label": "" if y is None else classes[y], "prediction": classes[p] if p >= 0 else "",
            "correct": correct, "confidence": conf[k],
        }


def _labels(units: list[UnitRecord]) -> dict[int, int]:
    """Image index -> true class, from the clean pass (the only units that store labels)."""
    out: dict[int, int] = {}
    for u in units:
        if u.labels is not None and (u.corruption == "clean" or len(units) == 1):
            out.update(zip(np.asarray(u.indices).tolist(), np.asarray(u.labels).tolist()))
    return out


def _path_of(paths: list[str] | dict[int, str] | None, i: int) -> str:
    if paths is None:
        return ""
    if isinstance(paths, dict):
        return paths.get(i, "")
    return paths[i] if i < len(paths) else ""


def _dataset(run: RunRecord) -> Any:
    """The run's dataset; None when it cannot be opened any more (moved or deleted since the run);
    ``UserInputError`` when its content changed since the run (its indices would name other files)."""
    # not via the runner: that imports the executors and torch
    from domainbench.engine.dataset_pin import check_same_dataset, open_run_dataset

    try:
        ds = open_run_dataset(run.config)
    except UserInputError:
        return None  # the rows still say everything else
    check_same_dataset(run, ds)
    return ds


def _shift_files(run: RunRecord, ds: Any) -> dict[str, dict[int, str]]:
    """Per real-shift cell, the file in its folder of each unit index (``ShiftImages.unit_indices``: a paired
    shift's units are indexed by the clean images, another's by position in the folder); a folder that cannot be
    read any more gives no paths."""
    if not run.domain.shift or ds is None:
        return {}
    from domainbench.data.shift_folder import open_shift
    from domainbench.engine.shift_cells import check_same_shifts

    out = {}
    for s in run.domain.shift:
        try:
            shift = open_shift(s.name, s.path, ds, run.config.dataset, run.config.limit)
        except UserInputError:
            continue
        check_same_shifts(run.run_id, run.dataset.shifts if run.dataset is not None else {}, [shift])
        keys = shift.unit_indices().tolist()
        out[s.cell_name] = {int(k): str(p) for k, p in zip(keys, shift.images.paths or [], strict=True)}
    return out


def predictions_csv(store: Store, run_id: str, out: io.TextIOBase | Any) -> int:
    """Write the rows as CSV to ``out``; returns the number of rows. Floats at full precision (repr)."""
    rows = prediction_rows(store, run_id)  # its checks first: nothing is written for a run it refuses
    w = csv.DictWriter(out, fieldnames=list(PREDICTION_COLUMNS))
    w.writeheader()
    n = 0
    for row in rows:
        w.writerow({k: ("" if v is None else repr(v) if isinstance(v, float) else v) for k, v in row.items()})
        n += 1
    return n


def predictions_json(store: Store, run_id: str, out: io.TextIOBase | Any) -> int:
    """Write ``{"run_id", "columns", "rows": [...]}`` to ``out`` (rows as objects); returns the row count."""
    from domainbench.runtime.literal import undecodable_escaped

    rows = prediction_rows(store, run_id)
    out.write(json.dumps({"run_id": run_id, "columns": PREDICTION_COLUMNS})[:-1] + ', "rows": [')
    n = 0
    for row in rows:
        # an undecodable byte of a file or class name (a lone surrogate) as its \xNN text, as the CSV has it:
        # json.dumps would write it as a lone \udcNN escape, which strict JSON parsers refuse
        row = {k: undecodable_escaped(v) if isinstance(v, str) and not v.isascii() else v for k, v in row.items()}
        out.write(("," if n else "") + "\n" + json.dumps(row))
        n += 1
    out.write("\n]}\n")
    return n


def write_predictions(store: Store, run_id: str, fmt: str, output: Path | None) -> int:
    """The CLI's ``export --predictions``: to ``output`` (written whole or not at all) or stdout."""
    if store.get_run(run_id) is None:
        raise UserInputError(f"no run {run_id!r} in {store.description}; see `domainbench ls`")
    from domainbench.runtime.literal import SafeWriter, data_safe

    write = predictions_json if fmt == "json" else predictions_csv
    if output is None:  # a terminal must not run the ESC or bidi characters of class and file names
        return write(store, run_id, SafeWriter(sys.stdout, terminal=True))
    from domainbench.runtime.safe_output import write_atomically

    buf = io.StringIO()
    n = write(store, run_id, buf)
    write_atomically(output, data_safe(buf.getvalue(), terminal=False))  # undecodable name bytes: UTF-8 has no form
    return n

"""``run --breaking-point`` on a class-folder dataset: a seeded sample stratified by class, one threshold per run.

Storage order of a class-folder dataset is class by class, so the first images are the first
classes only; the test caps the sample below the dataset's size to show every class is drawn.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from sklearn.metrics import balanced_accuracy_score

from domainbench.data import open_dataset
from domainbench.engine import breaking_point
from domainbench.engine.breaking_point import stratified_sample
from tests.cli_runner import run_cli

DOMAIN = 'domain = "x"\n[[corruptions]]\nname = "contrast"\nseverities = [3]\n'
PER_CLASS = 6
CAP = 25  # images the breaking point may use here (MAX_IMAGES is 500; the fixture has 60)


def test_the_sample_takes_every_class_as_equally_as_their_sizes_allow() -> None:
    # class-folder order: class 0's images first; class 3 holds a single image
    labels = np.repeat(np.arange(5), [10, 10, 10, 1, 10])
    for size, seed in ((21, 0), (21, 1), (10, 7), (41, 3)):
        idx = stratified_sample(labels, size, seed)
        counts = np.bincount(labels[idx], minlength=5)
        assert idx.size == size and np.all(np.diff(idx) > 0)
        assert counts[3] == 1 and counts.min() >= 1  # every class, the small one whole
        others = np.delete(counts, 3)
        assert others.max() - others.min() <= 1  # as equal as the size allows
    assert np.array_equal(stratified_sample(labels, 21, 0), stratified_sample(labels, 21, 0))  # seeded
    assert not np.array_equal(stratified_sample(labels, 21, 0), stratified_sample(labels, 21, 1))
    assert np.array_equal(stratified_sample(labels, 100, 0), np.arange(labels.size))  # fewer images: all of them


def _class_folders(root: Path) -> Path:
    ds = open_dataset("sample")
    for c, name in enumerate(ds.classes):
        folder = root / name.replace(" ", "_")
        folder.mkdir(parents=True)
        for i in np.flatnonzero(ds.labels == c)[:PER_CLASS]:
            Image.fromarray(ds.arrays[i]).save(folder / f"{i:04d}.png")
    return root


def _clean_predictions(run_id: str, model: str, n: int) -> np.ndarray:
    """The model's stored clean prediction of every dataset image (the run's own clean pass)."""
    from domainbench.store import open_store

    preds = np.full(n, -1)
    for u in open_store().units(run_id):
        if u.model == model and u.corruption == "clean":
            preds[np.asarray(u.indices)] = np.asarray(u.preds)
    assert (preds >= 0).all()
    return preds


def test_breaking_points_of_a_class_folder_run_sample_every_class_and_share_one_threshold(
        home: Path, tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    data = _class_folders(tmp_path / "folders")
    (tmp_path / "d.toml").write_text(DOMAIN)
    (tmp_path / "run.toml").write_text("image_size = 28\n")
    monkeypatch.setattr(breaking_point, "MAX_IMAGES", CAP)
    loaded: list[np.ndarray] = []
    measure = breaking_point.measure_breaking_points

    def spy(ctx, threshold, confidence=0.95):  # the images the breaking point reads, seen from outside
        real_load = ctx.dataset.load
        monkeypatch.setattr(ctx.dataset, "load", lambda idx: loaded.append(np.asarray(idx)) or real_load(idx))
        return measure(ctx, threshold, confidence)

    monkeypatch.setattr(breaking_point, "measure_breaking_points", spy)
    models = "embedded:fmnist-plain,embedded:fmnist-augmented"
    code, _, err = run_cli(["run", str(tmp_path / "d.toml"), "--dataset", str(data), "--run-config", str(tmp_path / "run.toml"),
                            "--models", models, "--no-stability", "--no-threat", "--workers", "0", "--run-id", "bpf",
                            "--breaking-point"], capsys, monkeypatch)
    assert code == 0, err
    ds = open_dataset(str(data), image_size=28)
    assert len(ds) == 10 * PER_CLASS and len(set(ds.labels[:CAP].tolist())) < 10  # storage order: some classes only
    (idx,) = loaded
    assert idx.size == CAP and set(ds.labels[idx].tolist()) == set(range(10))

    code, out, _ = run_cli(["export", "bpf", "--format", "json"], capsys, monkeypatch)
    points = json.loads(out)["breaking_points"]
    assert {p["model"] for p in points} == set(models.split(","))
    # one threshold: halfway from the baseline's (the first model's) clean balanced accuracy on the sample to chance
    clean = _clean_predictions("bpf", "embedded:fmnist-plain", len(ds))
    expected = (balanced_accuracy_score(ds.labels[idx], clean[idx]) + 0.1) / 2
    (threshold,) = {p["threshold"] for p in points}
    assert threshold == pytest.approx(expected, abs=1e-12)
    assert {(p["threshold_model"], p["n_classes"], p["n_images"], p["confidence"]) for p in points} == {
        ("embedded:fmnist-plain", 10, CAP, 0.95)}
    code, out, _ = run_cli(["show", "bpf"], capsys, monkeypatch)
    out = " ".join(out.split())  # the footer wraps at the terminal's width
    assert "95 % interval" in out and "one threshold for every model" in out and f"{CAP} images of 10 classes" in out

"""A run pins its dataset: absolute path and fingerprint; a resume from anywhere refuses a changed dataset."""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from domainbench.records.config import CorruptionChoice, DomainConfig, save
from domainbench.data import SAMPLE_PATH, load_sample, open_dataset
from domainbench.data.fingerprint import SAMPLED_FILES, dataset_fingerprint
from domainbench.errors import UserInputError
from domainbench.store import open_store
from tests.cli_runner import run_cli

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))
import fake_models  # noqa: E402,F401  (registers fake:)


def _folder(root: Path, n: int = 3) -> Path:
    for c, cls in enumerate(("cat", "dog")):
        (root / cls).mkdir(parents=True)
        for i in range(n):
            Image.fromarray(np.full((10, 10, 3), (7 * i + c) % 256, np.uint8)).save(root / cls / f"{i}.png")
    return root


def test_fingerprint_by_hand(tmp_path: Path) -> None:
    root = _folder(tmp_path / "ds")
    fp = dataset_fingerprint(open_dataset(str(root)))
    files = sorted(p for p in root.rglob("*.png"))
    listing = hashlib.sha256(b"".join(f"{p.relative_to(root)}\0{p.stat().st_size}\n".encode() for p in files))
    content = hashlib.sha256(b"".join(f"{p.relative_to(root)}\0".encode() + hashlib.sha256(p.read_bytes()).digest()
                                      for p in files))  # 6 files <= SAMPLED_FILES: all sampled
    assert (fp.kind, fp.files, fp.root, fp.sampled) == ("files", 6, str(root), 6)
    assert fp.listing_sha256 == listing.hexdigest() and fp.content_sha256 == content.hexdigest()
    sample = dataset_fingerprint(load_sample())
    assert sample.kind == "sample" and sample.version == hashlib.sha256(SAMPLE_PATH.read_bytes()).hexdigest()[:16]


def test_fingerprint_samples_a_fixed_subset_of_a_large_folder(tmp_path: Path) -> None:
    root = _folder(tmp_path / "ds", n=40)
    fp = dataset_fingerprint(open_dataset(str(root)))
    assert fp.files == 80 and fp.sampled == SAMPLED_FILES
    assert dataset_fingerprint(open_dataset(str(root))) == fp  # deterministic


@pytest.mark.parametrize("change", ["content", "added", "renamed"])
def test_any_change_is_a_difference(change: str, tmp_path: Path) -> None:
    root = _folder(tmp_path / "ds")
    before = dataset_fingerprint(open_dataset(str(root)))
    if change == "content":  # same size, other bytes: only the content hash sees it
        p = root / "cat" / "0.png"
        Image.fromarray(np.full((10, 10, 3), 99, np.uint8)).save(p)
    elif change == "added":
        Image.fromarray(np.zeros((10, 10, 3), np.uint8)).save(root / "dog" / "9.png")
    else:
        os.rename(root / "dog" / "2.png", root / "dog" / "7.png")
    diff = before.differences(dataset_fingerprint(open_dataset(str(root))))
    assert diff, change
    assert ("file count" in diff) == (change == "added")


def test_resume_from_another_directory_refuses_a_changed_dataset(home: Path, tmp_path: Path, capsys,
                                                                 monkeypatch) -> None:
    work = tmp_path / "work"
    work.mkdir()
    _folder(work / "ds")
    cfg = save(DomainConfig(domain="d", corruptions=[CorruptionChoice(name="brightness", severities=[1])]),
               tmp_path / "domain.toml")
    monkeypatch.chdir(work)
    code, _, err = run_cli(["run", str(cfg), "--models", "fake:a", "--dataset", "ds", "--no-stability", "--no-threat",
                            "--workers", "0", "--run-id", "r1"], capsys, monkeypatch)
    assert code == 0, err
    run = open_store().get_run("r1")
    assert run.config.dataset == str(work / "ds") and run.dataset.path == str(work / "ds")
    assert run.dataset.fingerprint == dataset_fingerprint(open_dataset(str(work / "ds")))
    # elsewhere, a folder called ds with other images: the stored absolute path is used, unchanged: fine
    other = tmp_path / "elsewhere"
    _folder(other / "ds", n=5)
    monkeypatch.chdir(other)
    open_store().update_run("r1", status="interrupted")
    code, _, err = run_cli(["run", "--resume", "r1"], capsys, monkeypatch)
    assert code == 0, err
    # the pinned folder changes: refused, naming both, nothing changed
    Image.fromarray(np.zeros((10, 10, 3), np.uint8)).save(work / "ds" / "cat" / "new.png")
    open_store().update_run("r1", status="interrupted")
    units = len(open_store().find("units"))
    code, _, err = run_cli(["run", "--resume", "r1"], capsys, monkeypatch)
    assert code == 2 and err.count("\n") == 1, err
    assert f"dataset {work / 'ds'} (6 files under {work / 'ds'}" in err and "now reads 7 files" in err
    assert "file count" in err
    assert len(open_store().find("units")) == units and open_store().get_run("r1").status == "interrupted"


def test_a_queued_run_pins_its_dataset_when_a_worker_first_starts_it(home: Path, tmp_path: Path,
                                                                     monkeypatch) -> None:
    from domainbench.records.config import RunConfig
    from domainbench.engine.runner import Engine
    from domainbench.store.queue import queue_of
    from domainbench.store.records import RunRecord
    from domainbench.store.repositories import domain_id

    work = tmp_path / "work"
    _folder(work / "ds")
    monkeypatch.chdir(work)
    domain = DomainConfig(domain="d", corruptions=[CorruptionChoice(name="brightness", severities=[1])])
    cfg = RunConfig(models=["fake:a"], dataset="ds", stability=False, threat=False, workers=0)
    store = open_store()
    queue_of(store).enqueue(RunRecord(run_id="q1", domain_id=domain_id(domain), domain=domain, config=cfg,
                                      status="queued", created_at="2026-01-01T00:00:00"))
    Engine(store).resume("q1")
    run = store.get_run("q1")
    assert run.status == "done" and run.config.dataset == str(work / "ds") and run.dataset.path == str(work / "ds")
    assert run.dataset.fingerprint == dataset_fingerprint(open_dataset(str(work / "ds")))


def test_every_reader_of_a_runs_images_refuses_a_changed_dataset(home: Path, tmp_path: Path, capsys,
                                                                  monkeypatch) -> None:
    # issue 36, item 4: export --predictions re-opened the dataset unchecked, so an added file shifted every
    # index onto another file (label "bag", path ankle_boot/6.png); the gallery's images likewise
    from domainbench import query

    _folder(tmp_path / "ds")
    cfg = save(DomainConfig(domain="d", corruptions=[CorruptionChoice(name="brightness", severities=[1])]),
               tmp_path / "domain.toml")
    code, _, err = run_cli(["run", str(cfg), "--models", "fake:a", "--dataset", str(tmp_path / "ds"), "--no-stability",
                            "--no-threat", "--workers", "0", "--run-id", "r1"], capsys, monkeypatch)
    assert code == 0, err
    code, before, err = run_cli(["export", "r1", "--predictions"], capsys, monkeypatch)
    assert code == 0 and "cat/0.png" in before, err
    run = open_store().get_run("r1")
    assert query.recreate_images(run, "brightness", 1, [0, 1])[0].shape[0] == 2
    Image.fromarray(np.zeros((10, 10, 3), np.uint8)).save(tmp_path / "ds" / "cat" / "00.png")  # sorts first
    code, out, err = run_cli(["export", "r1", "--predictions"], capsys, monkeypatch)
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert err.startswith("error: run r1 was evaluated on dataset") and "now reads 7 files" in err
    with pytest.raises(UserInputError, match="now reads 7 files"):
        query.recreate_images(run, "brightness", 1, [0, 1])

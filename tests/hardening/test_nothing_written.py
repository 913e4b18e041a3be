"""Refusals found before anything is written (issue 36, item 17): image_size below the corruptions' minimum
(the run record and clean units were stored first), and `gallery` of a too-small image (an empty -o folder)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from domainbench.records.config import CorruptionChoice, DomainConfig, save
from domainbench.store import open_store
from tests.cli_runner import run_cli


def _folder(root: Path) -> Path:
    for cls in ("a", "b"):
        (root / cls).mkdir(parents=True)
        for i in range(2):
            Image.fromarray(np.full((20, 20, 3), 60 * i + 20, np.uint8)).save(root / cls / f"{i}.png")
    return root


def test_image_size_below_the_minimum_is_refused_before_the_run_is_stored(
        home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    plan = save(DomainConfig(domain="d", corruptions=[CorruptionChoice(name="brightness", severities=[1])]),
                tmp_path / "plan.toml")
    (tmp_path / "run.toml").write_text("image_size = 8\n")
    code, _, err = run_cli(["run", str(plan), "--models", "embedded:fmnist-plain", "--dataset",
                            str(_folder(tmp_path / "data")), "--run-config", str(tmp_path / "run.toml"),
                            "--workers", "0"], capsys, monkeypatch)
    assert code == 2 and err.startswith("error: image_size = 8") and "16" in err and err.count("\n") == 1, err
    store = open_store()
    assert store.list_runs() == [] and store.find("units") == [] and store.find("domains") == []


def test_gallery_of_a_too_small_image_creates_no_folder(home: Path, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    Image.new("RGB", (1, 1)).save(tmp_path / "dot.png")
    code, _, err = run_cli(["gallery", "--image", str(tmp_path / "dot.png"), "-o", str(tmp_path / "sheets"),
                            "-c", "fog"], capsys, monkeypatch)
    assert code == 2 and "is 1x1" in err and "16x16" in err and err.count("\n") == 1, err
    assert not (tmp_path / "sheets").exists()
    code, _, err = run_cli(["gallery", "--image", str(tmp_path), "-o", str(tmp_path / "sheets"), "-c", "fog"],
                           capsys, monkeypatch)
    assert code == 2 and "is a folder" in err, err

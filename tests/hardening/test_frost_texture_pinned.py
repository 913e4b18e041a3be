"""A run keeps its frost texture: a resume where frost would overlay the other texture source (the
reference's photographs present at the start and absent at the resume, or the reverse) is refused."""

from __future__ import annotations

import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

from domainbench.records.config import Composition, CompositionStep, CorruptionChoice, DomainConfig, save
from domainbench.corruptions.kernels import frost_photos
from domainbench.store import open_store
from tests.cli_runner import run_cli

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))
import fake_models  # noqa: E402,F401  (registers fake:)

DOMAIN = DomainConfig(
    domain="frosted window",
    corruptions=[CorruptionChoice(name="frost", severities=[3]), CorruptionChoice(name="brightness", severities=[1])],
    compositions=[Composition(name="cold_night", steps=[CompositionStep(corruption="brightness", severity=1),
                                                        CompositionStep(corruption="frost", severity=2)])],
)


def _photo_folder(root: Path) -> Path:
    """Stand-ins for imagecorruptions' frost photographs (frost reads any folder holding the six files)."""
    root.mkdir()
    rng = np.random.default_rng(0)
    for name in frost_photos.FILES:
        cv2.imwrite(str(root / name), rng.integers(0, 256, (60, 80, 3), dtype=np.uint8))
    return root


def _start(tmp_path: Path, capsys, monkeypatch, texture: str, run_id: str) -> None:
    monkeypatch.setenv(frost_photos.ENV, texture)
    domain = save(DOMAIN, tmp_path / f"{run_id}.toml")
    code, _, err = run_cli(["run", str(domain), "--models", "fake:a", "--limit", "8", "--no-stability", "--no-threat",
                            "--workers", "0", "--run-id", run_id], capsys, monkeypatch)
    assert code == 0, err
    open_store().update_run(run_id, status="interrupted")


def _resume_refused(capsys, monkeypatch, texture: str, run_id: str) -> str:
    monkeypatch.setenv(frost_photos.ENV, texture)
    units = len(open_store().find("units"))
    code, _, err = run_cli(["run", "--resume", run_id], capsys, monkeypatch)
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1, err
    assert len(open_store().find("units")) == units and open_store().get_run(run_id).status == "interrupted"
    return err


def test_units_of_frost_and_of_a_composition_with_frost_record_the_texture(home: Path, tmp_path: Path, capsys,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    _start(tmp_path, capsys, monkeypatch, str(_photo_folder(tmp_path / "photos")), "r1")
    texture = {u.corruption: u.frost_texture for u in open_store().units("r1")}
    assert texture == {"frost": "imagenet-c", "compose:cold_night": "imagenet-c", "brightness": None, "clean": None}


def test_resume_without_the_photographs_is_refused(home: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    _start(tmp_path, capsys, monkeypatch, str(_photo_folder(tmp_path / "photos")), "r1")
    err = _resume_refused(capsys, monkeypatch, "procedural", "r1")
    assert "run r1 overlaid frost with the imagenet-c texture, but frost here uses the procedural texture" in err
    assert "pip install 'domainbench[imagenet-c]'" in err and "start a new run" in err
    # the photographs back: the resume goes on
    monkeypatch.setenv(frost_photos.ENV, str(tmp_path / "photos"))
    code, _, err = run_cli(["run", "--resume", "r1"], capsys, monkeypatch)
    assert code == 0, err


def test_resume_with_the_photographs_of_a_procedural_run_is_refused(home: Path, tmp_path: Path, capsys,
                                                                   monkeypatch) -> None:
    _start(tmp_path, capsys, monkeypatch, "procedural", "r2")
    photos = _photo_folder(tmp_path / "photos")
    err = _resume_refused(capsys, monkeypatch, str(photos), "r2")
    assert f"overlaid frost with the procedural texture, but frost here uses the imagenet-c texture (photographs in {photos})" in err
    assert f"set {frost_photos.ENV}=procedural and resume again" in err


def test_a_run_whose_units_predate_texture_records_resumes(home: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    _start(tmp_path, capsys, monkeypatch, "procedural", "r3")
    store = open_store()
    store.units.put_many([u.model_copy(update={"frost_texture": None}) for u in store.units("r3")])
    monkeypatch.setenv(frost_photos.ENV, str(_photo_folder(tmp_path / "photos")))
    code, _, err = run_cli(["run", "--resume", "r3"], capsys, monkeypatch)
    assert code == 0, err


def test_a_run_without_frost_resumes_whatever_the_frost_setting(home: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    domain = save(DomainConfig(domain="d", corruptions=[CorruptionChoice(name="brightness", severities=[1])]), tmp_path / "d.toml")
    code, _, err = run_cli(["run", str(domain), "--models", "fake:a", "--limit", "8", "--no-stability", "--no-threat",
                            "--workers", "0", "--run-id", "r4"], capsys, monkeypatch)
    assert code == 0, err
    open_store().update_run("r4", status="interrupted")
    monkeypatch.setenv(frost_photos.ENV, str(tmp_path / "no-such-folder"))  # frost itself would refuse this setting
    code, _, err = run_cli(["run", "--resume", "r4"], capsys, monkeypatch)
    assert code == 0, err

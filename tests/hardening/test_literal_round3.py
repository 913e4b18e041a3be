"""Names printed literally (issue 36, items 18 and 19): no emoji codes (`run:cat:1` stays itself), no
ESC/newline of a composition name in `show`, no raw ESC/bidi characters from class and file names in
`export --predictions` on stdout, and a non-UTF-8 file name exported as its escape (item 16)."""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from domainbench.records.config import Composition, CompositionStep, CorruptionChoice, DomainConfig, save
from domainbench.runtime.literal import data_safe
from tests.cli_runner import run_cli

ESC_CLASS = "cat\x1b[31m"
BIDI_CLASS = "dog\u202e"


def _dataset(root: Path) -> Path:
    rng = np.random.default_rng(0)
    for cls in (ESC_CLASS, BIDI_CLASS):
        (root / cls).mkdir(parents=True)
        for i in range(3):
            Image.fromarray(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)).save(root / cls / f"{i}.png")
    # a file name that is not UTF-8 (byte 0xff)
    with open(os.fsencode(root / ESC_CLASS) + b"/\xff.png", "wb") as f:
        Image.fromarray(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)).save(f, format="PNG")
    return root


def test_names_print_literally(home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                               monkeypatch: pytest.MonkeyPatch) -> None:
    data = _dataset(tmp_path / "data")
    plan = save(DomainConfig(domain="d", corruptions=[CorruptionChoice(name="brightness", severities=[1])],
                             compositions=[Composition(name="dark\x1b[2J\nnoisy", steps=[
                                 CompositionStep(corruption="brightness", severity=3),
                                 CompositionStep(corruption="gaussian_noise", severity=2)])]),
                tmp_path / "plan.toml")
    (tmp_path / "run.toml").write_text("stability_images = 2\nstability_points = 1\n")  # the damage line needs it
    code, out, err = run_cli(["run", str(plan), "--models", "embedded:fmnist-plain", "--dataset", str(data),
                              "--workers", "0", "--no-threat", "--run-config", str(tmp_path / "run.toml"),
                              "--run-id", "run:cat:1"],
                             capsys, monkeypatch, quiet=False)
    assert code == 0, err
    assert "run run:cat:1" in out and "\U0001f431" not in out + err
    code, out, err = run_cli(["show", "run:cat:1", "--details"], capsys, monkeypatch)  # the damage list names every cell
    assert code == 0, err
    assert "run run:cat:1" in out and "\U0001f431" not in out
    assert "\x1b" not in out and "compose:dark\\x1b[2J\\x0anoisy" in out  # the composition, escaped on one line

    code, out, err = run_cli(["export", "run:cat:1", "--predictions"], capsys, monkeypatch)
    assert code == 0, err
    assert "\x1b" not in out and "\u202e" not in out and "\\x1b[31m" in out and "\\u202e" in out
    assert "\\xff.png" in out and not any(0xD800 <= ord(c) <= 0xDFFF for c in out)
    code, _, err = run_cli(["export", "run:cat:1", "--predictions", "-o", str(tmp_path / "p.csv")], capsys,
                           monkeypatch)
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO((tmp_path / "p.csv").read_bytes().decode("utf-8"))))  # valid UTF-8
    assert any(r["path"].endswith("\\xff.png") for r in rows) and any(ESC_CLASS in r.values() for r in rows)
    # JSON a strict parser takes: no lone surrogate, not even as a \udcff escape; the byte as the CSV writes it
    for target in (None, tmp_path / "p.json"):
        code, out, err = run_cli(["export", "run:cat:1", "--predictions", "--format", "json",
                                  *(["-o", str(target)] if target else [])], capsys, monkeypatch)
        assert code == 0, err
        text = target.read_bytes().decode("utf-8") if target else out
        assert "\\ud" not in text.lower(), "a lone surrogate escape"
        doc = json.loads(text)
        assert all(isinstance(v, str) and v.encode("utf-8") for r in doc["rows"] for v in r.values() if isinstance(v, str))
        assert any(r["path"].endswith("\\xff.png") for r in doc["rows"]) and len(doc["rows"]) == len(rows)

    code, _, err = run_cli(["rm", "run:cat:1", "--force"], capsys, monkeypatch, quiet=False)
    assert code == 0 and "deleted run run:cat:1" in err and "\U0001f431" not in err, err
    code, _, err = run_cli(["show", "run:cat:1"], capsys, monkeypatch)
    assert code == 2 and "run:cat:1" in err and "\U0001f431" not in err


def test_an_error_naming_a_model_keeps_its_colons(home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    plan = save(DomainConfig(domain="d", corruptions=[CorruptionChoice(name="brightness", severities=[1])]),
                tmp_path / "plan.toml")
    code, _, err = run_cli(["run", str(plan), "--models", "openai-vlm:m", "--workers", "0"], capsys, monkeypatch)
    assert code == 2 and "openai-vlm:m: give MODEL@URL" in err and "\u24c2" not in err, err


def test_data_safe() -> None:
    assert data_safe("a,b\r\n", terminal=True) == "a,b\r\n"
    assert data_safe("x\x1b[2Jy\u202e\n", terminal=True) == "x\\x1b[2Jy\\u202e\n"
    assert data_safe("caf\udcff.png", terminal=False) == "caf\\xff.png"
    assert data_safe("x\x1by", terminal=False) == "x\x1by"  # a file keeps the data as it is

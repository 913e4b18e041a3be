"""Inputs from the wild: non-UTF-8 files and names, 16-bit and rotated images, undecodable folders."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from domainbench.records.config import CorruptionChoice, DomainConfig, save
from domainbench.data import open_dataset
from domainbench.data.decoding import display_name, to_rgb
from domainbench.errors import UserInputError
from tests.cli_runner import run_cli

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))
import fake_models  # noqa: E402,F401  (registers fake:)


def _one_error_line(code: int, err: str) -> str:
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, (code, err)
    return lines[0]


def test_sixteen_bit_grey_is_scaled_not_clipped(tmp_path: Path) -> None:
    ramp = (np.arange(64, dtype=np.uint16).reshape(8, 8) * 1040)  # 0 .. 65520
    Image.fromarray(ramp).save(tmp_path / "g16.png")
    with Image.open(tmp_path / "g16.png") as im:
        assert im.mode in ("I;16", "I")
        rgb = np.asarray(to_rgb(im))
    expect = np.rint(ramp.astype(np.float64) * 255 / 65535).astype(np.uint8)
    assert rgb.shape == (8, 8, 3) and (rgb == expect[..., None]).all()
    assert (rgb == 255).mean() < 0.05  # clipping made 63 of 64 pixels white


def test_exif_orientation_is_applied(tmp_path: Path) -> None:
    arr = np.zeros((4, 6, 3), np.uint8)
    arr[0, 0] = (255, 0, 0)  # a red top-left corner of the stored pixels
    exif = Image.Exif()
    exif[0x0112] = 6  # "rotate 90 CW to view"
    Image.fromarray(arr).save(tmp_path / "r.png", exif=exif)
    with Image.open(tmp_path / "r.png") as im:
        out = np.asarray(to_rgb(im))
    assert out.shape == (6, 4, 3)  # upright: portrait
    assert tuple(out[0, -1]) == (255, 0, 0)  # the stored top-left is shown top-right
    assert (out == np.rot90(arr, k=-1)).all()


@pytest.mark.parametrize("mode", ["P", "LA", "CMYK", "L", "RGBA", "1"])
def test_other_modes_become_rgb_as_pillow_converts_them(mode: str) -> None:
    base = Image.fromarray(np.random.default_rng(0).integers(0, 256, (5, 7, 3), dtype=np.uint8))
    im = base.convert(mode)
    out = to_rgb(im)
    assert out.mode == "RGB" and out.size == (7, 5)
    assert (np.asarray(out) == np.asarray(im.convert("RGB"))).all()


def test_display_name_escapes_undecodable_bytes() -> None:
    assert display_name("plain") == "plain"
    assert display_name(os.fsdecode(b"caf\xe9")) == "caf\\xe9"


def test_non_utf8_class_folder_names_are_shown_escaped_and_the_run_works(home: Path, tmp_path: Path, capsys,
                                                                        monkeypatch) -> None:
    root = tmp_path / "ds"
    for raw in (b"caf\xe9", b"tea"):
        d = Path(os.fsdecode(str(root).encode() + b"/" + raw))
        d.mkdir(parents=True)
        for i in range(2):
            Image.fromarray(np.full((12, 12, 3), 60 * i, np.uint8)).save(d / f"{i}.png")
    ds = open_dataset(str(root))
    assert ds.classes == ["caf\\xe9", "tea"]
    cfg = save(DomainConfig(domain="d", corruptions=[CorruptionChoice(name="brightness", severities=[1])]),
               tmp_path / "domain.toml")
    code, out, err = run_cli(["run", str(cfg), "--models", "fake:a", "--dataset", str(root), "--no-stability",
                              "--no-threat", "--workers", "0"], capsys, monkeypatch)
    assert code == 0, err
    from domainbench.store import open_store

    assert open_store().list_runs()[0].status == "done"


def test_a_folder_where_no_image_decodes_is_refused_naming_it(home: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    for cls in ("a", "b"):
        (tmp_path / "ds" / cls).mkdir(parents=True)
        (tmp_path / "ds" / cls / "x.jpg").write_bytes(b"\xff\xd8 not a jpeg")
    with pytest.raises(UserInputError, match="none of its 2 image files can be decoded"):
        open_dataset(str(tmp_path / "ds"))
    cfg = save(DomainConfig(domain="d", corruptions=[CorruptionChoice(name="brightness")]), tmp_path / "domain.toml")
    code, _, err = run_cli(["run", str(cfg), "--models", "fake:a", "--dataset", str(tmp_path / "ds")], capsys, monkeypatch)
    assert str(tmp_path / "ds") in _one_error_line(code, err)
    from domainbench.store import open_store

    assert open_store().list_runs() == []


@pytest.mark.parametrize("which", ["domain", "run"])
def test_non_utf8_toml_names_the_file_and_byte_offset(which: str, home: Path, tmp_path: Path, capsys,
                                                      monkeypatch) -> None:
    cfg = save(DomainConfig(domain="d", corruptions=[CorruptionChoice(name="brightness")]), tmp_path / "domain.toml")
    bad = tmp_path / f"{which}-latin1.toml"
    text = 'domain = "caf\xe9"\n[[corruptions]]\nname = "brightness"\n' if which == "domain" else 'dataset = "caf\xe9"\n'
    bad.write_bytes(text.encode("latin-1"))
    args = ["run", str(bad)] if which == "domain" else ["run", str(cfg), "--run-config", str(bad)]
    code, _, err = run_cli([*args, "--models", "fake:a"], capsys, monkeypatch)
    line = _one_error_line(code, err)
    offset = text.encode("latin-1").index(b"\xe9")
    assert f"{bad} is not UTF-8 text (byte offset {offset}: b'\\xe9')" in line


def test_non_utf8_manifest_is_refused(tmp_path: Path) -> None:
    (tmp_path / "m.csv").write_bytes("path,label\nx.png,caf\xe9\n".encode("latin-1"))
    with pytest.raises(UserInputError, match=r"m.csv is not UTF-8 text \(byte offset 20: b"):
        open_dataset(str(tmp_path / "m.csv"))

"""`-o` outputs: written whole through a temporary file and a rename; devices, FIFOs, sockets, folders refused."""

from __future__ import annotations

import os
import socket
import stat
import sys
from pathlib import Path

import pytest

from domainbench.records.config import CorruptionChoice, DomainConfig, save
from domainbench.errors import UserInputError
from domainbench.runtime.safe_output import output_dir, write_atomically
from tests.cli_runner import run_cli

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))
import fake_models  # noqa: E402,F401  (registers fake:)


def _specials(tmp_path: Path) -> dict[str, Path]:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    sock_path = tmp_path / "sock"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(sock_path))
    sock.close()  # the socket file stays
    (tmp_path / "folder").mkdir()
    return {"a character device": Path("/dev/null"), "a FIFO": fifo, "a socket": sock_path,
            "a directory": tmp_path / "folder"}


def _state(tmp_path: Path) -> dict[str, tuple[int, int]]:
    return {str(p): (p.lstat().st_mode, p.lstat().st_size) for p in tmp_path.rglob("*")}


def test_write_atomically_replaces_whole_keeps_mode_and_leaves_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "out.csv"
    target.write_text("old")
    target.chmod(0o640)
    write_atomically(target, "new content")
    assert target.read_text() == "new content" and stat.S_IMODE(target.stat().st_mode) == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["out.csv"]
    fresh = write_atomically(tmp_path / "sub" / "new.bin", b"\x00\x01")
    assert fresh.read_bytes() == b"\x00\x01"
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o666 & ~umask


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "out.csv"
    target.write_text("old")

    def full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError):
        write_atomically(target, "new")
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["out.csv"]


def test_a_symlink_is_written_through(tmp_path: Path) -> None:
    real = tmp_path / "real.csv"
    real.write_text("old")
    link = tmp_path / "link.csv"
    link.symlink_to(real)
    write_atomically(link, "new")
    assert link.is_symlink() and os.readlink(link) == str(real) and real.read_text() == "new"
    dangling = tmp_path / "dangling.csv"
    dangling.symlink_to(tmp_path / "later.csv")
    write_atomically(dangling, "x")
    assert dangling.is_symlink() and (tmp_path / "later.csv").read_text() == "x"


def test_specials_are_refused_and_left_alone(tmp_path: Path) -> None:
    for what, path in _specials(tmp_path).items():
        before = _state(tmp_path)
        with pytest.raises(UserInputError, match=f"is {what}, not a file"):
            write_atomically(path, "x")
        assert _state(tmp_path) == before
        link = tmp_path / f"link-to-{path.name}"
        link.symlink_to(path)
        with pytest.raises(UserInputError, match=f"is {what}"):
            write_atomically(link, "x")  # through a link too
    with pytest.raises(UserInputError, match="is a FIFO, not a folder"):
        output_dir(tmp_path / "fifo")
    (tmp_path / "file").write_text("f")
    with pytest.raises(UserInputError, match="is not a folder"):
        output_dir(tmp_path / "file" / "below")


@pytest.mark.parametrize("command", ["plan", "export", "gallery"])
def test_cli_outputs_refuse_specials_with_exit_2_and_write_nothing(command: str, home: Path, tmp_path: Path,
                                                                   capsys, monkeypatch) -> None:
    from domainbench.store import open_store

    run_id = None
    if command == "export":
        cfg = save(DomainConfig(domain="d", corruptions=[CorruptionChoice(name="brightness", severities=[1])]),
                   tmp_path / "domain.toml")
        code, _, err = run_cli(["run", str(cfg), "--models", "fake:a", "--limit", "6", "--no-stability", "--no-threat",
                                "--workers", "0", "--run-id", "r1"], capsys, monkeypatch)
        assert code == 0, err
        run_id = "r1"
    (tmp_path / "specials").mkdir()
    specials = _specials(tmp_path / "specials")
    if command == "gallery":
        specials.pop("a directory")  # a folder is what gallery wants
        specials["a file"] = tmp_path / "specials" / "plain"
        specials["a file"].write_text("keep me")
    store = open_store()
    domains_before = len(store.find("domains"))
    for what, path in specials.items():
        before = _state(tmp_path / "specials")
        args = {"plan": ["plan", "blurry photos", "--provider", "offline", "--samples", "1", "-o", str(path)],
                "export": ["export", str(run_id), "-o", str(path)],
                "gallery": ["gallery", "-o", str(path), "-c", "brightness"]}[command]
        code, out, err = run_cli(args, capsys, monkeypatch)
        assert code == 2, (what, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"error: -o {path} is {what}"), err
        assert _state(tmp_path / "specials") == before
    assert len(store.find("domains")) == domains_before  # plan stored no domain either


def test_gallery_refuses_a_fifo_among_the_sheet_names_before_writing_any(home: Path, tmp_path: Path, capsys,
                                                                      monkeypatch) -> None:
    out = tmp_path / "sheets"
    out.mkdir()
    os.mkfifo(out / "contrast.png")
    code, _, err = run_cli(["gallery", "-o", str(out), "-c", "brightness,contrast"], capsys, monkeypatch)
    assert code == 2 and "contrast.png is a FIFO" in err
    assert sorted(p.name for p in out.iterdir()) == ["contrast.png"]
    os.unlink(out / "contrast.png")
    code, _, err = run_cli(["gallery", "-o", str(out), "-c", "brightness,contrast"], capsys, monkeypatch)
    assert code == 0, err
    assert sorted(p.name for p in out.iterdir()) == ["brightness.png", "contrast.png"]

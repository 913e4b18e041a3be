"""Text from users and the store is printed literally: console markup and control characters included."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from domainbench.records.config import CorruptionChoice, DomainConfig, save
from domainbench.runtime.literal import literal, markup_safe, printable
from tests.cli_runner import run_cli

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))
import fake_models  # noqa: E402,F401  (registers fake:)

ODD_ID = "odd[/b][red]id"
ODD_DOMAIN = "night [bold]dash-cam[/] \x1b[31mred\x1b[0m footage\rwith [/b] in it \u202eevil"


def test_printable_escapes_control_characters_only() -> None:
    assert printable("plain text, café — 猫") == "plain text, café — 猫"
    assert printable("a\x1b[31mb\tc\nd\x7f") == "a\\x1b[31mb\\x09c\\x0ad\\x7f"
    assert printable("x\u202ey") == "x\\u202ey"  # a right-to-left override
    assert printable(b"caf\xff".decode("utf-8", "surrogateescape")) == "caf\\xff"  # the undecodable byte
    assert printable("a\nb\x07", newlines=True) == "a\nb\\x07"


def test_markup_is_shown_not_interpreted() -> None:
    from rich.console import Console

    console = Console(width=200, record=True, color_system=None)
    console.print(f"[bold]{markup_safe(ODD_ID)}[/bold]")
    console.print(literal("[red]x[/]"))
    assert console.export_text().splitlines() == [ODD_ID, "[red]x[/]"]


def test_odd_run_id_and_domain_text_print_literally_in_every_command(home: Path, tmp_path: Path, capsys,
                                                                    monkeypatch) -> None:
    domain = DomainConfig(domain=ODD_DOMAIN, corruptions=[CorruptionChoice(name="brightness", severities=[2])])
    cfg = save(domain, tmp_path / "domain.toml")
    monkeypatch.setenv("COLUMNS", "300")
    code, out, err = run_cli(["run", str(cfg), "--models", "fake:a", "--limit", "10", "--no-stability", "--no-threat",
                              "--workers", "0", "--run-id", ODD_ID], capsys, monkeypatch, quiet=False)
    assert code == 0, err
    assert f"run {ODD_ID} — baseline fake:a" in out and f"run {ODD_ID}: " in err
    code, out, err = run_cli(["show", ODD_ID], capsys, monkeypatch)
    assert code == 0 and f"run {ODD_ID} — baseline" in out, err
    code, out, err = run_cli(["ls"], capsys, monkeypatch)
    assert code == 0, err
    assert ODD_ID in out and "\x1b" not in out and "\r" not in out and "\u202e" not in out
    assert "[bold]dash-cam[/]" in out and "\\x1b[31mred" in out  # the first 50 characters, escaped
    code, _, err = run_cli(["show", "gone[/b]\x1b[2J"], capsys, monkeypatch)
    assert code == 2 and "\x1b" not in err
    assert err.count("\n") == 1 and err.startswith("error: ") and "gone[/b]\\x1b[2J" in err


def test_help_shows_the_ray_extra_literally(capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "400")
    code, out, _ = run_cli(["run", "--help"], capsys, monkeypatch)
    assert code == 0 and "pip install 'domainbench[ray]'" in out


@pytest.mark.parametrize("reason", ["[/b] broke it", "\x1b]0;title\x07"])
def test_plan_table_shows_odd_reasons_literally(reason: str, home: Path, capsys, monkeypatch) -> None:
    from domainbench.app import cli as cli_mod
    from domainbench import planner

    real = planner.plan

    def odd_plan(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        cfg = real(*args, **kwargs)
        return cfg.model_copy(update={"corruptions": [c.model_copy(update={"reason": reason}) for c in cfg.corruptions]})

    monkeypatch.setattr(planner, "plan", odd_plan)
    monkeypatch.setenv("COLUMNS", "300")
    code, _, err = run_cli(["plan", "blurry phone photos", "--provider", "offline", "--samples", "1"], capsys,
                           monkeypatch, quiet=False)
    assert code == 0, err
    assert printable(reason) in err and "\x1b" not in err
    assert cli_mod  # imported for the monkeypatch target's module to be loaded


def test_one_unreadable_run_record_never_breaks_ls(home: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    from domainbench.store import open_store

    domain = DomainConfig(domain="d", corruptions=[CorruptionChoice(name="brightness", severities=[2])])
    cfg = save(domain, tmp_path / "domain.toml")
    code, _, err = run_cli(["run", str(cfg), "--models", "fake:a", "--limit", "4", "--no-stability", "--no-threat",
                            "--workers", "0", "--run-id", "good"], capsys, monkeypatch)
    assert code == 0, err
    store = open_store()
    raw = store.get_run("good").model_dump(mode="json") | {"run_id": "odd[/b]\x1b", "status": "exploded"}
    store._upsert_many("runs", [raw])  # bypasses validation, as a damaged or hand-edited record would
    monkeypatch.setenv("COLUMNS", "300")
    code, out, err = run_cli(["ls"], capsys, monkeypatch)
    assert code == 0, err
    assert "good" in out and "odd" not in out
    assert err.startswith("warning: run record odd[/b]\\x1b cannot be read (status: ") and err.count("\n") == 1

"""A store with one damaged page: every command is one `error:` line, exit 2 (issue 36, item 16)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from domainbench.records.config import CorruptionChoice, DomainConfig, save
from tests.cli_runner import run_cli


def test_a_damaged_page_is_one_error_line_for_every_command(home: Path, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    plan = save(DomainConfig(domain="d", corruptions=[CorruptionChoice(name="brightness", severities=[1])]),
                tmp_path / "plan.toml")
    code, _, err = run_cli(["run", str(plan), "--models", "embedded:fmnist-plain", "--limit", "8", "--workers", "0",
                            "--no-threat", "--no-stability", "--run-id", "r1"], capsys, monkeypatch)
    assert code == 0, err
    db = home / "domainbench.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page = conn.execute("PRAGMA page_size").fetchone()[0]
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
    assert pages > 3
    raw = bytearray(db.read_bytes())
    for p in range(1, pages):  # every page but the header's: b-tree pages with garbage
        raw[p * page: p * page + 64] = b"\xa5" * 64
    db.write_bytes(bytes(raw))
    for args in (["ls"], ["show", "r1"], ["export", "r1", "-o", str(tmp_path / "r.csv")], ["compare", "r1"],
                 ["rm", "r1", "--force"], ["run", str(plan), "--models", "embedded:fmnist-plain", "--limit", "8"]):
        code, out, err = run_cli(args, capsys, monkeypatch)
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), (args, code, err)
        assert "damaged" in lines[0] and "Traceback" not in err, (args, err)
    assert not (tmp_path / "r.csv").exists()

"""A full disk during a run: one `error:` line (exit 2), the store consistent, `--resume` completes;
crash reports are never left empty."""

from __future__ import annotations

import errno
import os
import sqlite3
import sys
from pathlib import Path

import pytest

from domainbench.records.config import CorruptionChoice, DomainConfig, save
from domainbench.runtime.disk_full import disk_full_cause
from domainbench.store import open_store
from domainbench.store.sqlite_store import SQLiteStore
from tests.cli_runner import run_cli

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))
import fake_models  # noqa: E402,F401  (registers fake:)

DOMAIN = DomainConfig(domain="d", corruptions=[CorruptionChoice(name="brightness", severities=[1, 3]),
                                               CorruptionChoice(name="contrast", severities=[2])])


def run_until_full(cfg: Path, tmp_path: Path, home: Path, run_id: str, capsys, monkeypatch) -> str:  # noqa: ANN001
    """Run ``cfg`` into a disk that fills; the one error line it ends with (exit 2, no traceback, no crash file)."""
    args = ["run", str(cfg), "--models", "fake:a", "--limit", "16", "--no-stability", "--no-threat", "--workers", "0",
            "--run-config", str(tmp_path / "run.toml"), "--run-id", run_id]
    code, out, err = run_cli(args, capsys, monkeypatch)
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1, err
    assert lines[0].startswith("error: the disk is full") and "--resume" in lines[0] and "Traceback" not in err
    assert not (home / "crash-reports").exists() or not list((home / "crash-reports").iterdir())
    return lines[0]


def test_disk_full_is_found_in_causes_and_contexts() -> None:
    full = sqlite3.OperationalError("database or disk is full")
    try:
        try:
            raise full
        except sqlite3.Error:
            raise RuntimeError("while marking the run failed") from None  # context kept, cause suppressed
    except RuntimeError as e:
        assert disk_full_cause(e) is full
    assert disk_full_cause(OSError(errno.ENOSPC, "No space left on device")) is not None
    assert disk_full_cause(OSError(errno.EACCES, "Permission denied")) is None


def test_disk_full_mid_run_then_resume_completes(home: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    cfg = save(DOMAIN, tmp_path / "domain.toml")
    (tmp_path / "run.toml").write_text("shard_size = 4\n")
    real = SQLiteStore._upsert_many
    state = {"units": 0, "full": False}

    def filling(self, collection, docs, fence=None):  # noqa: ANN001, ANN202
        if collection == "units":
            state["units"] += len(docs)
            if state["units"] > 6:
                state["full"] = True
        if state["full"]:
            raise sqlite3.OperationalError("database or disk is full")
        return real(self, collection, docs, fence)

    monkeypatch.setattr(SQLiteStore, "_upsert_many", filling)
    run_until_full(cfg, tmp_path, home, "full", capsys, monkeypatch)
    store = open_store()
    stored = {(u.corruption, u.severity, u.shard) for u in store.find("units")}
    assert 0 < len(stored) <= 6  # whole units only: the failed write left nothing half-written
    monkeypatch.setattr(SQLiteStore, "_upsert_many", real)  # space is back
    code, out, err = run_cli(["run", "--resume", "full"], capsys, monkeypatch)
    assert code == 0, err
    units = store.find("units")
    keys = [(u.corruption, u.severity, u.shard) for u in units]
    assert len(keys) == len(set(keys)) == 4 * 4  # 4 shards x (clean + 3 cells), none twice
    assert stored <= set(keys) and store.get_run("full").status == "done"


def test_crash_report_is_whole_or_absent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from domainbench.runtime import crash_report
    from domainbench.runtime.settings import Settings

    monkeypatch.setenv("DOMAINBENCH_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(crash_report.tempfile, "gettempdir", lambda: str(tmp_path / "tmp"))
    settings = Settings.from_env()
    real_fsync = os.fsync

    def no_space(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(crash_report.os, "fsync", no_space)
    assert crash_report.write_crash_report(RuntimeError("boom"), settings) is None
    left = [p for d in (tmp_path / "home", tmp_path / "tmp") if d.exists() for p in d.rglob("*") if p.is_file()]
    assert left == []  # no empty (or partial) report file
    monkeypatch.setattr(crash_report.os, "fsync", real_fsync)
    path = crash_report.write_crash_report(RuntimeError("boom"), settings)
    assert path is not None and "RuntimeError: boom" in path.read_text()


def test_a_size_limited_store_file_fills_mid_run_then_resume_completes(home: Path, tmp_path: Path, capsys,
                                                                       monkeypatch) -> None:  # noqa: ANN001
    """A real SQLITE_FULL, no injected exception: SQLite's ``max_page_count`` caps the store file, and
    SQLite answers a write past it exactly as it answers a full disk."""
    cfg = save(DOMAIN, tmp_path / "domain.toml")
    (tmp_path / "run.toml").write_text("shard_size = 4\n")
    real_conn, real_upsert = SQLiteStore._conn, SQLiteStore._upsert_many
    cap: dict[str, int | None] = {"pages": None}

    def capped_conn(self):  # noqa: ANN001, ANN202
        conn = real_conn(self)
        if cap["pages"] is not None:  # per connection: every connection of the run is capped alike
            conn.execute(f"PRAGMA max_page_count = {cap['pages']}")
        return conn

    def cap_after_first_unit(self, collection, docs, fence=None):  # noqa: ANN001, ANN202
        real_upsert(self, collection, docs, fence)
        if collection == "units" and cap["pages"] is None:
            # the file may grow by two pages more: a few units fit, then the "disk" is full
            cap["pages"] = real_conn(self).execute("PRAGMA page_count").fetchone()[0] + 2

    monkeypatch.setattr(SQLiteStore, "_conn", capped_conn)
    monkeypatch.setattr(SQLiteStore, "_upsert_many", cap_after_first_unit)
    line = run_until_full(cfg, tmp_path, home, "capped", capsys, monkeypatch)
    assert "database or disk is full" in line

    store = open_store()
    assert isinstance(store, SQLiteStore)
    conn = sqlite3.connect(store.path)
    assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    conn.close()
    stored = {(u.corruption, u.severity, u.shard): u.computed_at for u in store.find("units")}  # every one reads whole
    assert 0 < len(stored) < 16, len(stored)
    assert store.get_run("capped") is not None

    cap["pages"] = 1 << 30  # space is back
    code, out, err = run_cli(["run", "--resume", "capped"], capsys, monkeypatch)
    assert code == 0, err
    units = store.find("units")
    keys = [(u.corruption, u.severity, u.shard) for u in units]
    assert len(keys) == len(set(keys)) == 4 * 4  # 4 shards x (clean + 3 cells), none twice
    assert all(u.computed_at == stored[k] for k, u in zip(keys, units) if k in stored)  # kept, not recomputed
    assert store.get_run("capped").status == "done"

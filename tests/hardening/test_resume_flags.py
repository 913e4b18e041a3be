"""`run --resume RUN` evaluates the stored run: a flag it would ignore is refused with one line (issue 36, item 20)."""

from __future__ import annotations

from pathlib import Path

import pytest

from domainbench.records.config import CorruptionChoice, DomainConfig, save
from domainbench.store import open_store
from tests.cli_runner import run_cli


@pytest.fixture
def stored_run(home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Path:
    plan = save(DomainConfig(domain="d", corruptions=[CorruptionChoice(name="brightness", severities=[1])]),
                tmp_path / "plan.toml")
    code, _, err = run_cli(["run", str(plan), "--models", "embedded:fmnist-plain", "--limit", "8", "--workers", "0",
                            "--no-threat", "--no-stability", "--run-id", "r1"], capsys, monkeypatch)
    assert code == 0, err
    return plan


IGNORED = [
    (["--dataset", "elsewhere"], "--dataset"),
    (["PLAN"], "a domain config"),
    (["--seed", "3", "--limit", "4"], "--limit, --seed"),
    (["--models", "embedded:fmnist-augmented"], "--models"),
    (["--no-threat"], "--threat"),
]


def test_a_flag_resume_would_ignore_is_refused(stored_run: Path, capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    store = open_store()
    before = store.get_run("r1").model_dump()
    for extra, named in IGNORED:
        args = ["run", "--resume", "r1", *[str(stored_run) if a == "PLAN" else a for a in extra]]
        code, _, err = run_cli(args, capsys, monkeypatch)
        assert code == 2 and err.startswith("error: --resume r1") and err.count("\n") == 1, err
        assert named in err and "leave out" in err
    assert store.get_run("r1").model_dump() == before  # nothing touched


def test_transport_flags_are_accepted_and_checked_on_resume(stored_run: Path, capsys: pytest.CaptureFixture[str],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    code, _, err = run_cli(["run", "--resume", "r1", "--retry-budget", "nan"], capsys, monkeypatch)
    assert code == 2 and err.startswith("error: --retry-budget") and err.count("\n") == 1, err
    code, _, err = run_cli(["run", "--resume", "r1", "--concurrency", "4", "--request-timeout", "5"], capsys, monkeypatch)
    assert code == 0, err

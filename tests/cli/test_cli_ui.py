"""`domainbench ui`: the address it binds and the worker it starts beside the UI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from domainbench.app.cli import main


class FakeWorker:
    def __init__(self, args: list[str], **kw: Any) -> None:
        self.args, self.pid, self.terminated = args, 4242, False
        STARTED.append(self)

    def poll(self) -> int | None:
        return 0 if self.terminated else None

    def terminate(self) -> None:
        self.terminated = True

    def wait(self, timeout: float | None = None) -> int:
        return 0


STARTED: list[FakeWorker] = []


ENVS: list[dict[str, str]] = []


def ui(args: list[str], monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Run `domainbench ui ARGS` with the Streamlit server replaced; the server's command line."""
    calls: list[list[str]] = []
    STARTED.clear()
    ENVS.clear()
    monkeypatch.setattr(subprocess, "call", lambda cmd, **kw: calls.append(cmd) or ENVS.append(kw.get("env") or {}) or 0)
    monkeypatch.setattr(subprocess, "Popen", FakeWorker)
    monkeypatch.setattr(sys, "argv", ["domainbench", "--quiet", "ui", *args])
    with pytest.raises(SystemExit) as e:
        main()
    assert e.value.code in (0, None)
    return calls[0]


def test_ui_binds_localhost_and_starts_a_worker(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cmd = ui(["--port", "8600"], monkeypatch)
    assert cmd[cmd.index("--server.address") + 1] == "127.0.0.1"
    assert cmd[cmd.index("--server.port") + 1] == "8600"
    assert len(STARTED) == 1 and STARTED[0].args[-1] == "worker" and STARTED[0].terminated
    # a product, not a dev server: no Deploy button / developer menu, no usage statistics sent
    assert cmd[cmd.index("--client.toolbarMode") + 1] == "viewer"
    assert cmd[cmd.index("--browser.gatherUsageStats") + 1] == "false"
    assert ENVS[0]["DOMAINBENCH_UI_WORKER_PID"] == "4242"  # the pages can tell whether it is alive


def test_ui_host_and_no_worker(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cmd = ui(["--host", "0.0.0.0", "--no-worker"], monkeypatch)
    assert cmd[cmd.index("--server.address") + 1] == "0.0.0.0"
    assert STARTED == []


def test_ui_with_mongodb_leaves_workers_to_other_machines(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOMAINBENCH_MONGO_URI", "mongodb://u:pw@db.example:27017/x")
    ui([], monkeypatch)
    assert STARTED == []

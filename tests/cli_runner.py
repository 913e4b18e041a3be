"""Run ``domainbench`` in-process through its real entry point, as the CLI tests do."""

from __future__ import annotations

import sys

import pytest

from domainbench.app.cli import main


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
            quiet: bool = True) -> tuple[int, str, str]:
    """``domainbench [--quiet] ARGS``: (exit status, stdout, stderr)."""
    monkeypatch.setattr(sys, "argv", ["domainbench", *(["--quiet"] if quiet else []), *args])
    try:
        main()
        code = 0
    except SystemExit as e:
        code = int(e.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err

"""`make test` on a machine without Chromium: the browser test skips with one line, before the UI starts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e import test_browser

ROOT = Path(__file__).resolve().parents[2]


def test_a_missing_browser_skips_the_browser_test_before_any_server_starts(tmp_path: Path) -> None:
    env = {**os.environ, "DOMAINBENCH_CHROMIUM": str(tmp_path / "no-chromium"), "DOMAINBENCH_HOME": str(tmp_path / "home")}
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
                          str(ROOT / "tests" / "e2e" / "test_browser.py"), "--basetemp", str(tmp_path / "pt")],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "1 skipped" in out.stdout, out.stdout
    skip_lines = [line for line in out.stdout.splitlines() if line.startswith("SKIPPED")]
    assert len(skip_lines) == 1 and "no-chromium does not exist" in skip_lines[0], out.stdout
    assert "Traceback" not in out.stdout + out.stderr
    # the UI was never started: its fixture would have made a home and a ui.log
    assert not (tmp_path / "home").exists()
    assert not list((tmp_path / "pt").rglob("ui.log"))


def test_find_chromium_without_any_browser(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DOMAINBENCH_CHROMIUM", raising=False)
    monkeypatch.setattr(test_browser, "DEBIAN_CHROMIUM", tmp_path / "usr-bin-chromium")
    monkeypatch.setenv("PLAYWRIGHT_BROWSERS_PATH", str(tmp_path / "ms-playwright"))
    path, reason = test_browser.find_chromium()
    assert path is None and "Chromium not found" in reason and "\n" not in reason


def test_find_chromium_takes_playwrights_browser_when_debians_is_absent(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DOMAINBENCH_CHROMIUM", raising=False)
    monkeypatch.setattr(test_browser, "DEBIAN_CHROMIUM", tmp_path / "usr-bin-chromium")
    chrome = tmp_path / "ms-playwright" / "chromium-1140" / "chrome-linux" / "chrome"
    chrome.parent.mkdir(parents=True)
    chrome.write_bytes(b"")
    monkeypatch.setenv("PLAYWRIGHT_BROWSERS_PATH", str(tmp_path / "ms-playwright"))
    assert test_browser.find_chromium() == (str(chrome), "")
    (tmp_path / "usr-bin-chromium").write_bytes(b"")  # Debian's comes first where both exist
    assert test_browser.find_chromium() == (str(tmp_path / "usr-bin-chromium"), "")

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import fake_models  # noqa: E402,F401  (registers the fake: backend)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DOMAINBENCH_HOME", str(tmp_path / "home"))
    return tmp_path / "home"

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.planner.planner_fakes import FakeLLM

# Set before any test imports albumentations / transformers: no phoning home, no hub access.
os.environ.setdefault("NO_ALBUMENTATIONS_UPDATE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.pop("DOMAINBENCH_MONGO_URI", None)
os.environ.pop("DOMAINBENCH_LLM_BASE_URL", None)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh $DOMAINBENCH_HOME: every test gets its own embedded store."""
    monkeypatch.setenv("DOMAINBENCH_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("DOMAINBENCH_MONGO_URI", raising=False)
    return tmp_path / "home"


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    """A local OpenAI-compatible HTTP server with scripted replies (the planner's LLM path)."""
    srv = FakeLLM()
    try:
        yield srv
    finally:
        srv.close()

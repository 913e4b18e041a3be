"""Fixtures for the planner tests: a scripted OpenAI-compatible server on 127.0.0.1 and the catalogue."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# The project runs pytest with --import-mode=importlib (no sys.path insertion); the test
# modules here import the shared fake server module by name.
sys.path.insert(0, str(Path(__file__).resolve().parent))

from domainbench.planner.catalogue import Catalogue, load_catalogue

LLM_ENV = (
    "DOMAINBENCH_LLM_BASE_URL",
    "DOMAINBENCH_LLM_API_KEY",
    "OPENAI_API_KEY",
    "DOMAINBENCH_LLM_MODEL",
    "DOMAINBENCH_LLM_TIMEOUT",
    "DOMAINBENCH_LLM_MAX_RETRIES",
    "DOMAINBENCH_LLM_CONCURRENCY",
    "DOMAINBENCH_LLM_JSON_MODE",
    "DOMAINBENCH_LLM_TEMPERATURE",
    "OPENAI_BASE_URL",
)


@pytest.fixture(scope="session", autouse=True)
def _clean_llm_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    # Session-scoped so module-scoped fixtures (the offline plans) also see it.
    with pytest.MonkeyPatch.context() as mp:
        for var in LLM_ENV:
            mp.delenv(var, raising=False)
        # Embedding cache in a per-session temp dir, never the user's home.
        mp.setenv("DOMAINBENCH_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))
        yield


@pytest.fixture(scope="session")
def catalogue() -> Catalogue:
    return load_catalogue()


@pytest.fixture
def repo_prompts() -> Path:
    return Path(__file__).resolve().parents[2] / "prompts"

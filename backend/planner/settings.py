"""The planner's LLM endpoint settings; read with every other setting by ``domainbench.runtime.settings``.

Environment variables (or the ``[llm]`` table of the settings file, see ``domainbench.runtime.settings``):
    DOMAINBENCH_LLM_BASE_URL   OpenAI-compatible endpoint, e.g. http://localhost:11434/v1 (Ollama)
    DOMAINBENCH_LLM_API_KEY    key for that endpoint (falls back to OPENAI_API_KEY)
    DOMAINBENCH_LLM_MODEL      model name (default gpt-4o)
    DOMAINBENCH_LLM_TIMEOUT    seconds per request (default 60)
    DOMAINBENCH_LLM_MAX_RETRIES  client retries on timeouts, 429 and 5xx (default 3)
    DOMAINBENCH_LLM_CONCURRENCY  samples requested in parallel (default 4)
    DOMAINBENCH_LLM_JSON_MODE  1/0: ask for response_format=json_object (default 1)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from domainbench.runtime.settings import DEFAULT_LLM_MODEL as DEFAULT_MODEL
from domainbench.runtime.settings import PLACEHOLDER_KEY, LLMSettings, Settings


def settings_from_env(environ: Mapping[str, str] | None = None, **overrides: Any) -> LLMSettings:
    """The LLM settings of ``environ`` (default: the process's, through ``Settings``), then keyword overrides."""
    return Settings.from_env(environ).llm_settings(**overrides)


__all__ = ["DEFAULT_MODEL", "PLACEHOLDER_KEY", "LLMSettings", "settings_from_env"]

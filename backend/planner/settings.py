"""LLM endpoint settings from arguments or the environment; the API key is a SecretStr throughout.

Environment variables:
    DOMAINBENCH_LLM_BASE_URL   OpenAI-compatible endpoint, e.g. http://localhost:11434/v1 (Ollama)
    DOMAINBENCH_LLM_API_KEY    key for that endpoint (falls back to OPENAI_API_KEY)
    DOMAINBENCH_LLM_MODEL      model name (default gpt-4o)
    DOMAINBENCH_LLM_TIMEOUT    seconds per request (default 60)
    DOMAINBENCH_LLM_MAX_RETRIES  client retries on timeouts, 429 and 5xx (default 3)
    DOMAINBENCH_LLM_CONCURRENCY  samples requested in parallel (default 4)
    DOMAINBENCH_LLM_JSON_MODE  1/0: ask for response_format=json_object (default 1)
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError

from domainbench.errors import UserInputError, first_validation_error

DEFAULT_MODEL = "gpt-4o"
# Local servers (Ollama, vLLM) accept any key; the openai client insists on a non-empty one.
PLACEHOLDER_KEY = "not-needed"


class LLMSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: str | None = None
    api_key: SecretStr | None = None
    model: str = DEFAULT_MODEL
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    timeout: float = Field(default=60.0, gt=0.0)
    max_retries: int = Field(default=3, ge=0, le=10)
    concurrency: int = Field(default=4, ge=1, le=64)
    json_mode: bool = True

    @property
    def configured(self) -> bool:
        """An endpoint is configured when a base URL or an API key is known."""
        return bool(self.base_url) or self.api_key is not None

    @property
    def safe_base_url(self) -> str:
        """Base URL for messages: user:password@ removed, query dropped."""
        if not self.base_url:
            return "https://api.openai.com/v1"
        parts = urlsplit(self.base_url)
        host = parts.hostname or ""
        if parts.port:
            host = f"{host}:{parts.port}"
        return urlunsplit((parts.scheme, host, parts.path, "", ""))

    def key_value(self) -> str:
        return self.api_key.get_secret_value() if self.api_key is not None else PLACEHOLDER_KEY


_ENV = {
    "base_url": "DOMAINBENCH_LLM_BASE_URL",
    "model": "DOMAINBENCH_LLM_MODEL",
    "timeout": "DOMAINBENCH_LLM_TIMEOUT",
    "max_retries": "DOMAINBENCH_LLM_MAX_RETRIES",
    "concurrency": "DOMAINBENCH_LLM_CONCURRENCY",
    "json_mode": "DOMAINBENCH_LLM_JSON_MODE",
    "temperature": "DOMAINBENCH_LLM_TEMPERATURE",
}


def settings_from_env(environ: Mapping[str, str] | None = None, **overrides: Any) -> LLMSettings:
    """Environment first (``environ``, default ``os.environ``), then explicit keyword overrides (None: not given)."""
    env = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    for key, var in _ENV.items():
        v = env.get(var)
        if v not in (None, ""):
            values[key] = v
    key = env.get("DOMAINBENCH_LLM_API_KEY") or env.get("OPENAI_API_KEY")
    if key:
        values["api_key"] = key
    unknown = sorted(set(overrides) - set(LLMSettings.model_fields))
    if unknown:
        raise UserInputError(
            f"unknown planner setting(s) {', '.join(unknown)}; valid ones are {', '.join(LLMSettings.model_fields)}"
        )
    values.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return LLMSettings.model_validate(values)
    except ValidationError as e:
        field, msg = first_validation_error(e)  # never echoes the input: it could be the key
        raise UserInputError(f"planner setting {field!r} is invalid: {msg}") from None

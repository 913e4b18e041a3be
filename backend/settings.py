"""What the environment configures, read once where a program starts (the CLI, the UI).

Code below the entry points takes these values as arguments and never reads ``os.environ``
itself, so a caller states its configuration instead of patching the environment. The
planner's LLM variables (DOMAINBENCH_LLM_*) are snapshotted here and validated by
``backend/planner/settings.py`` when a plan is made.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from pydantic import BaseModel, ConfigDict, Field, SecretStr

ENV_HOME = "DOMAINBENCH_HOME"
ENV_MONGO_URI = "DOMAINBENCH_MONGO_URI"
# read only so that their values can be scrubbed from error reports; the planner uses them
ENV_SECRETS = ("DOMAINBENCH_LLM_API_KEY", "OPENAI_API_KEY")
DEFAULT_HOME = ".domainbench"
LLM_ENV_PREFIX = "DOMAINBENCH_LLM_"

_URI_PASSWORD = re.compile(r"(//[^:/@]+):([^@]*)@")


def redact_uri(uri: str) -> str:
    """``mongodb://user:secret@host`` -> ``mongodb://user:***@host``: URIs may carry passwords."""
    return _URI_PASSWORD.sub(r"\1:***@", uri)


class Settings(BaseModel):
    """The store location and the secrets to keep out of messages.

    ``repr`` and ``str`` show the Mongo URI with its password replaced by ``***``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    # the embedded SQLite store lives in this directory (relative paths: to the working dir)
    home: Path = Path(DEFAULT_HOME)
    # a MongoDB (or sqlite:///PATH) store instead of the embedded one
    mongo_uri: SecretStr | None = None
    secrets: tuple[SecretStr, ...] = Field(default=(), repr=False)
    # the planner's LLM variables as they were at start-up; validated only when planning
    llm_env: tuple[tuple[str, SecretStr], ...] = Field(default=(), repr=False)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        uri = env.get(ENV_MONGO_URI) or None  # set but empty means "not set", as it always has
        return cls(
            home=Path(env.get(ENV_HOME, DEFAULT_HOME)).expanduser(),
            mongo_uri=SecretStr(uri) if uri else None,
            secrets=tuple(SecretStr(env[v]) for v in ENV_SECRETS if env.get(v)),
            llm_env=tuple((k, SecretStr(v)) for k, v in sorted(env.items()) if k.startswith(LLM_ENV_PREFIX) or k in ENV_SECRETS),
        )

    def llm_environ(self) -> dict[str, str]:
        """The planner's variables as read at start-up, for ``domainbench.planner.settings.settings_from_env``."""
        return {k: v.get_secret_value() for k, v in self.llm_env}

    @property
    def store_uri(self) -> str | None:
        """The plain URI, to hand to the store; never print it (``redacted_uri`` is for that)."""
        return self.mongo_uri.get_secret_value() if self.mongo_uri else None

    @property
    def redacted_uri(self) -> str | None:
        return redact_uri(self.store_uri) if self.store_uri else None

    def redact(self, text: str) -> str:
        """``text`` with every secret this configuration knows replaced by ``***``."""
        values = [s.get_secret_value() for s in self.secrets]
        uri = self.store_uri
        if uri:
            text = text.replace(uri, redact_uri(uri))
            m = _URI_PASSWORD.search(uri)
            if m and m.group(2):
                values += [m.group(2), unquote(m.group(2))]
        # longest first: a secret that contains another is replaced whole
        for v in sorted({v for v in values if v}, key=len, reverse=True):
            text = text.replace(v, "***")
        return text

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        yield "home", self.home
        yield "mongo_uri", self.redacted_uri

"""What the environment and the settings file configure: the one reader of ``DOMAINBENCH_*`` variables.

``Settings`` is read once where a program starts (the CLI, the UI, a
worker) and handed down; code below the entry points never reads ``os.environ`` itself.
Sources, strongest first: keyword arguments, the environment, the TOML file named by
``$DOMAINBENCH_SETTINGS``, the defaults. The file holds the same names as the variables,
lower case without the prefix, and the planner's LLM settings in an ``[llm]`` table::

    mongo_uri = "mongodb://db:27017/domainbench"
    executor = "ray"
    [llm]
    base_url = "http://localhost:11434/v1"

What a run computes is configured beside this, per run: ``domainbench.records.config.RunConfig``.
Two groups are kept as read and validated only when used, so that a bad value breaks only the
command that needs it: the LLM settings (``llm_settings``, when planning) and the executor
(``executor_options``, when running).

Secrets (the Mongo URI's password, API keys) are ``SecretStr``: no ``repr``, ``str`` or
message shows them, and ``redact`` scrubs them from any text.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Literal
from urllib.parse import unquote, urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator

from domainbench.errors import UserInputError, first_validation_error

ENV_PREFIX = "DOMAINBENCH_"
ENV_HOME = "DOMAINBENCH_HOME"
ENV_MONGO_URI = "DOMAINBENCH_MONGO_URI"
ENV_SETTINGS_FILE = "DOMAINBENCH_SETTINGS"
ENV_EXECUTOR = "DOMAINBENCH_EXECUTOR"
ENV_RAY_ADDRESS = "DOMAINBENCH_RAY_ADDRESS"
LLM_ENV_PREFIX = "DOMAINBENCH_LLM_"
#: the planner's API key; OpenAI's own variable is read when domainbench's is not set
ENV_LLM_API_KEY = "DOMAINBENCH_LLM_API_KEY"
ENV_OPENAI_API_KEY = "OPENAI_API_KEY"
ENV_SECRETS = (ENV_LLM_API_KEY, ENV_OPENAI_API_KEY)
DEFAULT_HOME = ".domainbench"
#: settings no ``DOMAINBENCH_<FIELD>`` variable sets: the planner's come from ``DOMAINBENCH_LLM_*``, the secrets
#: from the key variables
_NOT_FROM_VARIABLES = ("llm", "secrets")

_URI_PASSWORD = re.compile(r"(//[^:/@]+):([^@]*)@")
#: the environment ``Settings.from_env`` reads (a mapping in tests, ``os.environ`` otherwise)
_ENVIRON: ContextVar[Mapping[str, str] | None] = ContextVar("domainbench_environ", default=None)


def redact_uri(uri: str) -> str:
    """``mongodb://user:secret@host`` -> ``mongodb://user:***@host``: URIs may carry passwords."""
    return _URI_PASSWORD.sub(r"\1:***@", uri)


_KEYLIKE = re.compile(r"\b(sk|pk|rk)-[A-Za-z0-9_\-*]{6,}")


def redact_key(text: str, secret: str | None) -> str:
    """Remove the key, and anything that looks like a (masked) key, from ``text`` (an endpoint's error)."""
    if secret and len(secret) >= 4:
        text = text.replace(secret, "<redacted>")
        # Servers often echo a key partly masked ("sk-abc***wxyz"): drop its visible ends too.
        for part in (secret[:8], secret[-6:]):
            if len(part) >= 6:
                text = text.replace(part, "<redacted>")
    return _KEYLIKE.sub("<redacted>", text)


def _environ() -> Mapping[str, str]:
    env = _ENVIRON.get()
    return os.environ if env is None else env


def retry_backoff_base(default: float) -> float:
    """``DOMAINBENCH_RETRY_BACKOFF``: the first back-off of a throttled endpoint request, in seconds (the tests and
    the fault benchmark shorten it); ``default`` when unset, not a number, or outside [0, 3600)."""
    raw = _environ().get("DOMAINBENCH_RETRY_BACKOFF")
    try:
        value = float(raw) if raw else default
    except ValueError:
        return default
    return value if 0 <= value < 3600 else default


# --------------------------------------------------------------------------- the planner's LLM endpoint
DEFAULT_LLM_MODEL = "gpt-4o"
# Local servers (Ollama, vLLM) accept any key; the openai client insists on a non-empty one.
PLACEHOLDER_KEY = "not-needed"


class LLMSettings(BaseModel):
    """The planner's OpenAI-compatible endpoint (``DOMAINBENCH_LLM_*``); the API key is a SecretStr throughout."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: str | None = None
    api_key: SecretStr | None = None
    model: str = DEFAULT_LLM_MODEL
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


def llm_settings_of(values: Mapping[str, Any], **overrides: Any) -> LLMSettings:
    """``values`` (LLMSettings' field names, as read), then explicit keyword overrides (None: not given)."""
    unknown = sorted(set(overrides) - set(LLMSettings.model_fields))
    if unknown:
        raise UserInputError(
            f"unknown planner setting(s) {', '.join(unknown)}; valid ones are {', '.join(LLMSettings.model_fields)}"
        )
    merged = {k: v for k, v in values.items() if v not in (None, "")}
    bad = sorted(set(merged) - set(LLMSettings.model_fields))
    if bad:
        raise UserInputError(f"unknown planner setting(s) {', '.join(LLM_ENV_PREFIX + b.upper() for b in bad)}; valid ones "
                             f"are {', '.join(LLM_ENV_PREFIX + f.upper() for f in LLMSettings.model_fields)}")
    merged.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return LLMSettings.model_validate(merged)
    except ValidationError as e:
        field, msg = first_validation_error(e)  # never echoes the input: it could be the key
        raise UserInputError(f"planner setting {field!r} is invalid: {msg}") from None


# --------------------------------------------------------------------------- where runs execute
ExecutorKind = Literal["local", "ray"]


class ExecutorOptions(BaseModel):
    """Where a run executes: in this process (``local``) or on a Ray cluster (``ray``), and its resources.

    Every field is a ``domainbench run`` option. The executor is how a run is computed, not what
    it computes, so it is not part of the stored ``RunConfig``: a run started on one executor
    resumes on the other, and both store the same units.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: ExecutorKind = "local"
    #: Ray only. None: a Ray instance this process already joined, else a new local one;
    #: "auto": the cluster this machine belongs to; "ray://HOST:10001": a remote cluster (Ray client)
    address: str | None = None
    #: model actors per model group (each shard goes to one actor of every group); None: the
    #: cluster's GPUs shared out over the groups, 1 without GPUs
    actors: int | None = Field(default=None, ge=1)
    #: models one actor holds (a group); None: all of the run's models on every actor. Lower it
    #: when the run's models do not fit on one GPU together: each shard is corrupted once and
    #: scored by one actor of each group
    models_per_actor: int | None = Field(default=None, ge=1)
    #: GPUs reserved per actor; None: 1 when the cluster has GPUs and the run's device is not cpu, else 0
    gpus_per_actor: float | None = Field(default=None, ge=0)
    cpus_per_actor: float = Field(default=1.0, ge=0)
    #: CPUs reserved per corruption task (one task corrupts one shard for one cell)
    cpus_per_task: float = Field(default=1.0, gt=0)
    #: shards queued per actor: enough to keep it busy while the next shard is corrupted
    shards_in_flight: int = Field(default=2, ge=1)
    #: Python modules every Ray worker imports first: plugins that register corruptions or models
    modules: list[str] = Field(default_factory=list)
    #: seconds to wait for a Ray cluster to answer before the address is reported unreachable
    connect_timeout_s: float = Field(default=30.0, gt=0)

    @field_validator("address")
    @classmethod
    def _address_shape(cls, v: str | None) -> str | None:
        if v is None or v == "auto" or v.startswith("ray://") or (":" in v and not v.startswith(("http", "/"))):
            return v
        raise ValueError(f"Ray address {v!r} is not understood: use auto, ray://HOST:10001 or HOST:6379")


def _environment_values() -> dict[str, Any]:
    """``DOMAINBENCH_<FIELD>`` of the environment being read, and the planner's ``DOMAINBENCH_LLM_*``.

    Read by hand rather than by pydantic-settings: importing it (and the asyncio it pulls in) cost a read
    command ~0.2 s of its start-up (issue 43), for what is a prefix, a lower-casing and a merge.
    Variables for names that are no setting are not read; empty ones count as unset.
    """
    env = _environ()
    # past the prefix the case does not matter (DOMAINBENCH_Home), as with pydantic-settings before
    variables = {k.removeprefix(ENV_PREFIX).lower(): v for k, v in env.items() if k.startswith(ENV_PREFIX) and v != ""}
    values: dict[str, Any] = {name: variables[name] for name in Settings.model_fields
                              if name in variables and name not in _NOT_FROM_VARIABLES}
    llm = {k.removeprefix(LLM_ENV_PREFIX).lower(): v for k, v in env.items() if k.startswith(LLM_ENV_PREFIX) and v}
    llm = {k: v for k, v in llm.items() if k in LLMSettings.model_fields}  # other variables were never read
    if "api_key" not in llm and env.get(ENV_OPENAI_API_KEY):
        llm["api_key"] = env[ENV_OPENAI_API_KEY]
    if llm:
        values["llm"] = llm
    secrets = [env[v] for v in ENV_SECRETS if env.get(v)]
    if secrets:
        values["secrets"] = secrets
    return values


def _file_values() -> dict[str, Any]:
    """The settings file's keys as written (``$DOMAINBENCH_SETTINGS``), or nothing when the variable is unset."""
    file = _environ().get(ENV_SETTINGS_FILE)
    if not file:
        return {}
    with _settings_file(file).open("rb") as f:
        return tomllib.load(f)


def _merged(*sources: Mapping[str, Any]) -> dict[str, Any]:
    """The sources' values, strongest first; a table (the planner's ``llm``) merges key by key across sources."""
    out: dict[str, Any] = {}
    for source in reversed(sources):
        for key, value in source.items():
            if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
                out[key] = _merged(value, out[key])
            else:
                out[key] = value
    return out


class Settings(BaseModel):
    """The store location, the executor, the planner's endpoint, and the secrets to keep out of messages.

    ``Settings(**values)`` reads like pydantic-settings did: the keyword arguments, over the environment
    (``DOMAINBENCH_*``), over the settings file, over the defaults.
    ``repr`` and ``str`` show the Mongo URI with its password replaced by ``***``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True)

    #: the embedded SQLite store lives in this directory (relative paths: to the working dir)
    home: Path = Path(DEFAULT_HOME)
    #: a MongoDB (or sqlite:///PATH) store instead of the embedded one
    mongo_uri: SecretStr | None = None
    #: where runs execute: local or ray (``executor_options`` checks it)
    executor: str = "local"
    #: the Ray cluster of the ray executor
    ray_address: str | None = None
    #: the planner's prompt templates instead of the installed ones
    prompts_dir: Path | None = None
    #: the offline planner's model cache
    cache_dir: Path | None = None
    #: process id of the worker `domainbench ui` started beside the UI (set by the CLI for the UI's process)
    ui_worker_pid: str | None = None
    #: the planner's LLM settings as read (LLMSettings' field names), validated when planning
    llm: dict[str, SecretStr] = Field(default_factory=dict, repr=False)
    #: API keys, known so that ``redact`` can scrub them
    secrets: tuple[SecretStr, ...] = Field(default=(), repr=False)

    def __init__(self, **values: Any) -> None:
        super().__init__(**_merged(values, _environment_values(), _file_values()))

    @field_validator("home")
    @classmethod
    def _expand_home(cls, v: Path) -> Path:
        return v.expanduser()

    @field_validator("llm", mode="before")
    @classmethod
    def _as_text(cls, v: Any) -> Any:
        # a settings file writes numbers and booleans as such; they are kept as text until validated
        if isinstance(v, Mapping):
            return {k: str(x).lower() if isinstance(x, bool) else str(x) for k, x in v.items()}
        return v

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """The settings of ``environ`` (default: this process's environment) and its settings file.

        A bad value is a ``UserInputError`` naming the variable or the file's key.
        """
        token = _ENVIRON.set(environ)
        try:
            return cls()
        except tomllib.TOMLDecodeError as e:
            raise UserInputError(f"{ENV_SETTINGS_FILE}={_environ().get(ENV_SETTINGS_FILE)}: not valid TOML ({e}); "
                                 "fix the file or unset the variable") from None
        except ValidationError as e:
            field, msg = first_validation_error(e)  # never echoes the value: it could be a secret
            raise UserInputError(f"setting {_where(field, environ)}: {msg}") from None
        finally:
            _ENVIRON.reset(token)

    # -- derived settings, validated when used --------------------------------------------
    def llm_settings(self, **overrides: Any) -> LLMSettings:
        """The planner's LLM endpoint: these settings, then explicit keyword overrides (None: not given)."""
        return llm_settings_of({k: v.get_secret_value() for k, v in self.llm.items()}, **overrides)

    def llm_environ(self) -> dict[str, str]:
        """The planner's settings under their variables' names (``DOMAINBENCH_LLM_BASE_URL``...)."""
        return {LLM_ENV_PREFIX + k.upper(): v.get_secret_value() for k, v in sorted(self.llm.items())}

    def executor_options(self) -> ExecutorOptions:
        """The executor a long-running worker uses ($DOMAINBENCH_EXECUTOR, $DOMAINBENCH_RAY_ADDRESS)."""
        if self.executor not in ("local", "ray"):
            raise UserInputError(f"{ENV_EXECUTOR}={self.executor!r} is not known; set it to local or ray")
        # the compose file may name the head for workers that run locally: the address is for ray only
        address = self.ray_address if self.executor == "ray" else None
        try:
            return ExecutorOptions(kind=self.executor, address=address)  # type: ignore[arg-type]
        except ValidationError as e:
            raise UserInputError(f"{ENV_RAY_ADDRESS}={address}: {first_validation_error(e)[1]}") from None

    # -- the store and secrets --------------------------------------------------------------
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
        if "api_key" in self.llm:
            values.append(self.llm["api_key"].get_secret_value())
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
        if self.executor != "local" or self.ray_address:
            yield "executor", self.executor
            yield "ray_address", self.ray_address


def _settings_file(file: str) -> Path:
    path = Path(file).expanduser()
    if not path.is_file():
        raise UserInputError(f"{ENV_SETTINGS_FILE}={file}: no such settings file; fix the path or unset the variable")
    return path


def _where(field: str, environ: Mapping[str, str] | None) -> str:
    """The variable that set ``field``, else the settings file's key (the stronger source is named)."""
    name = field.split(".")[0]
    var = LLM_ENV_PREFIX + field.split(".")[-1].upper() if name == "llm" else ENV_PREFIX + name.upper()
    env = os.environ if environ is None else environ
    if env.get(var) or not env.get(ENV_SETTINGS_FILE):
        return var
    return f"{name!r} in {ENV_SETTINGS_FILE}={env[ENV_SETTINGS_FILE]}"

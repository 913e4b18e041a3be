"""Model backends as plain data: what each prefix is, what it can do, which options it takes, and where
its loader lives.

A model name carries its backend as a prefix (``open_clip:ViT-B-32/openai``). A backend declares:

* its **capabilities** (:class:`Capabilities`): contrastive, generative or a plain classifier; remote (an
  endpoint) or local; whether its preprocessing is differentiable down to the pixels (the FMR gradient
  search); whether it gives image embeddings (stability); the devices it runs on; whether it accepts
  names beyond the ones it lists (a hub id, a path);
* its **options schema**: a pydantic model of the per-model options a run may give it
  (``--model-arg NAME:key=value`` or a ``[models.NAME]`` table of the run config), in the spirit of
  open_clip's ``create_model(name, **kwargs)`` and lm-eval's ``--model_args``;
* its **loader**: ``f(spec, device) -> model``, or a ``"module:attr"`` string naming one, imported on
  first use.

Every question the rest of the code asks about a model ("is it generative?", "has it embeddings?",
"may it vote in an FMR oracle?") is a query here (:func:`capabilities_of`), never a list of prefixes.

This module is plain data (no torch, no model library): the run config validates per-model options
against it and listing runs asks it for a model's kind. The registry is filled by the built-in
declarations below, by :func:`register_model` and by the entry-point group ``domainbench.models``
(the entry point's name is the prefix and it names a factory ``f(spec, device)``, a ``ModelBackend``,
a module with a ``BACKENDS`` dict {prefix: ModelBackend}, or a module that calls ``register_model`` on import).
"""

from __future__ import annotations

import difflib
import fnmatch
import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from domainbench.corruptions.named_registry import Registry
from domainbench.errors import UserInputError, first_validation_error

#: ``f(spec, device, **options) -> model`` (a ``domainbench.models.VisionLanguageModel``, a generative VLM or a
#: plain classifier; this floor names none of them)
Factory = Callable[..., Any]
ENTRY_POINT_GROUP = "domainbench.models"
ModelKind = Literal["contrastive", "generative", "classifier"]


class UnknownModelError(UserInputError):
    """A model name whose prefix no backend owns (or a model backend clash or a broken plug-in)."""


@dataclass(frozen=True)
class Capabilities:
    """What a backend's models can do; the engine, FMR, the launcher and the UI ask this, not the prefix."""

    #: contrastive: a dual encoder, zero-shot through its text tower; generative: it scores or names the
    #: classes itself; classifier: fixed logits over its own classes (it cannot classify zero-shot)
    kind: ModelKind = "contrastive"
    #: behind an endpoint: nothing runs locally but the request
    remote: bool = False
    #: its preprocessing exists as torch operations on float pixels (the FMR gradient search)
    differentiable: bool = False
    #: it gives image embeddings (stability is measured on them; n/a without)
    image_embeddings: bool = True
    #: the device types it can run on
    devices: tuple[str, ...] = ("cpu", "cuda")
    #: it accepts any name its library knows (a hub id, a pretrained tag, a path), not only the listed ones:
    #: only the prefix can be checked before loading
    open_ended: bool = False

    @property
    def zero_shot(self) -> bool:
        """It classifies over any class names given (it may vote in an FMR oracle)."""
        return self.kind != "classifier"


class ModelOptions(BaseModel):
    """Per-model options of a backend; a backend without any takes this (no key is accepted)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


VLMModeName = Literal["loglik", "generate", "choice"]


class LocalVLMOptions(ModelOptions):
    """hf-vlm: how a local generative model is asked (docs/generative-vlms.md)."""

    #: the questions asked about each image; several average the class scores (None: the default question)
    questions: list[str] | None = None
    mode: VLMModeName = "loglik"
    score: Literal["sum", "mean"] = "sum"
    dtype: Literal["auto", "float32", "float16", "bfloat16"] = "auto"


class EndpointOptions(ModelOptions):
    """openai-vlm: how an endpoint is asked, and its transport's limits."""

    questions: list[str] | None = None
    mode: VLMModeName = "loglik"
    concurrency: int = Field(default=8, ge=1)
    max_requests: int | None = Field(default=None, ge=1)
    api_key_env: str = Field(default="OPENAI_API_KEY", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    # seconds one request may take in total (a server trickling bytes included); at most an hour
    request_timeout: float = Field(default=60.0, gt=0, le=3600, allow_inf_nan=False)
    # seconds one request may keep retrying 429 / 5xx / timeouts before the run stops resumably (a week at most)
    retry_budget: float = Field(default=1800.0, gt=0, le=604800, allow_inf_nan=False)


def _resolve(ref: Any) -> Any:
    """A ``"module:attr"`` reference imported now; anything else as it is."""
    if not isinstance(ref, str):
        return ref
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)


@dataclass(frozen=True)
class ModelBackend:
    """One prefix: its loader, the names ``list_models`` shows (it may accept more), what it can do,
    the options it takes and a check of a name before anything loads."""

    #: ``f(spec, device) -> model`` or ``"module:attr"`` naming it (imported on first use: keeps this data torch-free)
    create: Factory | str
    #: the names ``domainbench models`` lists, or ``"module:attr"`` naming them
    known: tuple[str, ...] | str = ()
    capabilities: Capabilities = field(default_factory=Capabilities)
    options: type[ModelOptions] = ModelOptions
    #: raises ``UserInputError`` for a name that cannot load (a missing path), before anything is stored
    check_name: Callable[[str], None] | None = None

    @property
    def factory(self) -> Factory:
        return _resolve(self.create)

    @property
    def known_names(self) -> tuple[str, ...]:
        return tuple(_resolve(self.known))


def _adopt(registry: Registry[Any], obj: Any, origin: str, name: str) -> None:
    if isinstance(obj, ModuleType):
        # a module declares its backends in BACKENDS ({prefix: ModelBackend}; this module's built-ins), or
        # registers them itself with @register_model on import
        for prefix, backend in getattr(obj, "BACKENDS", {}).items():
            registry.register(prefix, backend, origin=origin)
        return
    if isinstance(obj, ModelBackend):
        registry.register(name, obj, origin=origin)
    elif callable(obj):
        registry.register(name, ModelBackend(obj, tuple(getattr(obj, "known", ()))), origin=origin)
    else:
        raise UnknownModelError(f"{origin} gave {type(obj).__name__}; expected a model factory, a ModelBackend or a module")


MODEL_BACKENDS: Registry[ModelBackend] = Registry(
    "model backend",
    error=UnknownModelError,
    group=ENTRY_POINT_GROUP,
    builtins=("domainbench.records.model_backends",),
    adopt=_adopt,
    listing="see `domainbench models`",
)


def register_model(prefix: str, known: Sequence[str] | None = None, *, replace: bool = False,
                   capabilities: Capabilities | None = None, options: type[ModelOptions] = ModelOptions,
                   check_name: Callable[[str], None] | None = None) -> Callable[[Factory], Factory]:
    """Register a factory for ``PREFIX:NAME`` models; a prefix already taken raises unless ``replace=True``.

    ``capabilities`` default to a local contrastive model with image embeddings; ``options`` is the
    pydantic model of the per-model options it takes (its factory gets them as keywords when a run gives any).
    """
    if not isinstance(prefix, str) or not prefix or ":" in prefix:
        raise UnknownModelError(f"a model backend prefix must be a non-empty name without ':', got {prefix!r}")

    def deco(fn: Factory) -> Factory:
        MODEL_BACKENDS.register(prefix, ModelBackend(fn, tuple(known or ()), capabilities or Capabilities(), options,
                                                     check_name), replace=replace)
        return fn

    return deco


# --------------------------------------------------------------------------- queries by name


def list_models(pattern: str = "*") -> list[str]:
    """Known model names matching a shell wildcard, e.g. ``list_models("open_clip:ViT-L*")`` (this imports
    the backends' modules, which hold their lists)."""
    names = [f"{prefix}:{n}" for prefix, backend in MODEL_BACKENDS.items() for n in backend.known_names]
    return sorted(n for n in names if fnmatch.fnmatch(n, pattern))


def backend_of(name: str) -> ModelBackend:
    """The backend of ``PREFIX:NAME``; ``UnknownModelError`` (naming the prefixes and close names) when no
    backend owns it."""
    prefix, sep, _ = name.partition(":")
    if not sep or prefix not in MODEL_BACKENDS:
        # close matches among full model names: users mistype the name more often than the prefix
        close = difflib.get_close_matches(name, list_models(), n=3)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise UnknownModelError(
            f"unknown model {name!r}: a model name is PREFIX:NAME with PREFIX one of "
            f"{', '.join(MODEL_BACKENDS.names())} (see `domainbench models`).{hint}"
        )
    return MODEL_BACKENDS.get(prefix)


def capabilities_of(name: str) -> Capabilities:
    """What the model called ``name`` can do. A prefix no installed backend owns (a stored run's plug-in
    model, read where the plug-in is absent) reads as a contrastive model, as every non-generative model did."""
    prefix, sep, _ = name.partition(":")
    return MODEL_BACKENDS.get(prefix).capabilities if sep and prefix in MODEL_BACKENDS else Capabilities()


def kind_of(name: str) -> ModelKind:
    """A model's kind from its name alone (what stored runs have): contrastive, generative or classifier."""
    return capabilities_of(name).kind


def has_image_embeddings(name: str) -> bool:
    return capabilities_of(name).image_embeddings


def option_keys(name: str) -> tuple[str, ...]:
    """The option keys the model's backend takes (none for an unknown prefix)."""
    prefix, sep, _ = name.partition(":")
    return tuple(MODEL_BACKENDS.get(prefix).options.model_fields) if sep and prefix in MODEL_BACKENDS else ()


def validate_options(name: str, options: Mapping[str, Any], given_as: str = "--model-arg") -> ModelOptions:
    """``options`` checked against the backend's schema; a bad key or value is one ``UserInputError``
    naming the model, the key and the fix (``given_as`` says how the user wrote it)."""
    backend = backend_of(name)
    schema = backend.options
    try:
        return schema.model_validate(dict(options))
    except ValidationError as e:
        loc, msg = first_validation_error(e)
        key = loc.split(".")[0]
        takes = ", ".join(schema.model_fields) or "none"
        if key not in schema.model_fields:
            raise UserInputError(f"{given_as} {name}: {key!r} is not an option of the {name.partition(':')[0]} backend "
                                 f"(it takes: {takes}); fix the key or leave it out") from None
        raise UserInputError(f"{given_as} {name}: {key}: {msg}; fix the value of {key}") from None


def given_options(name: str, options: Mapping[str, Any], given_as: str = "--model-arg") -> dict[str, Any]:
    """The options as given, checked and with their values coerced to the schema's types (``"8"`` -> 8)."""
    checked = validate_options(name, options, given_as)
    return checked.model_dump(mode="json", include=set(options))


# --------------------------------------------------------------------------- the built-in backends


def _path_exists(spec: str) -> None:
    if not Path(spec).expanduser().exists():
        raise UnknownModelError(f"model 'local:{spec}': the path {spec} does not exist; give a model folder or file")


_LOCAL_CONTRASTIVE = Capabilities("contrastive", open_ended=True)

#: the built-in backends, registered when the registry is first asked (their origin: this module)
BACKENDS: dict[str, ModelBackend] = {
    "embedded": ModelBackend("domainbench.models.embedded:create_embedded", "domainbench.models.embedded:VARIANTS",
                             Capabilities("contrastive", differentiable=True)),
    "open_clip": ModelBackend("domainbench.models.open_clip_backend:create_open_clip",
                              "domainbench.models.open_clip_backend:KNOWN_MODELS",
                              Capabilities("contrastive", differentiable=True, open_ended=True)),
    "hf": ModelBackend("domainbench.models.hf_backend:create_hf", "domainbench.models.hf_backend:KNOWN_MODELS",
                       _LOCAL_CONTRASTIVE),
    "local": ModelBackend("domainbench.models.local_backend:create_local", (), _LOCAL_CONTRASTIVE,
                          check_name=_path_exists),
    # the vision tower's pooled output is its image embedding
    "hf-vlm": ModelBackend("domainbench.models.hf_vlm_backend:create_hf_vlm", "domainbench.models.hf_vlm_backend:KNOWN_MODELS",
                           Capabilities("generative", open_ended=True), LocalVLMOptions),
    "openai-vlm": ModelBackend("domainbench.models.openai_vlm_backend:create_openai_vlm",
                               "domainbench.models.openai_vlm_backend:KNOWN_MODELS",
                               Capabilities("generative", remote=True, image_embeddings=False, devices=("cpu",),
                                            open_ended=True), EndpointOptions),
    # plain classifiers (a tested model of FMR, or of a corruption run): logits over their own classes.
    # Their configs and callables are checked when they load.
    "torchvision": ModelBackend("domainbench.models.classifier:create_torchvision", (),
                                Capabilities("classifier", differentiable=True, image_embeddings=False, open_ended=True)),
    "py": ModelBackend("domainbench.models.classifier:create_callable", (),
                       Capabilities("classifier", image_embeddings=False, open_ended=True)),
}


__all__ = [
    "BACKENDS",
    "Capabilities",
    "ENTRY_POINT_GROUP",
    "EndpointOptions",
    "LocalVLMOptions",
    "MODEL_BACKENDS",
    "ModelBackend",
    "ModelKind",
    "ModelOptions",
    "UnknownModelError",
    "backend_of",
    "capabilities_of",
    "given_options",
    "has_image_embeddings",
    "kind_of",
    "list_models",
    "option_keys",
    "register_model",
    "validate_options",
]

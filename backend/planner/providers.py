"""Planner providers: the registry behind ``plan(..., provider=NAME)``.

Built-in: ``offline`` (the domain-aware offline planner, always ready) and ``openai`` (any
OpenAI-compatible endpoint, ready when one is configured). ``auto`` is not a provider but the
rule that picks one: the ready provider with the lowest ``auto_rank`` (``openai`` before
``offline``). Plug-ins come from the entry-point group ``domainbench.planners``: the entry
point's name is the provider name and it names a ``PlannerProvider`` (or a module that calls
``register_provider`` on import).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from domainbench.records.config import PlannerProvenance
from domainbench.errors import UserInputError
from domainbench.planner import prompts, rules
from domainbench.planner.catalogue import Catalogue
from domainbench.planner.llm import LLMPlanner
from domainbench.planner.settings import LLMSettings
from domainbench.planner.vote import VoteResult
from domainbench.corruptions.named_registry import Registry

log = logging.getLogger(__name__)

AUTO = "auto"
ENTRY_POINT_GROUP = "domainbench.planners"


class Planned(NamedTuple):
    """What a provider returns: the vote over its samples, notes for the plan, and provenance."""

    vote: VoteResult
    notes: list[str]
    provenance: PlannerProvenance


@dataclass(frozen=True)
class PlannerProvider:
    """One way to plan: ``run(domain_text, samples, catalogue, settings) -> Planned``.

    ``ready(settings)`` says whether it can run with these LLM settings; ``not_ready`` is the
    error a user gets for naming it when it cannot; ``auto_rank`` orders the providers ``auto``
    may pick (None: never picked automatically).
    """

    run: Callable[[str, int, Catalogue, LLMSettings], Planned]
    ready: Callable[[LLMSettings], bool] = lambda settings: True
    not_ready: str = ""
    auto_rank: int | None = None


class UnknownProviderError(UserInputError):
    """A planner provider name that is not registered (or a provider clash or a broken plug-in)."""


PLANNER_PROVIDERS: Registry[PlannerProvider] = Registry(
    "planner provider", error=UnknownProviderError, group=ENTRY_POINT_GROUP, entry_type=PlannerProvider
)


def register_provider(name: str, provider: PlannerProvider, *, replace: bool = False) -> PlannerProvider:
    """Add a planner provider; a name already taken (or ``auto``) raises unless ``replace=True``."""
    if name == AUTO:
        raise UnknownProviderError(f"{AUTO!r} chooses among the providers; it cannot name one")
    return PLANNER_PROVIDERS.register(name, provider, replace=replace)


def provider_names() -> list[str]:
    """What ``provider=`` accepts: ``auto`` and every registered provider."""
    return [AUTO, *PLANNER_PROVIDERS.names()]


def check_provider_name(name: Any) -> str:
    """``name`` if it is ``auto`` or a registered provider; else the error lists the choices."""
    if name == AUTO or (isinstance(name, str) and name in PLANNER_PROVIDERS):
        return name
    close = PLANNER_PROVIDERS.close_matches(name, provider_names()) if isinstance(name, str) else []
    hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
    raise UnknownProviderError(f"provider must be one of {', '.join(provider_names())}, got {name!r}{hint}")


def choose_provider(name: str, settings: LLMSettings) -> tuple[str, PlannerProvider]:
    """The provider that plans: the named one (if ready), or the one ``auto`` picks."""
    if check_provider_name(name) == AUTO:
        ranked = sorted((p.auto_rank, n, p) for n, p in PLANNER_PROVIDERS.items() if p.auto_rank is not None)
        for _, chosen, provider in ranked:
            if provider.ready(settings):
                log.info("planner provider: %s", chosen)
                return chosen, provider
        raise UserInputError("no planner provider is ready; use --provider offline")
    provider = PLANNER_PROVIDERS.get(name)
    if not provider.ready(settings):
        raise UserInputError(provider.not_ready or f"planner provider {name!r} is not configured")
    return name, provider


def _plan_offline(text: str, samples: int, catalogue: Catalogue, settings: LLMSettings) -> Planned:
    from domainbench.planner import acquisition, cues
    from domainbench.planner.offline import MODEL_NAME, OfflinePlanner  # sentence-transformers: slow to import

    # deterministic: the same text always reads the same way, so ten samples would be ten copies of
    # one plan; it runs once whatever --samples says (that is the LLM providers' setting)
    vote = OfflinePlanner(catalogue).run(text, 1)
    provenance = PlannerProvenance(
        provider="offline",
        model=MODEL_NAME,
        prompt_version=f"offline-{rules.rules_version()}-{cues.cues_version()}-{acquisition.acquisition_version()}",
        samples=vote.n_samples,
        temperature=0.0,
    )
    return Planned(vote, [], provenance)


def _plan_openai(text: str, samples: int, catalogue: Catalogue, settings: LLMSettings) -> Planned:
    from domainbench.planner import acquisition  # the sanity rules read its factors

    vote, notes = LLMPlanner(settings, catalogue).run(text, samples)
    provenance = PlannerProvenance(
        provider="openai",
        model=settings.model,
        prompt_version=f"{prompts.prompt_version()}+{rules.rules_version()}+{acquisition.acquisition_version()}",
        samples=vote.n_samples,
        temperature=settings.temperature,
    )
    return Planned(vote, notes, provenance)


PLANNER_PROVIDERS.register("offline", PlannerProvider(_plan_offline, auto_rank=100), origin="built-in")
PLANNER_PROVIDERS.register(
    "openai",
    PlannerProvider(
        _plan_openai,
        ready=lambda settings: settings.configured,
        not_ready=(
            "provider 'openai' needs an LLM endpoint: set DOMAINBENCH_LLM_API_KEY (or OPENAI_API_KEY) for "
            "OpenAI, or DOMAINBENCH_LLM_BASE_URL for a local server such as Ollama or vLLM; "
            "or use --provider offline"
        ),
        auto_rank=0,
    ),
    origin="built-in",
)

__all__ = [
    "AUTO",
    "ENTRY_POINT_GROUP",
    "PLANNER_PROVIDERS",
    "Planned",
    "PlannerProvider",
    "UnknownProviderError",
    "check_provider_name",
    "choose_provider",
    "provider_names",
    "register_provider",
]

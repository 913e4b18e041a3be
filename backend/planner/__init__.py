"""The planner: from a domain description to a validated corruption config.

    plan(domain_text, provider="auto", samples=10, **settings) -> DomainConfig

Write the plan with ``domainbench.records.config.save(cfg, path)``. ``provider`` names a registered planner
provider (``domainbench.planner.providers``: ``offline``, ``openai``, plug-ins); ``"auto"`` uses the
LLM when an endpoint is configured (DOMAINBENCH_LLM_BASE_URL or an API key in
DOMAINBENCH_LLM_API_KEY / OPENAI_API_KEY) and the offline planner otherwise.
``settings`` are LLM settings (base_url, api_key, model, temperature, timeout, max_retries,
concurrency, json_mode); they override the environment.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from datetime import UTC, datetime
from collections.abc import Sequence
from typing import Any

from domainbench.records.config import DomainConfig
from domainbench.errors import UserInputError
from domainbench.planner import audit, compositions, prompts, rules
from domainbench.planner.catalogue import Catalogue, load_catalogue
from domainbench.planner.llm import PlannerError, enforce, redact
from domainbench.planner.providers import PLANNER_PROVIDERS, PlannerProvider, check_provider_name, choose_provider, register_provider
from domainbench.planner.settings import LLMSettings
from domainbench.runtime.settings import Settings

log = logging.getLogger(__name__)

MAX_DOMAIN_CHARS = 4000
MAX_SAMPLES = 50

__all__ = [
    "MAX_DOMAIN_CHARS",
    "PLANNER_PROVIDERS",
    "LLMSettings",
    "PlannerError",
    "PlannerProvider",
    "plan",
    "prepare_domain_text",
    "prompt_version",
    "register_provider",
]


def prompt_version() -> str:
    return prompts.prompt_version()


_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def prepare_domain_text(domain_text: Any) -> str:
    """Validated, normalised description; long text is cut at a sentence or word boundary."""
    if not isinstance(domain_text, str):
        raise UserInputError(
            f"the domain description must be text, got {type(domain_text).__name__}; "
            'pass a sentence such as "dash-cam footage of city traffic at night"'
        )
    text = _CONTROL.sub(" ", unicodedata.normalize("NFC", domain_text)).strip()
    if not text:
        raise UserInputError(
            "the domain description is empty; describe where your images come from, e.g. "
            '"chest X-rays from portable scanners in intensive care"'
        )
    if len(text) > MAX_DOMAIN_CHARS:
        total = len(text)
        cut = text[:MAX_DOMAIN_CHARS]
        end = max(cut.rfind(". "), cut.rfind("\n"))
        if end < MAX_DOMAIN_CHARS // 2:
            end = cut.rfind(" ")
        kept = cut[: end + 1].rstrip() if end > 0 else cut
        note = prompts.truncation_note(len(kept), total)
        log.warning("domain description has %d characters; using the first %d", total, len(kept))
        text = f"{kept}\n{note}"
    return text


def _samples(samples: Any) -> int:
    if isinstance(samples, bool) or not isinstance(samples, int) or not 1 <= samples <= MAX_SAMPLES:
        raise UserInputError(f"samples must be an integer from 1 to {MAX_SAMPLES}, got {samples!r}")
    return samples


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def plan(
    domain_text: str,
    provider: str | Sequence[str] = "auto",
    samples: int = 10,
    *,
    catalogue: Catalogue | None = None,
    llm: LLMSettings | None = None,
    **settings: Any,
) -> DomainConfig:
    """Plan the corruptions for a domain description; the result is validated and rule-checked.

    ``llm``: the LLM endpoint as the entry point read it (``Settings.llm_settings()``); when
    left out, the environment is read here, with ``settings`` as overrides.

    ``provider`` may list several planners (``offline``, ``openai``, ``openai:MODEL@BASE_URL``, ...):
    each plans, and a majority vote across them decides (``council``); the plan's notes hold who
    chose what and their pairwise agreement.
    """
    from domainbench.planner import council

    specs = [provider] if isinstance(provider, str) else list(provider)
    if not specs:
        raise UserInputError("give at least one planner provider, e.g. --provider offline")
    if llm is not None and settings:
        raise TypeError("give either llm= or individual LLM settings, not both")
    several = len(specs) > 1 or ":" in specs[0]
    if not several:
        check_provider_name(specs[0])  # before any work: a typo is answered with the close names
    n = _samples(samples)
    text = prepare_domain_text(domain_text)
    cat = catalogue or load_catalogue()
    llm_settings = llm if llm is not None else Settings.from_env().llm_settings(**settings)
    if several:
        members = [council.parse_member(s, llm_settings) for s in specs]
        vote, notes, prov = council.run(members, text, n, cat).planned
        llms = [audit.llm_label(m.settings.model, m.settings.base_url) for m in members if m.provider == "openai"]
    else:
        name, planner = choose_provider(specs[0], llm_settings)
        vote, notes, prov = planner.run(text, n, cat, llm_settings)
        llms = [audit.llm_label(llm_settings.model, llm_settings.base_url)] if name == "openai" else []
    notes = list(notes)

    # Final gate for both planners: only catalogue names, parameters in range, rules satisfied.
    req = rules.requirements(text, cat.names)
    remaining = rules.violations(req, [c.name for c in vote.chosen])
    chosen = vote.chosen
    if remaining:  # cannot happen when every sample obeyed the rules; corrected and reported if it does
        notes += [f"voted plan corrected: {v}" for v in remaining]
        chosen = enforce(chosen, req, cat)
    # the same gate for every step of a proposed composition (a plug-in provider's included)
    composed_notes = compositions.violations(req, vote.compositions)
    notes += [f"voted plan corrected: {v}" for v in composed_notes]
    composed = compositions.enforce(vote.compositions, req)
    key = llm_settings.key_value() if llm_settings.api_key is not None else None
    cfg = DomainConfig(
        domain=text,
        corruptions=chosen,
        compositions=composed,
        planner=prov.model_copy(
            update={
                "frequencies": {k: round(v, 4) for k, v in vote.frequencies.items()},
                "violations": [redact(v, key) for v in notes],
                "created_at": _now(),
            }
        ),
    )
    try:
        cfg.check_catalogue()
    except UserInputError as e:  # a bug, not user input: every name was validated upstream
        raise PlannerError(f"internal error: planned corruption failed catalogue validation: {e}") from e
    return audit.stamp(cfg, llms=llms, text=audit.digest_text(text))

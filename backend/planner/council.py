"""Several planners voting (issue 39, Deliver 4): each LLM plans with its own samples, then a majority
vote across the LLMs, with an agreement table.

A provider is named as ``--provider`` names one, repeatable:

    offline | openai | openai:MODEL | openai:MODEL@BASE_URL | PLUGIN

``openai:MODEL@BASE_URL`` is any OpenAI-compatible endpoint (OpenAI, Ollama, vLLM); the key is the
configured one (DOMAINBENCH_LLM_API_KEY / OPENAI_API_KEY), a local server needs none. Each member's
plan is its own majority vote over ``samples`` samples (the offline planner runs once); the council
chooses a corruption when more than half of the members that answered chose it, with severities
voted the same way (``vote.majority_vote``). A member that fails after its retries (a timeout, an
invalid plan every time) is left out and the plan says so; when none answers, planning fails.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from domainbench.records.config import PlannerProvenance
from domainbench.errors import UserInputError
from domainbench.planner.catalogue import Catalogue
from domainbench.planner.llm import PlannerError
from domainbench.planner.providers import Planned, check_provider_name, choose_provider
from domainbench.planner.settings import LLMSettings
from domainbench.planner.vote import VoteResult, majority_vote


@dataclass(frozen=True)
class Member:
    spec: str  # as the user wrote it
    provider: str  # registered provider name
    settings: LLMSettings

    @property
    def label(self) -> str:
        if self.provider == "openai":
            return f"{self.settings.model}@{self.settings.safe_base_url}"
        return self.provider


def parse_member(spec: str, base: LLMSettings) -> Member:
    """One ``--provider`` value; an unknown name is answered with the close ones."""
    if not isinstance(spec, str) or not spec.strip():
        raise UserInputError("--provider needs a value: offline, openai, openai:MODEL or openai:MODEL@BASE_URL")
    spec = spec.strip()
    name, colon, rest = spec.partition(":")
    if not colon:
        return Member(spec, check_provider_name(name), base)
    if name != "openai":
        raise UserInputError(f"--provider {spec!r}: only openai takes a model (openai:MODEL or openai:MODEL@BASE_URL)")
    model, _, url = rest.partition("@")
    if not model:
        raise UserInputError(f"--provider {spec!r}: the model is missing; write openai:MODEL or openai:MODEL@BASE_URL")
    if url and not url.startswith(("http://", "https://")):
        raise UserInputError(f"--provider {spec!r}: the base URL must start with http:// or https://, e.g. "
                             "openai:llama3@http://localhost:11434/v1")
    update = {"model": model} | ({"base_url": url} if url else {})
    return Member(spec, "openai", base.model_copy(update=update))


def jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a | b else 1.0


@dataclass
class CouncilResult:
    planned: Planned
    #: member label -> chosen names (members that answered)
    chosen: dict[str, list[str]]
    failed: dict[str, str]


def run(members: Sequence[Member], text: str, samples: int, catalogue: Catalogue) -> CouncilResult:
    if len({m.label for m in members}) != len(members):
        raise UserInputError("--provider names the same planner twice; give each LLM once")
    per: dict[str, Planned] = {}
    failed: dict[str, str] = {}
    for m in members:
        try:
            _, provider = choose_provider(m.provider, m.settings)
            per[m.label] = provider.run(text, samples, catalogue, m.settings)
        except PlannerError as e:  # a timeout or no valid plan after the retries: the vote goes on
            failed[m.label] = str(e)
    if not per:
        raise PlannerError("no planner answered: " + "; ".join(f"{k}: {v}" for k, v in failed.items()))
    labels = list(per)
    plans = [per[k].vote.chosen for k in labels]
    vote = majority_vote(plans, catalogue.names)
    # reasons: the member that chose it first, named
    for i, c in enumerate(vote.chosen):
        who = next(k for k in labels if c.name in {x.name for x in per[k].vote.chosen})
        vote.chosen[i] = c.model_copy(update={"reason": f"{c.reason.rstrip('.')} ({who}; chosen by "
                                                        f"{sum(c.name in {x.name for x in p} for p in plans)}/{len(plans)} planners)."})
    vote = VoteResult(vote.chosen, vote.frequencies, len(plans), compositions=per[labels[0]].vote.compositions)
    chosen = {k: [c.name for c in per[k].vote.chosen] for k in labels}
    notes = agreement_notes(chosen, failed)
    for k in labels:
        notes += [f"{k}: {n}" for n in per[k].notes]
    prov = PlannerProvenance(
        provider="council",
        model=", ".join(labels),
        prompt_version=" | ".join(sorted({per[k].provenance.prompt_version for k in labels})),
        samples=sum(per[k].provenance.samples for k in labels),
        temperature=max(per[k].provenance.temperature for k in labels),
    )
    return CouncilResult(Planned(vote, notes, prov), chosen, failed)


def agreement_notes(chosen: dict[str, list[str]], failed: dict[str, str]) -> list[str]:
    """Which planner chose what, and the pairwise Jaccard index of their choices, as plan notes."""
    notes = [f"planners voting: {len(chosen)} ({', '.join(chosen)}); a corruption is chosen by more than half of them"]
    for k, names in chosen.items():
        notes.append(f"{k} chose: {', '.join(sorted(names))}")
    for a, b in itertools.combinations(chosen, 2):
        notes.append(f"agreement {a} vs {b}: Jaccard {jaccard(set(chosen[a]), set(chosen[b])):.2f}")
    for k, why in failed.items():
        notes.append(f"{k} left out of the vote: {why}")
    return notes

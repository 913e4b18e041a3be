"""The LLM planner: OpenAI-compatible chat completions, validated, repaired once, majority-voted.

Each sample is one conversation: system + user prompt -> answer. If the answer has structural
problems (not JSON, unknown names, parameters out of range, bad severities) or breaks a sanity
rule, the model is told exactly what was wrong, once. A sample whose second answer still has
structural problems is rejected. Sanity violations that survive the repair are corrected
deterministically (implausible corruptions removed, required ones added) and reported in the
plan's provenance, so a stored plan never breaks a rule and never hides that the model did.

Transport: the openai client retries timeouts, connection errors, 429 and 5xx itself
(``max_retries``, exponential back-off, honouring Retry-After). What is left after its retries is
turned into a ``PlannerError`` that names the endpoint and what to do, with the key scrubbed.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import openai

from domainbench.records.config import Composition, CorruptionChoice
from domainbench.errors import UserInputError
from domainbench.planner import compositions, prompts, rules
from domainbench.planner.catalogue import Catalogue, CatalogueEntry
from domainbench.planner.schema import parse_answer
from domainbench.planner.settings import LLMSettings
from domainbench.planner.vote import VoteResult, majority_vote
from domainbench.runtime.settings import redact_key

log = logging.getLogger(__name__)


class PlannerError(UserInputError):
    """The planner could not produce a valid plan; the message says why and what to try."""


@dataclass
class SampleOutcome:
    index: int
    choices: list[CorruptionChoice] | None = None  # None: rejected
    compositions: list[Composition] = field(default_factory=list)
    repaired: bool = False
    corrected: list[str] = field(default_factory=list)  # sanity violations fixed after the repair
    error: str = ""


# the planner's name for it; it lives with the settings that hold the keys (the VLM endpoint backend uses it too)
redact = redact_key


class LLMPlanner:
    def __init__(self, settings: LLMSettings, catalogue: Catalogue):
        self.settings = settings
        self.catalogue = catalogue
        self._client = openai.OpenAI(
            api_key=settings.key_value(),
            base_url=settings.base_url or None,
            timeout=settings.timeout,
            max_retries=settings.max_retries,
        )

    def __repr__(self) -> str:  # the client holds the key; never show it
        return f"LLMPlanner(model={self.settings.model!r}, base_url={self.settings.safe_base_url!r})"

    # -- transport -------------------------------------------------------------------------
    def _complete(self, messages: list[dict[str, str]]) -> str:
        s = self.settings
        kwargs: dict[str, Any] = {"model": s.model, "messages": messages, "temperature": s.temperature}
        if s.json_mode:
            kwargs["response_format"] = {"type": "json_object"}
        where = f"LLM endpoint {s.safe_base_url} (model {s.model!r})"
        attempts = s.max_retries + 1
        try:
            resp = self._client.chat.completions.create(**kwargs)
        except openai.APITimeoutError:
            raise PlannerError(
                f"{where} did not answer within {s.timeout:g} s ({attempts} attempts); "
                "raise DOMAINBENCH_LLM_TIMEOUT, check the server, or use --provider offline"
            ) from None
        except openai.RateLimitError:
            raise PlannerError(
                f"{where} kept answering HTTP 429 (rate limit) after {attempts} attempts; "
                "wait and retry, lower --samples or DOMAINBENCH_LLM_CONCURRENCY, or use --provider offline"
            ) from None
        except openai.AuthenticationError:
            raise PlannerError(
                f"{where} rejected the API key (HTTP 401); set DOMAINBENCH_LLM_API_KEY (or OPENAI_API_KEY) "
                "to a valid key"
            ) from None
        except openai.PermissionDeniedError:
            raise PlannerError(f"{where} refused access (HTTP 403); check the key's permissions for this model") from None
        except openai.NotFoundError:
            raise PlannerError(
                f"{where} answered HTTP 404; check DOMAINBENCH_LLM_BASE_URL (it usually ends in /v1) "
                "and DOMAINBENCH_LLM_MODEL"
            ) from None
        except openai.APIConnectionError as e:
            raise PlannerError(
                f"could not connect to {where} ({redact(str(e), s.key_value())}); is the server running? "
                "Or use --provider offline"
            ) from None
        except openai.APIStatusError as e:
            body = redact(str(e), s.key_value())[:300]
            raise PlannerError(f"{where} answered HTTP {e.status_code}: {body}") from None
        except openai.OpenAIError as e:
            raise PlannerError(f"{where} failed: {redact(str(e), s.key_value())[:300]}") from None
        if not resp.choices:
            return ""
        return resp.choices[0].message.content or ""

    # -- one sample ------------------------------------------------------------------------
    def _check(self, raw: str, req: rules.Requirements) -> tuple[list[CorruptionChoice], list[Composition], list[str], list[str]]:
        parsed = parse_answer(raw, self.catalogue)
        sanity = (rules.violations(req, [c.name for c in parsed.choices])
                  + compositions.violations(req, parsed.compositions)) if parsed.ok else []
        return parsed.choices, parsed.compositions, parsed.problems, sanity

    def sample(self, index: int, domain_text: str, req: rules.Requirements) -> SampleOutcome:
        base = prompts.messages(domain_text, self.catalogue)
        raw = self._complete(base)
        choices, composed, problems, sanity = self._check(raw, req)
        out = SampleOutcome(index=index)
        if problems or sanity:
            log.info("planner sample %d: repairing %d problem(s)", index, len(problems) + len(sanity))
            out.repaired = True
            convo = base + [
                {"role": "assistant", "content": raw[:20000]},
                {"role": "user", "content": prompts.repair_message(problems + sanity)},
            ]
            raw = self._complete(convo)
            choices, composed, problems, sanity = self._check(raw, req)
        if problems:
            out.error = "; ".join(problems[:6]) + (f" (+{len(problems) - 6} more)" if len(problems) > 6 else "")
            log.warning("planner sample %d rejected after repair: %s", index, out.error)
            return out
        if sanity:
            out.corrected = sanity
            choices = enforce(choices, req, self.catalogue)
            composed = compositions.enforce(composed, req)
        out.choices, out.compositions = choices, composed
        return out

    # -- N samples + vote -------------------------------------------------------------------
    def run(self, domain_text: str, samples: int) -> tuple[VoteResult, list[str]]:
        req = rules.requirements(domain_text, self.catalogue.names)
        workers = min(samples, self.settings.concurrency)
        outcomes: list[SampleOutcome] = []
        transport_errors: list[PlannerError] = []

        def one(i: int) -> SampleOutcome:
            try:
                return self.sample(i, domain_text, req)
            except PlannerError as e:
                transport_errors.append(e)
                return SampleOutcome(index=i, error=str(e))

        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="planner") as pool:
            outcomes = list(pool.map(one, range(samples)))
        valid = [o for o in outcomes if o.choices is not None]
        rejected = [o for o in outcomes if o.choices is None]
        needed = (samples + 1) // 2
        if len(valid) < needed:
            if transport_errors and len(transport_errors) == len(rejected):
                raise transport_errors[0]
            first = rejected[0].error if rejected else "no answer"
            raise PlannerError(
                f"the LLM gave a usable plan in only {len(valid)} of {samples} samples (at least {needed} needed), "
                f"even after one repair each; first problem: {first}. Try another model, or --provider offline"
            )
        vote = majority_vote([o.choices or [] for o in valid], self.catalogue.names)
        vote.compositions = compositions.vote([o.compositions for o in valid], len(valid))
        notes: list[str] = []
        for o in rejected:
            notes.append(f"sample {o.index + 1} rejected: {o.error}")
        corrected: dict[str, int] = {}
        for o in valid:
            for v in o.corrected:
                corrected[v] = corrected.get(v, 0) + 1
        for v, count in corrected.items():
            notes.append(f"model answer broke a sanity rule in {count}/{len(valid)} samples, corrected: {v}")
        return vote, notes


def enforce(choices: list[CorruptionChoice], req: rules.Requirements, catalogue: Catalogue) -> list[CorruptionChoice]:
    """Drop forbidden corruptions and add missing required ones (with a rule-citing reason)."""
    by_name = catalogue.by_name()
    kept = [c for c in choices if c.name not in req.forbidden]
    have = {c.name for c in kept}
    for name, why in req.required.items():
        if name not in have:
            kept.append(required_choice(by_name[name], why))
    return kept


def required_choice(entry: CatalogueEntry, why: str, situation: str | None = None) -> CorruptionChoice:
    sev = [1, 2, 3, 4, 5] if entry.ordinal else [1]
    where = f"; closest situation: {situation}" if situation else ""
    return CorruptionChoice(
        name=entry.name, severities=sev, reason=f"Required by the sanity rules for {why}{where}."
    )

"""Composed corruptions a planner proposes: up to 3 per domain, each with a reason, each step rule-checked.

Real domains stack their damage: night dash-cam footage in rain is dark, wet and blurred at once.
A single-corruption plan measures each factor alone; a composition (``config.Composition``, the cell
``compose:NAME``) measures them together.

- The offline planner proposes them from what the description says (:func:`propose`): every cue or
  acquisition factor it found is one real-world factor ("night", "rain", "moving"); where one
  sentence names two or more factors, their corruptions are stacked. Factors in different sentences
  are not: they may be different situations ("at night ... In daylight, ...").
- The LLM planner may answer a ``compositions`` array (:func:`parse`); samples are voted like the
  corruptions (:func:`vote`).
- For both, the sanity rules apply to every step (:func:`violations`, :func:`enforce`): a step the
  detected domain kind forbids is reported (and repaired or dropped), and a composition left with
  fewer than two steps is dropped (one step is a plain corruption cell).
"""

from __future__ import annotations

import re
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from domainbench.records.config import Composition, CompositionStep
from domainbench.planner import rules
from domainbench.planner.catalogue import Catalogue
from domainbench.planner.cues import Hit

MAX_COMPOSITIONS = 3
#: a composition of one step is that corruption's own cell
MIN_STEPS = 2
MAX_STEPS = 5
MAX_REASON_CHARS = 600
#: the offline planner's severity for every step: stacked, moderate levels already compound
OFFLINE_SEVERITY = 2
#: physical order of the steps (the scene, then the optics during the exposure, the sensor, the file);
#: geometric corruptions change where things are, not how much signal is left, and are not stacked
FAMILY_ORDER = ("weather", "occlusion", "photometric", "blur", "sensor", "noise", "digital")

Severity = Annotated[int, Field(ge=1, le=5, strict=True)]


class _Step(BaseModel):
    model_config = ConfigDict(extra="ignore")

    corruption: str = Field(min_length=1, max_length=80)
    severity: Severity


class ProposedComposition(BaseModel):
    """One entry of an LLM answer's ``compositions`` array (extra keys are tolerated and dropped)."""

    model_config = ConfigDict(extra="ignore")

    name: str = Field(min_length=1, max_length=80)
    steps: list[_Step] = Field(min_length=MIN_STEPS, max_length=MAX_STEPS)
    reason: str = Field(min_length=1)

    @field_validator("name")
    @classmethod
    def _norm_name(cls, v: str) -> str:
        return one_line(v, "name")

    @field_validator("reason")
    @classmethod
    def _clip_reason(cls, v: str) -> str:
        return one_line(v, "reason", MAX_REASON_CHARS)


def one_line(v: str, what: str, limit: int | None = None) -> str:
    """An answer's text on one line with single spaces (at most ``limit`` characters); blank is refused."""
    v = " ".join(v.split())
    if not v:
        raise ValueError(f"{what} must not be blank")
    return v[:limit]


def error_lines(where: str, error: ValidationError) -> list[str]:
    """Each problem pydantic found in the answer's item at ``where``, as ``where.field[i]: message``."""
    return [where + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"]) + f": {err['msg']}"
            for err in error.errors()]


def parse(items: Any, catalogue: Catalogue) -> tuple[list[Composition], list[str]]:
    """An answer's ``compositions`` (absent: none) as validated compositions, and every structural problem."""
    if items is None:
        return [], []
    if not isinstance(items, list):
        return [], ['"compositions" must be an array (or left out)']
    if len(items) > MAX_COMPOSITIONS:
        return [], [f"{len(items)} compositions listed; propose at most {MAX_COMPOSITIONS}"]
    out: list[Composition] = []
    problems: list[str] = []
    names: set[str] = set()
    for i, raw in enumerate(items):
        where = f"compositions[{i}]"
        try:
            item = ProposedComposition.model_validate(raw)
        except ValidationError as e:
            problems += error_lines(where, e)
            continue
        bad = False
        for k, step in enumerate(item.steps):
            if step.corruption not in catalogue:
                problems.append(f"{where}.steps[{k}]: unknown corruption {step.corruption[:80]!r}"
                                f"{catalogue.suggest(step.corruption)}; use only names from the catalogue")
                bad = True
        seen = [s.corruption for s in item.steps]
        if len(set(seen)) != len(seen):
            problems.append(f"{where} ({item.name!r}): a corruption appears twice in its steps; list each once")
            bad = True
        if item.name in names:
            problems.append(f"{where}: the name {item.name!r} is used twice; name each composition differently")
            bad = True
        if bad:
            continue
        names.add(item.name)
        out.append(Composition(name=item.name, reason=item.reason,
                               steps=[CompositionStep(corruption=s.corruption, severity=s.severity) for s in item.steps]))
    return out, problems


def violations(req: rules.Requirements, compositions: Iterable[Composition]) -> list[str]:
    """The sanity rules applied to every step: a forbidden corruption in a composition is a violation."""
    return [f"composition {c.name!r}: step {s.corruption!r} is implausible for {req.forbidden[s.corruption]}; "
            "remove the step" for c in compositions for s in c.steps if s.corruption in req.forbidden]


def enforce(compositions: Iterable[Composition], req: rules.Requirements) -> list[Composition]:
    """Forbidden steps removed; a composition left with fewer than two steps dropped; at most three kept."""
    out = []
    for c in compositions:
        steps = [s for s in c.steps if s.corruption not in req.forbidden]
        if len(steps) >= MIN_STEPS:
            out.append(c if len(steps) == len(c.steps) else c.model_copy(update={"steps": steps}))
    return out[:MAX_COMPOSITIONS]


def vote(samples: Sequence[Sequence[Composition]], n_samples: int) -> list[Composition]:
    """Compositions whose sequence of step corruptions more than half of the ``n_samples`` valid samples proposed.

    Severity of each step: the lower median over those samples; name and reason: the first such sample's.
    The most agreed-on first, at most three; a name already taken gets the next free " (k)" suffix.
    """
    by_key: dict[tuple[str, ...], list[Composition]] = {}
    for sample in samples:
        for c in sample:
            by_key.setdefault(tuple(s.corruption for s in c.steps), []).append(c)
    counts = Counter({k: len(v) for k, v in by_key.items()})
    out: list[Composition] = []
    names: set[str] = set()
    for key, k in sorted(counts.items(), key=lambda kv: -kv[1]):  # stable: ties keep first appearance
        if 2 * k <= n_samples or len(out) == MAX_COMPOSITIONS:
            continue
        chs = by_key[key]
        steps = [CompositionStep(corruption=name, severity=statistics.median_low(c.steps[j].severity for c in chs))
                 for j, name in enumerate(key)]
        name, suffix = chs[0].name, 2
        while name in names:
            name, suffix = f"{chs[0].name[:74]} ({suffix})", suffix + 1
        names.add(name)
        out.append(Composition(name=name, steps=steps, reason=chs[0].reason))
    return out


_SENTENCE = re.compile(r"[^.!?。！？\n]+")


def propose(text: str, hits: Mapping[str, Hit], chosen: Iterable[str], catalogue: Catalogue) -> list[Composition]:
    """The offline planner's compositions: where a sentence of the description stacks two or more factors
    (cues or acquisition factors), their chosen non-geometric corruptions applied together at severity 2.

    One per such sentence, in text order, the same stack once; at most three. ``hits``: per corruption,
    the first cue or factor that called for it (its position says which sentence it is in).
    """
    family = {e.name: e.family for e in catalogue.entries}
    usable = {n: h for n, h in hits.items() if n in set(chosen) and family.get(n) in FAMILY_ORDER}
    spans = [(m.start(), m.end()) for m in _SENTENCE.finditer(text)]
    out: list[Composition] = []
    for lo, hi in spans:
        stack = _stack({n: h for n, h in usable.items() if lo <= h.start < hi}, family)
        if stack is None or any([s.corruption for s in c.steps] == [s.corruption for s in stack.steps] for c in out):
            continue
        if any(c.name == stack.name for c in out):
            stack = stack.model_copy(update={"name": f"{stack.name[:74]} ({len(out) + 1})"})
        out.append(stack)
        if len(out) == MAX_COMPOSITIONS:
            break
    return out


def _stack(hits: Mapping[str, Hit], family: Mapping[str, str]) -> Composition | None:
    factors: dict[str, list[Hit]] = {}
    for h in sorted(hits.values(), key=lambda h: (h.start, h.name)):
        factors.setdefault(h.cue, []).append(h)
    if len(factors) < MIN_STEPS:
        return None
    # within a family, noise last: the sensor adds it on readout, after the light level is set
    ordered = sorted(hits.values(), key=lambda h: (FAMILY_ORDER.index(family[h.name]), "noise" in h.name, h.start,
                                                   h.name))[:MAX_STEPS]
    if len(ordered) < MIN_STEPS:
        return None
    keywords = list(dict.fromkeys(hs[0].keyword.lower() for hs in factors.values()))
    said = "; ".join(f"'{hs[0].keyword}' ({hs[0].why})" for hs in factors.values())
    reason = (f"The description stacks these factors in the same images: {said}. "
              f"Together: {', '.join(h.name for h in ordered)}, each at severity {OFFLINE_SEVERITY}.")
    return Composition(name=" + ".join(keywords)[:80], reason=reason[:MAX_REASON_CHARS],
                       steps=[CompositionStep(corruption=h.name, severity=OFFLINE_SEVERITY) for h in ordered])

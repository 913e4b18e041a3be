"""Domain sanity rules: which corruptions a kind of domain forbids or requires (data in rules.toml).

Kinds are detected from the description by keywords, deliberately not by embeddings: the check
must be identical for the LLM and the offline planner, cheap enough to run on every sample, and
explainable ("the description mentions 'x-ray'").
"""

from __future__ import annotations

import hashlib
import logging
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator

from domainbench.planner import acquisition, cues
from domainbench.planner.keywords import keyword_pattern, load_book

log = logging.getLogger(__name__)

RULES_PATH = Path(__file__).with_name("rules.toml")


class DomainKind(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    label: str
    keywords: list[str] = Field(default_factory=list)
    #: acquisition factors (acquisition.toml) that show this kind: read in context, so "vehicle" in
    #: "remotely operated vehicle" is no road
    factors: list[str] = Field(default_factory=list)
    #: factors that rule the kind out (a satellite domain that is also aerial: aircraft do blur)
    unless_factors: list[str] = Field(default_factory=list)
    #: words anywhere in the description that rule the kind out (sonar images described beside a camera's)
    unless: list[str] = Field(default_factory=list)
    forbidden: list[str] = Field(default_factory=list)
    required: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _evidence(self) -> DomainKind:
        if not self.keywords and not self.factors:
            raise ValueError(f"kind {self.label!r} needs keywords or factors to be detected by")
        return self


class Need(BaseModel):
    """What the scene must show for one corruption to be physically possible (rules.toml ``[needs]``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: what the scene must show, read after "a scene that shows no" ("overhead view or the sky in view")
    needs: str = Field(min_length=1)
    #: the physics, quoted in the refusal
    because: str = Field(min_length=1)
    factors: list[str] = Field(default_factory=list)
    unless_factors: list[str] = Field(default_factory=list)
    keywords: list[str] = Field(default_factory=list)
    #: a keyword is no evidence in a clause holding one of these ("uploaded to the cloud" shows no sky)
    unless: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _evidence(self) -> Need:
        if not self.keywords and not self.factors:
            raise ValueError(f"need {self.needs!r} needs keywords or factors that show it")
        return self


class RuleBook(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    version: int = 1
    required_everywhere: list[str] = Field(default_factory=list)
    kinds: dict[str, DomainKind] = Field(default_factory=dict)
    #: corruption -> what the scene must show for it to be possible at all
    needs: dict[str, Need] = Field(default_factory=dict)

    def names(self) -> set[str]:
        out = set(self.required_everywhere) | set(self.needs)
        for k in self.kinds.values():
            out.update(k.forbidden)
            out.update(k.required)
        return out


@dataclass(frozen=True)
class DetectedKind:
    name: str
    label: str
    keyword: str  # the text that matched, as it appears in the description


@dataclass
class Requirements:
    """What the rules demand of a plan for one description, each with the reason why."""

    kinds: list[DetectedKind] = field(default_factory=list)
    forbidden: dict[str, str] = field(default_factory=dict)  # name -> why
    required: dict[str, str] = field(default_factory=dict)  # name -> why


@dataclass(frozen=True)
class _Compiled:
    book: RuleBook
    patterns: dict[str, re.Pattern[str]]
    need_patterns: dict[str, re.Pattern[str]]
    unless_patterns: dict[str, re.Pattern[str]]
    need_unless: dict[str, re.Pattern[str]]
    fingerprint: str


@lru_cache(maxsize=4)
def _compile(path: str) -> _Compiled:
    book, raw = load_book(Path(path), RuleBook, "sanity rules", "backend/planner/rules.toml")
    patterns = {name: keyword_pattern(kind.keywords) for name, kind in book.kinds.items() if kind.keywords}
    need_patterns = {name: keyword_pattern(need.keywords) for name, need in book.needs.items() if need.keywords}
    unless_patterns = {name: keyword_pattern(kind.unless) for name, kind in book.kinds.items() if kind.unless}
    need_unless = {name: keyword_pattern(need.unless) for name, need in book.needs.items() if need.unless}
    return _Compiled(book, patterns, need_patterns, unless_patterns, need_unless, hashlib.sha256(raw).hexdigest()[:12])


def rule_book(path: str | Path | None = None) -> RuleBook:
    return _compile(str(path or RULES_PATH)).book


def rules_version(path: str | Path | None = None) -> str:
    return "rules-" + _compile(str(path or RULES_PATH)).fingerprint


def _normalise(text: str) -> str:
    return unicodedata.normalize("NFKC", text).lower()


def detect_kinds(text: str, path: str | Path | None = None) -> list[DetectedKind]:
    comp = _compile(str(path or RULES_PATH))
    norm = _normalise(text)
    # reasons quote the keyword as written ("X-rays", not "x-rays"), when case folding kept
    # every position (it does except for a few letters such as "İ")
    written = unicodedata.normalize("NFKC", text)
    same_positions = len(written) == len(norm)
    factors = {f.factor: f for f in acquisition.read(text)} if any(k.factors or k.unless_factors for k in comp.book.kinds.values()) else {}
    found = []
    for name, kind in comp.book.kinds.items():
        if set(kind.unless_factors) & set(factors):
            continue
        veto = comp.unless_patterns.get(name)
        if veto is not None and cues.first_match(veto, None, norm) is not None:
            continue
        shown = next((factors[f] for f in kind.factors if f in factors), None)
        if shown is not None:  # the factor's own evidence, as the description writes it
            found.append(DetectedKind(name, kind.label, shown.keyword))
            continue
        pattern = comp.patterns.get(name)
        m = cues.first_match(pattern, None, norm) if pattern is not None else None
        if m:
            keyword = written[m.start() : m.end()] if same_positions else m.group(0)
            found.append(DetectedKind(name, kind.label, keyword))
    return found


def unmet_needs(text: str, path: str | Path | None = None) -> dict[str, str]:
    """Corruptions the scene cannot produce because nothing in ``text`` shows what they need -> why."""
    comp = _compile(str(path or RULES_PATH))
    if not comp.book.needs:
        return {}
    factors = {f.factor for f in acquisition.read(text)}
    norm = _normalise(text)
    out = {}
    for name, need in comp.book.needs.items():
        by_factor = bool(set(need.factors) & factors) and not set(need.unless_factors) & factors
        pattern = comp.need_patterns.get(name)
        veto = comp.need_unless.get(name)
        shown = pattern is not None and cues.first_match(pattern, veto, norm) is not None
        if not by_factor and not shown:
            out[name] = f"a scene that shows no {need.needs} ({need.because})"
    return out


def requirements(text: str, catalogue_names: Iterable[str], path: str | Path | None = None) -> Requirements:
    """Forbidden and required corruptions for ``text``, restricted to names in the catalogue."""
    book = rule_book(path)
    known = set(catalogue_names)
    unknown = sorted(book.names() - known)
    if unknown:
        log.debug("sanity rules name corruptions not in the catalogue (ignored): %s", ", ".join(unknown))
    req = Requirements(kinds=detect_kinds(text, path))
    for name in book.required_everywhere:
        if name in known:
            req.required[name] = "every domain"
    for k in req.kinds:
        kind = book.kinds[k.name]
        for name in kind.forbidden:
            if name in known and name not in req.forbidden:
                req.forbidden[name] = f"{k.label} (the description mentions {k.keyword!r})"
        for name in kind.required:
            if name in known and name not in req.required:
                req.required[name] = f"{k.label} (the description mentions {k.keyword!r})"
    # physics: what nothing in the scene makes possible is refused, whichever planner proposed it
    for name, why in unmet_needs(text, path).items():
        if name in known and name not in req.forbidden:
            req.forbidden[name] = why
    # Forbidden wins over required when two detected kinds disagree.
    for name in list(req.required):
        if name in req.forbidden:
            del req.required[name]
    return req


def violations(req: Requirements, chosen: Iterable[str]) -> list[str]:
    """Human-readable rule violations of a set of chosen corruption names (empty when clean)."""
    chosen_set = set(chosen)
    out = [
        f"{name!r} is implausible for {why}; remove it"
        for name, why in req.forbidden.items()
        if name in chosen_set
    ]
    out += [
        f"{name!r} is required for {why}; add it"
        for name, why in req.required.items()
        if name not in chosen_set
    ]
    return out


def check(text: str, chosen: Iterable[str], catalogue_names: Iterable[str]) -> list[str]:
    return violations(requirements(text, catalogue_names), chosen)

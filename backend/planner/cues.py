"""Cues: phrases of a domain description that call for a corruption (data in cues.toml).

The offline planner's expert reading of a description. Matching is by keyword, like the sanity
rules, so a choice can always be explained by quoting the clause that holds the keyword, and the
same text always gives the same cues.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from domainbench.planner.keywords import keyword_pattern, load_book

CUES_PATH = Path(__file__).with_name("cues.toml")
# a quoted clause longer than this is cut to a window around the keyword: a few words before
# it, more after (descriptions tend to name the thing first and its condition after)
WORDS_BEFORE, WORDS_AFTER = 6, 12


class Cue(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    why: str = Field(min_length=1)
    keywords: list[str] = Field(min_length=1)
    choose: list[str] = Field(min_length=1)
    #: a match whose clause also holds one of these is someone else's cue ("blurred by hand shake"
    #: is motion blur, not a soft lens)
    unless: list[str] = Field(default_factory=list)
    #: acquisition factors (acquisition.toml) under which the cue's words mean nothing for the picture: a
    #: cave at dusk is no low light to a thermal camera, which sees emitted heat (applied by the offline planner:
    #: acquisition reads its factors with this module's helpers, and the package has no import cycles)
    unless_factors: list[str] = Field(default_factory=list)


class Context(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    outdoor: list[str] = Field(min_length=1)
    #: a match whose clause holds one of these is no evidence of the open air ("outside the build chamber")
    outdoor_unless: list[str] = Field(default_factory=list)


class CueBook(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    version: int = 1
    context: Context
    cues: dict[str, Cue]

    def names(self) -> set[str]:
        return {n for c in self.cues.values() for n in c.choose}


@dataclass(frozen=True)
class Hit:
    """One cue found in a description: the corruption it proposes and why, with the quote."""

    cue: str
    name: str  # corruption
    why: str
    keyword: str  # the matched text
    quote: str  # the clause of the description around it
    start: int  # position in the description, for ordering
    #: severity levels the evidence makes plausible; empty: the whole ladder
    severities: tuple[int, ...] = ()


@dataclass(frozen=True)
class _Compiled:
    book: CueBook
    patterns: dict[str, re.Pattern[str]]
    unless: dict[str, re.Pattern[str] | None]
    outdoor: re.Pattern[str]
    outdoor_unless: re.Pattern[str] | None
    fingerprint: str


_pattern = keyword_pattern


@lru_cache(maxsize=4)
def _compile(path: str) -> _Compiled:
    book, raw = load_book(Path(path), CueBook, "planner cues", "backend/planner/cues.toml")
    patterns = {name: _pattern(cue.keywords) for name, cue in book.cues.items()}
    unless = {name: _pattern(cue.unless) if cue.unless else None for name, cue in book.cues.items()}
    outdoor_unless = _pattern(book.context.outdoor_unless) if book.context.outdoor_unless else None
    return _Compiled(book, patterns, unless, _pattern(book.context.outdoor), outdoor_unless, hashlib.sha256(raw).hexdigest()[:12])


def cue_book(path: str | Path | None = None) -> CueBook:
    return _compile(str(path or CUES_PATH)).book


def cues_version(path: str | Path | None = None) -> str:
    return "cues-" + _compile(str(path or CUES_PATH)).fingerprint


def _normalise(text: str) -> str:
    # NFKC only (no case folding): quotes are cut from this string, so they read as written
    return unicodedata.normalize("NFKC", text)


# a comma or point before a digit is part of a number or a name ("20,000 fps", "1.5 m", "H.264"), not a clause's end
_CLAUSE_END = re.compile(r"[;:!?()\n]|[.,](?!\d)")


def clause_bounds(text: str, start: int, end: int) -> tuple[int, int]:
    """Where the clause holding ``text[start:end]`` begins and ends (punctuation delimits clauses)."""
    left = max((m.end() for m in _CLAUSE_END.finditer(text, 0, start)), default=0)
    right_m = _CLAUSE_END.search(text, end)
    return left, right_m.start() if right_m else len(text)


def _clause(text: str, start: int, end: int) -> str:
    left, right = clause_bounds(text, start, end)
    return text[left:right]


# a keyword right after a negation, at most one word between ("without a tripod", "no flash",
# "never at night"), is evidence of the opposite; "not only at night" (two words) still counts
_NEGATED = re.compile(r"\b(?:without|no|not|never|nor|free of|instead of)\W+(?:[\w'-]+\W+)?$", re.IGNORECASE)


def negated(text: str, start: int) -> bool:
    """Whether the word at ``start`` is negated within its clause ("usually without a tripod")."""
    left, _ = clause_bounds(text, start, start)
    return _NEGATED.search(text[left:start]) is not None


def is_evidence(text: str, start: int, end: int, veto: re.Pattern[str] | None, *, negation: bool = True) -> bool:
    """Whether ``text[start:end]`` is evidence: its clause holds no ``veto`` word and (with ``negation``) no
    negation word precedes it. The rule the cues, the acquisition factors, the outdoor context and the
    quantity reader share."""
    if negation and negated(text, start):
        return False
    return veto is None or not veto.search(_clause(text, start, end))


def first_match(pattern: re.Pattern[str], veto: re.Pattern[str] | None, text: str, *, negation: bool = True) -> re.Match[str] | None:
    """The first match of ``pattern`` in ``text`` that is evidence (``is_evidence``)."""
    return next((m for m in pattern.finditer(text) if is_evidence(text, m.start(), m.end(), veto, negation=negation)), None)


def quote_around(text: str, start: int, end: int) -> str:
    """The clause of ``text`` holding ``text[start:end]``, cut to a window of words around it."""
    left, right = clause_bounds(text, start, end)
    # whole words only: widen the match to the spaces around it ("dim" in "dim-lit" -> "dim-lit")
    while start > left and not text[start - 1].isspace():
        start -= 1
    while end < right and not text[end].isspace():
        end += 1
    before = text[left:start].split()[-WORDS_BEFORE:]
    after = text[end:right].split()[:WORDS_AFTER]
    return " ".join([*before, text[start:end], *after])


def find(text: str, catalogue_names: set[str] | None = None, path: str | Path | None = None) -> list[Hit]:
    """Every (cue, corruption) the description calls for, in the order the keywords appear."""
    comp = _compile(str(path or CUES_PATH))
    norm = _normalise(text)
    hits = []
    for name, pattern in comp.patterns.items():
        m = first_match(pattern, comp.unless[name], norm)
        if m is None:
            continue
        cue = comp.book.cues[name]
        quote = quote_around(norm, m.start(), m.end())
        for corruption in cue.choose:
            if catalogue_names is None or corruption in catalogue_names:
                hits.append(Hit(name, corruption, cue.why, m.group(0), quote, m.start()))
    return sorted(hits, key=lambda h: h.start)


def outdoors(text: str, path: str | Path | None = None) -> str | None:
    """The word that puts the scene outdoors, or None for a scene with no sign of being outside."""
    comp = _compile(str(path or CUES_PATH))
    norm = _normalise(text)
    # (a negated outdoor word still counts, as it always has: "no rain" is said of a place rain can reach)
    m = first_match(comp.outdoor, comp.outdoor_unless, norm, negation=False)
    return m.group(0) if m else None

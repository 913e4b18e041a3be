"""Acquisition factors: how a domain's images are taken, read from its description (data in acquisition.toml).

The offline planner's first step. Before it chooses corruptions it asks, as an expert would, how
the pictures come about: a camera on a moving platform, a moving or posing subject, objects
placed by hand, a patient positioned for each image, a digital detector, a sunlit scene. Each
factor found carries the clause of the description that shows it and the corruptions it
produces, each with its mechanism ("the camera rides on a moving vehicle ... -> motion blur: the
platform moves during each exposure"). Matching is by keyword, like the cues and the sanity
rules, so every inference quotes its evidence and the same text always reads the same way; a
keyword is read in context (a clause holding one of the factor's ``unless`` words is no evidence,
and a factor another one rules out is dropped), and the sanity rules fire on these factors.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from domainbench.planner import quantities
from domainbench.planner.cues import Hit, _normalise, first_match, quote_around
from domainbench.planner.keywords import keyword_pattern, load_book

ACQUISITION_PATH = Path(__file__).with_name("acquisition.toml")


CATEGORIES = ("medium", "platform", "light", "optics", "sensor", "transmission", "subject", "footage")


class Implication(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    why: str = Field(min_length=1)
    #: the severity levels this factor makes plausible (the whole ladder unless it says less)
    severities: list[Annotated[int, Field(ge=1, le=5)]] = Field(default_factory=lambda: [1, 2, 3, 4, 5], min_length=1)


class Factor(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    category: Literal["medium", "platform", "light", "optics", "sensor", "transmission", "subject", "footage"]
    label: str = Field(min_length=1)
    keywords: list[str] = Field(min_length=1)
    #: corruption -> how this factor produces it (a sentence, or the sentence with severity levels);
    #: a factor with none still counts (the sanity rules fire on it)
    implies: dict[str, str | Implication] = Field(default_factory=dict)
    unless: list[str] = Field(default_factory=list)
    #: factors whose presence anywhere in the text means this one is not read
    unless_factors: list[str] = Field(default_factory=list)
    #: factors under which the semantic reading (semantic.py) does not read this one; its keywords still do
    semantic_unless_factors: list[str] = Field(default_factory=list)
    #: short, general phrases of how this acquisition is described: the semantic reading
    #: (semantic.py) reads the factor from a clause close to one of them in meaning
    exemplars: list[str] = Field(default_factory=list)

    def implication(self, corruption: str) -> Implication:
        v = self.implies[corruption]
        return Implication(why=v) if isinstance(v, str) else v


class FactorBook(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    version: int = 1
    factors: dict[str, Factor]

    def names(self) -> set[str]:
        return {n for f in self.factors.values() for n in f.implies}

    @model_validator(mode="after")
    def _known_vetoes(self) -> FactorBook:
        for name, f in self.factors.items():
            unknown = sorted((set(f.unless_factors) | set(f.semantic_unless_factors)) - set(self.factors))
            if unknown:
                raise ValueError(f"factor {name!r}: unless_factors or semantic_unless_factors name unknown factors {unknown}")
        return self


@dataclass(frozen=True)
class Finding:
    """One acquisition factor found in a description, with the clause that shows it."""

    factor: str
    label: str
    keyword: str
    quote: str
    start: int


@lru_cache(maxsize=4)
def _compile(path: str):  # -> (book, patterns, unless patterns, fingerprint)
    book, raw = load_book(Path(path), FactorBook, "planner acquisition factors", "backend/planner/acquisition.toml")
    patterns = {name: keyword_pattern(f.keywords) for name, f in book.factors.items()}
    unless = {name: keyword_pattern(f.unless) if f.unless else None for name, f in book.factors.items()}
    # the quantity rules name factors of this file: a misspelt name would silently never read
    quantities.check_factors(set(book.factors))
    # the quantity rules read factors too, so a plan's acquisition version covers their file as well
    return book, patterns, unless, hashlib.sha256(raw + quantities.quantities_version().encode()).hexdigest()[:12]


def factor_book(path: str | Path | None = None) -> FactorBook:
    return _compile(str(path or ACQUISITION_PATH))[0]


def acquisition_version(path: str | Path | None = None) -> str:
    return "acq-" + _compile(str(path or ACQUISITION_PATH))[3]


def read(text: str, path: str | Path | None = None) -> list[Finding]:
    """The acquisition factors the description shows, in the order their evidence appears."""
    return list(_read(text, str(path or ACQUISITION_PATH))[0])


# one plan reads the same description about nine times (each sanity rule, cue and semantic step asks
# which factors it shows): the findings are immutable, so the reading is cached per text
@lru_cache(maxsize=256)
def _read(text: str, path: str) -> tuple[tuple[Finding, ...], tuple[quantities.Reading, ...]]:
    """(factor findings, quantity readings that imply corruptions directly)."""
    book, patterns, unless, _ = _compile(path)
    norm = _normalise(text)
    found = []
    for name, pattern in patterns.items():
        m = first_match(pattern, unless[name], norm)  # "without a tripod" is no fixed mount
        if m is not None:
            found.append(Finding(name, book.factors[name].label, m.group(0), quote_around(norm, m.start(), m.end()), m.start()))
    # then the numbers ("50 lux", "~200 m deep"): a quantity adds a factor the words did not show (the
    # words' finding stays the evidence where both do), and is judged in the context the words give
    by_words = frozenset(f.factor for f in found)
    direct = []
    for r in quantities.read(text, by_words):
        if r.factor is None:
            direct.append(r)
        elif r.factor not in {f.factor for f in found}:
            found.append(Finding(r.factor, r.label, r.keyword, r.quote, r.start))
    # a factor another one rules out (a hand does not hold a fixed camera); judged on what the
    # words show, so the order of the factors in the file does not matter
    present = {f.factor for f in found}
    found = [f for f in found if not set(book.factors[f.factor].unless_factors) & present]
    return tuple(sorted(found, key=lambda f: f.start)), tuple(direct)


def footage(text: str, path: str | Path | None = None) -> Finding | None:
    """The first evidence that the images are frames of video (a ``footage`` factor), or None for still pictures."""
    book = factor_book(path)
    return next((f for f in read(text, path) if book.factors[f.factor].category == "footage"), None)


def implied(text: str, catalogue_names: set[str] | None = None, path: str | Path | None = None) -> list[Hit]:
    """Corruptions the acquisition factors produce, as cue hits whose ``why`` names the factor and the mechanism."""
    book = factor_book(path)
    hits = []
    for f in read(text, path):
        factor = book.factors[f.factor]
        for corruption in factor.implies:
            if catalogue_names is None or corruption in catalogue_names:
                imp = factor.implication(corruption)
                hits.append(Hit(f"acquisition:{f.factor}", corruption, f"{f.label}, and {imp.why}", f.keyword, f.quote, f.start,
                                tuple(imp.severities)))
    # quantities whose rule names the corruptions themselves ("ISO 12800" -> iso_noise)
    qbook = quantities.quantity_book()
    for r in _read(text, str(path or ACQUISITION_PATH))[1]:
        for corruption, why in qbook.rules[r.rule].implies.items():
            if catalogue_names is None or corruption in catalogue_names:
                hits.append(Hit(f"quantity:{r.rule}", corruption, f"{r.label}, and {why}", r.keyword, r.quote, r.start))
    return hits

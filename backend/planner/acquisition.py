"""Acquisition factors: how a domain's images are taken, read from its description (data in acquisition.toml).

The offline planner's first step. Before it chooses corruptions it asks, as an expert would, how
the pictures come about: a camera on a moving platform, a moving or posing subject, objects
placed by hand, a patient positioned for each image, a digital detector, a sunlit scene. Each
factor found carries the clause of the description that shows it and the corruptions it
produces, each with its mechanism ("the camera rides on a moving vehicle ... -> motion blur: the
platform moves during each exposure"). Matching is by keyword, like the cues and the sanity
rules, so every inference quotes its evidence and the same text always reads the same way.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from domainbench.planner.cues import Hit, _clause, _normalise, quote_around
from domainbench.planner.rules import keyword_pattern, load_book

ACQUISITION_PATH = Path(__file__).with_name("acquisition.toml")


class Factor(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    label: str = Field(min_length=1)
    keywords: list[str] = Field(min_length=1)
    #: corruption -> how this factor produces it
    implies: dict[str, str] = Field(min_length=1)
    unless: list[str] = Field(default_factory=list)


class FactorBook(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    version: int = 1
    factors: dict[str, Factor]

    def names(self) -> set[str]:
        return {n for f in self.factors.values() for n in f.implies}


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
    return book, patterns, unless, hashlib.sha256(raw).hexdigest()[:12]


def factor_book(path: str | Path | None = None) -> FactorBook:
    return _compile(str(path or ACQUISITION_PATH))[0]


def acquisition_version(path: str | Path | None = None) -> str:
    return "acq-" + _compile(str(path or ACQUISITION_PATH))[3]


def read(text: str, path: str | Path | None = None) -> list[Finding]:
    """The acquisition factors the description shows, in the order their evidence appears."""
    book, patterns, unless, _ = _compile(str(path or ACQUISITION_PATH))
    norm = _normalise(text)
    found = []
    for name, pattern in patterns.items():
        for m in pattern.finditer(norm):
            veto = unless[name]
            if veto is None or not veto.search(_clause(norm, m.start(), m.end())):
                found.append(Finding(name, book.factors[name].label, m.group(0), quote_around(norm, m.start(), m.end()), m.start()))
                break
    return sorted(found, key=lambda f: f.start)


def implied(text: str, catalogue_names: set[str] | None = None, path: str | Path | None = None) -> list[Hit]:
    """Corruptions the acquisition factors produce, as cue hits whose ``why`` names the factor and the mechanism."""
    book = factor_book(path)
    hits = []
    for f in read(text, path):
        for corruption, how in book.factors[f.factor].implies.items():
            if catalogue_names is None or corruption in catalogue_names:
                hits.append(Hit(f"acquisition:{f.factor}", corruption, f"{f.label}, and {how}", f.keyword, f.quote, f.start))
    return hits

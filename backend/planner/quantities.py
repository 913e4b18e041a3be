"""Quantities: numbers with units in a description, read as the physics of the acquisition (data in quantities.toml).

Keywords read words; engineers often state the acquisition in numbers instead ("galleries kept at 50
lux", "~200 m deep", "a 384x288 microbolometer", "streamed at 800 kbit/s", "ISO 12800", "the belt runs
at 2 m/s"). This module finds number+unit phrases, decides what each one measures from its unit and
the words around it (a length next to "deep" is a depth, next to "visibility" a visibility), and turns
the quantities that cross a threshold of ``quantities.toml`` into acquisition factor findings (so the
factors' implications and the sanity rules apply as for a keyword) or directly into corruptions. Every
reading quotes the number and states the threshold. The evidence rule is the keywords': a quantity
right after a negation or in a clause holding one of the rule's ``unless`` words is no evidence.

A number is read only where its unit says what it is: "ISO 9001", "5 mm screws", "Sony A7 III", a
"1/2.3-inch sensor" and a "1920x1080 monitor" are no acquisition quantities. Misses are preferred to
false readings.
"""

from __future__ import annotations

import hashlib
import math
import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from domainbench.errors import UserInputError
from domainbench.planner.cues import _normalise, clause_bounds, is_evidence, quote_around
from domainbench.planner.keywords import keyword_pattern, load_book

QUANTITIES_PATH = Path(__file__).with_name("quantities.toml")

Kind = Literal["illuminance", "depth", "visibility", "length", "resolution", "megapixels", "pixels_across", "bitrate",
               "scan_resolution", "iso", "gain", "speed", "displacement", "exposure", "angle", "frame_rate", "temperature",
               "bit_depth", "colour_temperature"]
KINDS: tuple[str, ...] = Kind.__args__  # type: ignore[attr-defined]


class Rule(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    quantity: Kind
    at_most: float | None = None
    at_least: float | None = None
    #: an acquisition factor (acquisition.toml) the quantity shows; or, with none, the corruptions in ``implies``
    factor: str | None = None
    implies: dict[str, str] = Field(default_factory=dict)
    why: str = Field(min_length=1)
    context: list[str] = Field(default_factory=list)
    context_factors: list[str] = Field(default_factory=list)
    unless: list[str] = Field(default_factory=list)
    unless_factors: list[str] = Field(default_factory=list)
    unless_quantities: list[Kind] = Field(default_factory=list)

    @model_validator(mode="after")
    def _one_threshold_one_effect(self) -> Rule:
        if (self.at_most is None) == (self.at_least is None):
            raise ValueError(f"a {self.quantity} rule needs exactly one threshold, at_most or at_least")
        if (self.factor is None) == (not self.implies):
            raise ValueError(f"a {self.quantity} rule needs exactly one effect: a factor or implies")
        return self

    def crosses(self, q: Quantity) -> bool:
        # a range counts where any part of it crosses: some pictures are taken there
        if self.at_most is not None:
            return q.low <= self.at_most
        return q.high >= self.at_least  # type: ignore[operator]


class QuantityBook(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    version: int = 1
    rules: dict[str, Rule]


@dataclass(frozen=True)
class Quantity:
    """One number+unit phrase: what it measures, its value (low and high of a range; one number: both) in the kind's
    canonical unit, and where."""

    kind: str
    low: float
    high: float
    text: str  # the phrase as written ("~200 m", "384x288", "1/30 s")
    start: int
    end: int


@dataclass(frozen=True)
class Reading:
    """A quantity that crosses a rule's threshold."""

    rule: str
    factor: str | None
    label: str  # "'50 lux': at 100 lux or less ...": the number quoted and the threshold stated
    keyword: str
    quote: str
    start: int


# ---------------------------------------------------------------------------------------- parsing
_WORD_NUMBERS = {"half a": 0.5, "half an": 0.5, "a quarter of a": 0.25, "one": 1, "two": 2, "three": 3, "four": 4,
                 "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10, "a few": 3}
_NUM = r"(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)"
_WORDNUM = "|".join(sorted((re.escape(w) for w in _WORD_NUMBERS), key=len, reverse=True))
_VALUE = rf"(?:1\s*/\s*{_NUM}|{_NUM}|(?:{_WORDNUM})(?=\s))"
# a bound is read as the number it states: "under 1,000 lux" is as often a preposition (under the lamps'
# 1,000 lux) as a bound, and "more than 10 m deep" says nothing of 50 m; the words are kept for the quote
_QUAL = (r"(?:up to|at most|under|below|less than|no more than|as much as|within|at least|over|above|more than|beyond|down to|"
         r"as low as|as little as|deeper than|~|≈|about|around|approximately|approx\.?|roughly|some|nearly|almost|c\.)")
_RANGE_SEP = r"\s*(?:-|–|—|to)\s*"

#: unit spellings -> (kind, factor to the canonical unit); longer spellings first in the pattern
UNITS: dict[str, tuple[str, float]] = {
    "lux": ("illuminance", 1.0), "lx": ("illuminance", 1.0), "foot candles": ("illuminance", 10.764),
    "footcandles": ("illuminance", 10.764), "foot candle": ("illuminance", 10.764),
    "m/s": ("speed", 1.0), "mps": ("speed", 1.0), "metres per second": ("speed", 1.0), "meters per second": ("speed", 1.0),
    "metres a second": ("speed", 1.0), "meters a second": ("speed", 1.0), "cm/s": ("speed", 0.01), "mm/s": ("speed", 0.001),
    "m/min": ("speed", 1 / 60), "km/h": ("speed", 1 / 3.6), "kmh": ("speed", 1 / 3.6), "kph": ("speed", 1 / 3.6),
    "km/hr": ("speed", 1 / 3.6), "mph": ("speed", 0.44704), "miles per hour": ("speed", 0.44704), "miles an hour": ("speed", 0.44704),
    "knots": ("speed", 0.514444), "knot": ("speed", 0.514444), "kn": ("speed", 0.514444), "kt": ("speed", 0.514444), "kts": ("speed", 0.514444),
    "kbps": ("bitrate", 1e3), "kbit/s": ("bitrate", 1e3), "kbits/s": ("bitrate", 1e3), "kb/s": ("bitrate", 1e3),
    "kilobits per second": ("bitrate", 1e3), "mbps": ("bitrate", 1e6), "mbit/s": ("bitrate", 1e6), "mbits/s": ("bitrate", 1e6),
    "mb/s": ("bitrate", 1e6), "megabits per second": ("bitrate", 1e6), "gbps": ("bitrate", 1e9), "gbit/s": ("bitrate", 1e9),
    "dpi": ("scan_resolution", 1.0), "ppi": ("scan_resolution", 1.0), "dots per inch": ("scan_resolution", 1.0),
    "pixels per inch": ("scan_resolution", 1.0),
    "db": ("gain", 1.0), "decibels": ("gain", 1.0),
    "ms": ("exposure", 1e-3), "milliseconds": ("exposure", 1e-3), "millisecond": ("exposure", 1e-3), "µs": ("exposure", 1e-6),
    "us": ("exposure", 1e-6), "microseconds": ("exposure", 1e-6), "s": ("exposure", 1.0), "sec": ("exposure", 1.0),
    "secs": ("exposure", 1.0), "seconds": ("exposure", 1.0), "second": ("exposure", 1.0),
    "k": ("colour_temperature", 1.0), "kelvin": ("colour_temperature", 1.0),
    "°c": ("temperature", 1.0), "°f": ("temperature", 1.0), "°": ("angle", 1.0), "deg": ("angle", 1.0), "degrees": ("angle", 1.0),
    "degree": ("angle", 1.0),
    "mp": ("megapixels", 1.0), "megapixels": ("megapixels", 1.0), "megapixel": ("megapixels", 1.0), "mpx": ("megapixels", 1.0),
    "mpix": ("megapixels", 1.0),
    "px": ("pixels", 1.0), "pixels": ("pixels", 1.0), "pixel": ("pixels", 1.0),
    "bits per pixel": ("bit_depth", 1.0), "bits per channel": ("bit_depth", 1.0), "bpp": ("bit_depth", 1.0),
    "bits": ("bit_depth", 1.0), "bit": ("bit_depth", 1.0),
    "fps": ("frame_rate", 1.0), "frames per second": ("frame_rate", 1.0), "frames a second": ("frame_rate", 1.0),
    "km": ("length", 1000.0), "m": ("length", 1.0), "metres": ("length", 1.0), "meters": ("length", 1.0), "metre": ("length", 1.0),
    "meter": ("length", 1.0), "cm": ("length", 0.01), "centimetres": ("length", 0.01), "centimeters": ("length", 0.01),
    "mm": ("length", 0.001), "millimetres": ("length", 0.001), "millimeters": ("length", 0.001), "ft": ("length", 0.3048),
    "feet": ("length", 0.3048), "foot": ("length", 0.3048), "inch": ("length", 0.0254), "inches": ("length", 0.0254),
    "miles": ("length", 1609.344), "mile": ("length", 1609.344), "nm": ("length", 1e-9), "µm": ("length", 1e-6),
}
# the text is NFKC-normalised (the micro sign becomes a Greek mu): so are the spellings
UNITS = {unicodedata.normalize("NFKC", k): v for k, v in UNITS.items()}
# units that need a space or a digit right before them: "90s" is a decade, "5s" rarely a time in prose
_SPACED_ONLY = {"s"}
_UNIT = "|".join(re.escape(u).replace(r"\ ", r"[\s\-]") for u in sorted(UNITS, key=len, reverse=True))
_QUANTITY = re.compile(
    rf"(?<![\w./])(?:{_QUAL}\s*)?(?P<a>{_VALUE})(?:{_RANGE_SEP}(?P<b>{_VALUE}))?(?P<sp>[\s\-]*)(?P<unit>{_UNIT})(?![\w/])",
    re.IGNORECASE)
# "ISO 3200", "ISO 800-12800", "ISO up to 6400": the unit before the number
_ISO = re.compile(rf"(?<![\w/])ISO\s*(?:{_QUAL}\s*)?(?P<a>\d{{2,6}})(?:{_RANGE_SEP}(?P<b>\d{{2,6}}))?(?![\w:/.,]\d|[\w/])")
_RESOLUTION = re.compile(r"(?<![\w.,/])(?P<a>\d{2,5})\s*(?:x|×|by)\s*(?P<b>\d{2,5})(?:\s*(?:px|pixels?)\b)?(?!\s*(?:mm|cm|m|km|in|inch|inches|ft|feet|µm|um|nm|mil|metres|meters|°)\b)(?![\wx×/]|[.,]\d)",
                         re.IGNORECASE)
#: the ISO speeds cameras offer (full and third stops): a number in this series after "ISO" is a sensitivity,
#: any other ("ISO 9001", "ISO 12233") is a standard
ISO_SPEEDS = frozenset({
    50, 64, 80, 100, 125, 160, 200, 250, 320, 400, 500, 640, 800, 1000, 1250, 1600, 2000, 2500, 3200, 4000, 5000, 6400, 8000,
    10000, 12800, 16000, 20000, 25600, 32000, 40000, 51200, 64000, 80000, 102400, 128000, 160000, 204800, 256000, 409600})

# words near a length that say what it measures (within the clause, a few words away)
_VISIBILITY = re.compile(r"\b(?:visibility|vis|viz|viewing distance|sight distance)\b", re.IGNORECASE)
# "can see about 2 m", "visible to 3 m": a seeing verb right before the number (a driver "45 m up can see
# the twistlocks" is a height, not a visibility)
_SEE_BEFORE = re.compile(r"\b(?:see|sees|seeing|visible(?: to| for)?)\W+(?:(?:only|just|barely|about|maybe|perhaps|up to|no more than|"
                         r"less than|around|roughly|some|further than|farther than|beyond|more than)\W+)?$", re.IGNORECASE)
_DEPTH_AFTER = re.compile(r"^\W*(?:deep|down|depth|below (?:the )?(?:surface|sea level|waterline)|beneath (?:the )?surface|under(?:water| water| the surface))\b",
                          re.IGNORECASE)
_DEPTH_BEFORE = re.compile(r"\b(?:depths? of|at depths?|depth|deep as|dives? to|descends? to|down to|deeper than)\W*$", re.IGNORECASE)
_ACROSS = re.compile(r"^\W*(?:across|wide|tall|high|long|in diameter|in size|on a side|per (?:face|object|subject|person|character|letter))\b",
                     re.IGNORECASE)
_EXPOSURE_WORDS = re.compile(r"\b(?:exposure\w*|expos\w*|shutter\w*|integration|integrat\w*)\b", re.IGNORECASE)
_GAIN_WORD = re.compile(r"\bgain\b", re.IGNORECASE)
_WORDS_NEAR = 3


def _number(s: str) -> float:
    s = s.strip().lower()
    if s in _WORD_NUMBERS:
        return float(_WORD_NUMBERS[s])
    if "/" in s:
        num, den = (float(p.replace(",", "")) for p in s.split("/"))
        return num / den if den else math.inf
    return float(s.replace(",", ""))


def _near(text: str, start: int, end: int, pattern: re.Pattern[str], words: int = _WORDS_NEAR) -> bool:
    """Whether ``pattern`` occurs within ``words`` words before or after text[start:end], inside its clause."""
    clause_left, clause_right = clause_bounds(text, start, end)
    before = " ".join(text[clause_left:start].split()[-words:])
    after = " ".join(text[end:clause_right].split()[:words])
    return bool(pattern.search(before) or pattern.search(after))


def _kind_of_length(text: str, m: re.Match[str]) -> str:
    clause_left, _ = clause_bounds(text, m.start(), m.end())
    if _near(text, m.start(), m.end(), _VISIBILITY, 4) or _SEE_BEFORE.search(text[clause_left:m.start()]):
        return "visibility"
    if _DEPTH_AFTER.search(text[m.end():m.end() + 40]) or _DEPTH_BEFORE.search(text[clause_left:m.start()]):
        return "depth"
    return "length"


def parse(text: str) -> list[Quantity]:
    """Every number+unit phrase of ``text`` (normalised), with what it measures, in text order."""
    text = _normalise(text)
    out: list[Quantity] = []
    taken: list[tuple[int, int]] = []
    for m in _RESOLUTION.finditer(text):
        a, b = int(m.group("a")), int(m.group("b"))
        # a picture's sides: both at least 32 pixels and at most 3:1 (8x8 blocks, 2 x 4 tiles are no pictures)
        if min(a, b) >= 32 and max(a, b) <= 3 * min(a, b):
            out.append(Quantity("resolution", max(a, b), max(a, b), m.group(0).strip(), m.start(), m.end()))
            taken.append((m.start(), m.end()))
    for m in _ISO.finditer(text):
        a = int(m.group("a"))
        b = int(m.group("b")) if m.group("b") else a
        if a in ISO_SPEEDS and b in ISO_SPEEDS:
            out.append(Quantity("iso", min(a, b), max(a, b), m.group(0).strip(), m.start(), m.end()))
    for m in _QUANTITY.finditer(text):
        if any(s < m.end() and m.start() < e for s, e in taken):
            continue
        unit = re.sub(r"[\s\-]+", " ", m.group("unit").lower())
        if unit in _SPACED_ONLY and not m.group("sp") and "/" not in m.group("a"):
            continue
        if unit not in UNITS:
            continue
        kind, scale = UNITS[unit]
        try:
            a = _number(m.group("a"))
            b = _number(m.group("b")) if m.group("b") else a
        except ValueError:
            continue
        if kind == "length":
            kind = _kind_of_length(text, m)
        elif kind == "pixels":
            if not _ACROSS.search(text[m.end():m.end() + 30]):
                continue
            kind = "pixels_across"
        elif kind == "exposure":
            # a time is an exposure only as a shutter fraction ("1/30 s") or next to exposure words ("30 ms exposures")
            if "/" not in m.group("a") and not _near(text, m.start(), m.end(), _EXPOSURE_WORDS):
                continue
        elif kind == "bit_depth":
            if not m.group("a")[0].isdigit():  # "a few bits of debris" is no bit depth
                continue
        elif kind == "colour_temperature":
            # light sources run from about 1,500 K (a candle) to 10,000 K (blue sky), so only 1,000-20,000 K is read:
            # "200k images", "4K video" and a cryostat's "4 K" are none
            if not 1000 <= min(a, b) <= max(a, b) <= 20000:
                continue
        elif kind == "gain":
            if not _near(text, m.start(), m.end(), _GAIN_WORD, 4):  # "80 dB" of sound is no amplifier gain
                continue
        out.append(Quantity(kind, min(a, b) * scale, max(a, b) * scale, m.group(0).strip(), m.start(), m.end()))
    return sorted(out, key=lambda q: (q.start, q.kind))


def _sentence(text: str, start: int, end: int) -> str:
    left = max((m.end() for m in re.finditer(r"[.!?;\n](?:\s|$)", text[:start])), default=0)
    right_m = re.search(r"[.!?;\n](?:\s|$)", text[end:])
    return text[left:end + right_m.start() if right_m else len(text)]


# ---------------------------------------------------------------------------------------- rules
@lru_cache(maxsize=4)
def _compile(path: str):  # -> (book, context patterns, unless patterns, fingerprint)
    book, raw = load_book(Path(path), QuantityBook, "planner quantities", "backend/planner/quantities.toml")
    context = {n: keyword_pattern(r.context) if r.context else None for n, r in book.rules.items()}
    unless = {n: keyword_pattern(r.unless) if r.unless else None for n, r in book.rules.items()}
    return book, context, unless, hashlib.sha256(raw).hexdigest()[:12]


def quantity_book(path: str | Path | None = None) -> QuantityBook:
    return _compile(str(path or QUANTITIES_PATH))[0]


def quantities_version(path: str | Path | None = None) -> str:
    return "qty-" + _compile(str(path or QUANTITIES_PATH))[3]


def check_factors(known: set[str], path: str | Path | None = None) -> None:
    """Fail with one clear error when a rule names an acquisition factor that ``known`` lacks."""
    path = path or QUANTITIES_PATH
    for name, rule in quantity_book(path).rules.items():
        unknown = sorted({*([rule.factor] if rule.factor else []), *rule.context_factors, *rule.unless_factors} - known)
        if unknown:
            raise UserInputError(f"planner quantities file {path}: rule {name!r} names unknown acquisition factors {unknown}; "
                                 "fix it (the factors are the tables of backend/planner/acquisition.toml)")


def _fmt(x: float) -> str:
    return f"{x:g}"


def _displacements(text: str, qs: list[Quantity]) -> list[Quantity]:
    """Speed times a stated exposure time, for each speed and exposure stated in the same sentence."""
    out = []
    for v in (q for q in qs if q.kind == "speed"):
        sentence = _sentence(text, v.start, v.end)
        for t in (q for q in qs if q.kind == "exposure"):
            if text[t.start:t.end] in sentence and math.isfinite(v.high) and math.isfinite(t.high):
                d = v.high * t.high
                out.append(Quantity("displacement", v.low * t.low, d, f"{v.text} for {t.text} is {_fmt(float(f'{d * 1000:.2g}'))} mm",
                                    v.start, v.end))
    return out


def read(text: str, shown: frozenset[str], path: str | Path | None = None) -> tuple[Reading, ...]:
    """The quantities of ``text`` that cross a rule's threshold, given the acquisition factors its keywords show."""
    return _read(text, shown, str(path or QUANTITIES_PATH))


@lru_cache(maxsize=256)
def _read(text: str, shown: frozenset[str], path: str) -> tuple[Reading, ...]:
    book, context, unless, _ = _compile(path)
    norm = _normalise(text)
    qs = parse(norm)
    if not qs:
        return ()
    qs = qs + _displacements(norm, qs)
    kinds_present = {q.kind for q in qs}
    out = []
    for name, rule in book.rules.items():
        if set(rule.unless_factors) & shown or set(rule.unless_quantities) & kinds_present:
            continue
        for q in qs:
            if q.kind != rule.quantity or not rule.crosses(q) or not is_evidence(norm, q.start, q.end, unless[name]):
                continue
            if rule.context or rule.context_factors:
                ctx = context[name]
                if not (set(rule.context_factors) & shown or (ctx is not None and ctx.search(_sentence(norm, q.start, q.end)))):
                    continue
            label = f"'{q.text}': {rule.why}"
            out.append(Reading(name, rule.factor, label, q.text, quote_around(norm, q.start, q.end), q.start))
            break  # the first evidence is enough, as for keywords
    return tuple(sorted(out, key=lambda r: (r.start, r.rule)))

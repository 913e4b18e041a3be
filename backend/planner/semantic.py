"""The semantic reading of acquisition: each clause of a description matched to exemplar phrases per factor.

Keywords (``acquisition.py``) read the factors a description names in words the data files know. A
new user's description says the same facts in words no list holds ("as the boat rolls" is a moving
platform, "hairs lie over the lesion" something in front of the subject). So each factor of
``acquisition.toml`` may carry ``exemplars``: short, general phrases of how that acquisition is
described. The description is split into clauses; each clause and every exemplar are embedded with
the offline sentence encoder (all-MiniLM-L6-v2, unit vectors); a factor is read when some clause's
cosine similarity to one of its exemplars exceeds its similarity to the closest of a few generic
descriptions of pictures (``GENERIC``) by ``threshold``: the encoder finds any two sentences about
cameras alike, so only what a clause says beyond "a camera takes pictures" is evidence. The plan's reason quotes that clause and
names the exemplar and the similarity, so a semantic reading is as auditable as a keyword one.

Guards, each a reason a similarity is no evidence:
- a clause holding a negation ("without a tripod", "no flash") is not matched at all: a sentence
  encoder reads "without a tripod" as close to "on a tripod";
- a clause holding one of the factor's ``unless`` words is no evidence for it, as for keywords;
- a factor that another factor read (by keyword or here) rules out (``unless_factors``) is dropped, and
  so is one whose exemplars cannot describe the scene those factors show (``semantic_unless_factors``:
  drops splashing onto a lens are no reading under water, where only named silt or fouling counts);
- only the corruptions a factor implies are added, never a sanity rule's domain kind or a physics
  need: those stay on keywords, so a looser reading can add a choice but never lift a prohibition
  or trigger a rule's requirements.

The threshold was chosen by leave-one-category-out cross-validation over the benchmark's domains
(``python benchmarks/planner_agreement.py --loco``; docs/planner.md gives the numbers).
Deterministic: the same text always gives the same findings (the encoder runs on the CPU).
"""

from __future__ import annotations

import hashlib
import re
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from domainbench.planner import acquisition
from domainbench.planner.cues import Hit, _normalise
from domainbench.planner.keywords import keyword_pattern


#: how far a clause's cosine similarity to a factor's exemplar must exceed its similarity to a generic
#: description of pictures (``GENERIC``) for the clause to show the factor (leave-one-category-out choice)
THRESHOLD = 0.225
#: and how close it must be to the exemplar itself: over the 900 seen domains, 19 of 503 readings fell below
#: 0.33; a quarter of them bore a required corruption (each also found another way) against a third and more
#: above, and one read "only part of the pile is ever sharp" as dust billowing (fog on a desk)
MIN_SIMILARITY = 0.33
#: what any description of a camera or a dataset says: every clause is scored against its closest of these
#: first, so a clause that merely speaks of cameras and pictures ("a camera records the scene", close to
#: "the camera is mounted on a moving vehicle" at 0.55) shows nothing; only what it says beyond them counts
GENERIC = (
    "a camera takes pictures of the scene", "photographs of objects", "images collected for a dataset",
    "video of the scene", "cameras monitor the site", "images are labelled by category", "photos taken by people",
    "high-resolution colour images", "an inspection camera checks the products", "pictures of animals and people",
)

# sentence ends, then clause boundaries: punctuation, dashes and the conjunctions that start a new
# statement about the acquisition ("..., as the boat rolls", "... while cows shift their weight")
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_CLAUSE = re.compile(r"\s*[,;:()]\s*|\s+[-–—]\s+|\s+(?:but|while|whereas|as|when|where|which|so|because|and then)\s+", re.IGNORECASE)
# a phrase about the light, the optics or the medium often hangs off the subject ("... pipes under bright
# ring lights", "... filmed through sea spray"): it is split off too, keeping its preposition
_PHRASE = re.compile(r"\s+(?=(?:with|under|through|using|via|lit by|behind)\s)", re.IGNORECASE)
_NEGATION = re.compile(r"\b(?:without|no|not|never|nor|none|free of|instead of|rather than)\b|n't\b", re.IGNORECASE)
MAX_CLAUSES = 64


@dataclass(frozen=True)
class Clause:
    text: str
    start: int


def clauses(text: str) -> list[Clause]:
    """The clauses of a description (two words or more), with their offsets, in text order, at most ``MAX_CLAUSES``."""
    norm = _normalise(text)
    out: list[Clause] = []
    seen: set[str] = set()
    pos = 0
    for sentence in _SENTENCE.split(norm):
        if not sentence:
            continue
        s_start = norm.find(sentence, pos)
        pos = s_start + len(sentence)
        c_pos = 0
        for part in [p for c in _CLAUSE.split(sentence) if c for p in _PHRASE.split(c)]:
            if not part:
                continue
            c_start = sentence.find(part, c_pos)
            c_pos = c_start + len(part)
            piece = part.strip(" .!?\"'")
            if len(piece.split()) < 2 or piece.lower() in seen:
                continue
            seen.add(piece.lower())
            out.append(Clause(piece, s_start + c_start))
            if len(out) >= MAX_CLAUSES:
                return out
    return out


@dataclass(frozen=True)
class Match:
    """The closest exemplar of one factor to one clause of the description."""

    factor: str
    clause: Clause
    exemplar: str
    similarity: float
    #: similarity above the clause's closest generic description (``GENERIC``): what the decision rests on
    margin: float


_lock = threading.Lock()
_exemplar_cache: dict[str, tuple[np.ndarray, list[tuple[str, str]]]] = {}


def _exemplars(path: str | Path | None = None) -> tuple[np.ndarray, list[tuple[str, str]]]:
    """Unit embeddings of every factor's exemplars, with (factor, exemplar) per row; cached in memory and on disk."""
    from domainbench.planner.sentence_encoder import cached_embed

    book = acquisition.factor_book(path)
    owners = [(name, e.strip()) for name, f in book.factors.items() for e in f.exemplars if e.strip()]
    owners += [("", g) for g in GENERIC]  # the generic rows, factor ""
    texts = [e for _, e in owners]
    key = hashlib.sha256("\n".join(f"{n}\t{e}" for n, e in owners).encode("utf-8")).hexdigest()[:16]
    with _lock:
        hit = _exemplar_cache.get(key)
    if hit is not None:
        return hit
    mat = cached_embed(f"minilm-exemplars-{key}.npz", texts)
    with _lock:
        _exemplar_cache[key] = (mat, owners)
    return mat, owners


def best_matches(text: str, path: str | Path | None = None) -> dict[str, Match]:
    """For every factor with exemplars, its (clause, exemplar) of largest margin over the generic descriptions, whatever it is.

    Clauses with a negation and clauses holding one of the factor's ``unless`` words take no part.
    """
    from domainbench.planner.sentence_encoder import embed

    book = acquisition.factor_book(path)
    parts = [c for c in clauses(text) if not _NEGATION.search(c.text)]
    mat, owners = _exemplars(path)
    if not parts or not owners:
        return {}
    sims = embed([c.text for c in parts]) @ mat.T  # (clauses, exemplars)
    out: dict[str, Match] = {}
    factor_of = np.array([n for n, _ in owners])
    generic = sims[:, factor_of == ""].max(axis=1)  # per clause
    margins = sims - generic[:, None]
    for name, f in book.factors.items():
        cols = np.flatnonzero(factor_of == name)
        if not cols.size:
            continue
        veto = keyword_pattern(f.unless) if f.unless else None
        rows = [i for i, c in enumerate(parts) if veto is None or not veto.search(c.text)]
        if not rows:
            continue
        block = margins[np.ix_(rows, cols)]
        r, k = np.unravel_index(int(np.argmax(block)), block.shape)
        out[name] = Match(name, parts[rows[r]], owners[cols[k]][1], float(sims[rows[r], cols[k]]), float(block[r, k]))
    return out


def read(text: str, threshold: float = THRESHOLD, path: str | Path | None = None) -> list[Match]:
    """The factors the description shows by meaning but not by keyword, each with the clause it rests on.

    A factor read by keyword is left to the keyword reading (its quote is the words themselves); a
    factor that any factor read (either way) rules out is dropped.
    """
    book = acquisition.factor_book(path)
    by_keyword = {f.factor for f in acquisition.read(text, path)}
    found = [m for name, m in best_matches(text, path).items()
             if name not in by_keyword and m.margin >= threshold and m.similarity >= MIN_SIMILARITY]
    present = by_keyword | {m.factor for m in found}
    found = [m for m in found
             if not set(book.factors[m.factor].unless_factors) & present
             and not set(book.factors[m.factor].semantic_unless_factors) & present]
    return sorted(found, key=lambda m: (m.clause.start, m.factor))


def implied(text: str, catalogue_names: set[str] | None = None, threshold: float = THRESHOLD,
            path: str | Path | None = None) -> list[Hit]:
    """Corruptions the factors read by meaning produce, as hits whose reason quotes the clause and the exemplar."""
    book = acquisition.factor_book(path)
    hits = []
    for m in read(text, threshold, path):
        factor = book.factors[m.factor]
        for corruption in factor.implies:
            if catalogue_names is not None and corruption not in catalogue_names:
                continue
            imp = factor.implication(corruption)
            why = (f"{factor.label} (the clause reads like '{m.exemplar}', similarity {m.similarity:.2f}, "
                   f"{m.margin:.2f} above a generic description of pictures), and {imp.why}")
            hits.append(Hit(f"semantic:{m.factor}", corruption, why, m.clause.text, m.clause.text, m.clause.start,
                            tuple(imp.severities)))
    return hits

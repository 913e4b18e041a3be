"""The offline planner: an expert's reading of the description, then semantic matching.

Method (deterministic, no network):
0. Cues (``cues.toml``): phrases that call for a corruption the way an expert reads them
   ("handheld phone photos" -> rotation, perspective, motion blur; "at night" -> low light and
   sensor noise; "motion blur" -> motion_blur). Every cue found is chosen, unless the sanity
   rules forbid it, and its reason quotes the clause of the description holding the phrase.
   Then acquisition factors (``acquisition.toml``): how the images are taken (a camera on a moving
   platform, moving or posing subjects, objects placed by hand, a patient positioned for each
   image, a digital detector, a sunlit scene), each mapped to the corruptions it produces with
   the mechanism as the reason ("'night driving': the camera rides on a moving vehicle ..., and
   the platform moves during each exposure" -> motion_blur). A phrase naming the effect itself
   (a cue) is quoted in preference to an inferred factor. Then the factors the clauses show by
   meaning but no keyword names (``semantic.py``: each clause against short exemplar phrases per
   factor, by MiniLM similarity above a generic description of pictures); they add the corruptions
   their factor implies, quoting the clause, and never fire a sanity rule.
1. The description is split into chunks: the whole text, each sentence, and each clause of a
   sentence (split at commas, semicolons, "and"/"or" lists are kept whole). Clauses let a short
   phrase such as "at night in heavy rain" meet a situation on its own terms instead of being
   diluted by the rest of the paragraph.
2. Chunks and every catalogue text (description and each situation) are embedded with
   all-MiniLM-L6-v2 (unit vectors). sim[chunk, c] is the best cosine similarity between the
   chunk and corruption c's description or situations. Specificity is sim minus the chunk's
   mean sim over the whole catalogue; a corruption's score is its best specificity over chunks,
   and its reason quotes that chunk and c's closest situation with the raw similarity.
3. Corruptions the sanity rules forbid for the detected domain kinds are removed; required ones
   are always kept. The semantic matches may add at most ``max_semantic`` more, with
   specificity >= ``specificity`` and similarity >= ``threshold``, best first, within two
   limits an expert keeps: weather only where the description is outdoors (or names that
   weather), and geometric variation (rotations, flips, warps) only where a cue calls for it,
   since a similarity score cannot tell whether camera or subject pose varies; and it only
   fills gaps, in families no cue has spoken to, and only for a description whose cues and
   factors explain fewer than ``min_optional`` choices (a situation that merely sounds alike is
   no reason once the text says how its images are taken). At least ``min_optional`` explained
   or matched choices are made.
4. Severities: a cued or required corruption gets the full ladder 1..5 (the description or the
   rules name it); a semantic match grows with its similarity, the mild levels 1..3 for a weak
   match, all five for a strong one. Non-ordinal corruptions (flips) get level 1 only.

The provider (``plan(provider="offline")``) runs one sample: the plan is a deterministic reading of the
text, and ten copies of it say nothing more. ``OfflinePlanner.run(text, n)`` keeps the perturbation
study: sample 0 uses all chunks; samples 1..N-1 drop each sentence chunk with
probability 0.3 (the whole text always stays) and add N(0, 0.01) noise to the specificity, with a
generator seeded from the text, then the same majority vote as the LLM planner runs. The
frequencies therefore say how stable each choice is under rephrasing-like perturbations, and
the plan is the same every time for the same text.
"""

from __future__ import annotations

import hashlib
import re
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from domainbench.records.config import CorruptionChoice
from domainbench.planner import acquisition, compositions, cues, rules, semantic
from domainbench.planner.sentence_encoder import cached_embed, embed
from domainbench.planner.catalogue import Catalogue
from domainbench.planner.llm import required_choice
from domainbench.planner.vote import VoteResult, majority_vote

MODEL_NAME = "all-MiniLM-L6-v2"


@dataclass(frozen=True)
class OfflineParams:
    threshold: float = 0.33  # minimum cosine similarity of an optional choice
    specificity: float = 0.12  # minimum similarity above the chunk's mean over the catalogue
    min_optional: int = 2
    max_semantic: int = 3  # semantic matches beyond the cued and required choices
    weak: float = 0.35  # score at or below which only levels 1..3 are used
    strong: float = 0.60  # score at or above which all five levels are used
    drop_prob: float = 0.3
    jitter: float = 0.01
    #: cosine similarity at or above which a clause shows an acquisition factor by meaning (semantic.py)
    semantic: float = semantic.THRESHOLD


_lock = threading.Lock()
_catalogue_cache: dict[str, tuple[np.ndarray, list[tuple[int, str]]]] = {}


def catalogue_embeddings(catalogue: Catalogue) -> tuple[np.ndarray, list[tuple[int, str]]]:
    """Embeddings of every description and situation, with (entry index, text) per row.

    Cached in memory and on disk (keyed by the catalogue's content hash, so any edit to a
    description or situation re-embeds); a cache that cannot be read or written is ignored.
    """
    key = catalogue.fingerprint()
    with _lock:
        hit = _catalogue_cache.get(key)
    if hit is not None:
        return hit
    owners: list[tuple[int, str]] = []
    for i, e in enumerate(catalogue.entries):
        owners.append((i, e.description.strip()))
        owners.extend((i, s.strip()) for s in e.situations if s.strip())
    mat = cached_embed(f"minilm-catalogue-{key}.npz", [t for _, t in owners])
    with _lock:
        _catalogue_cache[key] = (mat, owners)
    return mat, owners


_SENTENCE = re.compile(r"(?<=[.!?。！？])\s+|\n+")
_CLAUSE = re.compile(r"\s*[,;:()]\s*|\s+-\s+|\s+(?:but|while|whereas|with|where|when)\s+", re.IGNORECASE)


MAX_CHUNKS = 96


def chunks(text: str) -> tuple[list[str], list[int]]:
    """(chunks, sentence id per chunk); chunk 0 is the whole text (sentence id -1).

    Repeated chunks are embedded once (a pasted paragraph repeated many times costs nothing
    extra) and at most ``MAX_CHUNKS`` are kept, in text order.
    """
    out = [text.strip()]
    sid = [-1]
    seen = {out[0]}
    sentences = [s.strip() for s in _SENTENCE.split(text) if s and s.strip()]
    for k, s in enumerate(sentences):
        clauses = [c.strip() for c in _CLAUSE.split(s) if c and len(c.split()) >= 2]
        for c in [s, *clauses]:
            if c not in seen and len(out) < MAX_CHUNKS:
                seen.add(c)
                out.append(c)
                sid.append(k)
    return out, sid


@dataclass
class Match:
    score: float
    chunk: str
    situation: str


#: families the semantic match may only choose when a cue asks (pose is not a similarity)
CUED_ONLY_FAMILIES = frozenset({"geometric"})
#: families that need an outdoor scene (or an explicit cue) to be chosen by similarity
OUTDOOR_FAMILIES = frozenset({"weather"})
#: corruptions whose physics similarity cannot show (speckle needs coherent illumination: radar, sonar,
#: ultrasound, a laser): chosen only where a cue or a factor names it
CUED_ONLY = frozenset({"speckle_noise"})


#: a temporal corruption that is the moving form of an image corruption: proposed for footage whose still plan has it
MOVING_FORM = {"rain": "moving_rain", "snow": "moving_snow"}


def temporal_choices(domain_text: str, catalogue: Catalogue, still: list[CorruptionChoice]) -> list[CorruptionChoice]:
    """Temporal corruptions for a description of video footage, each with its reason; none for still pictures.

    Footage is read from the text (a ``footage`` acquisition factor: video, dash-cam, drone, CCTV, endoscope,
    broadcast, body cam, robot camera, unless the clause speaks of photos or stills). It brings the
    corruptions of video itself (compression across the group of pictures, dropped frames); the other
    factors' temporal implications (a hand or a vehicle shakes the camera, mains lamps flicker, dirt builds
    up on the lens) and the moving form of the weather the still plan chose are added. Whatever the sanity
    rules forbid for the still form (rain underground) is left out for the moving form too.
    """
    names = set(catalogue.temporal_names)
    evidence = acquisition.footage(domain_text) if names else None
    if evidence is None:
        return []
    hits: dict[str, cues.Hit] = {}
    for h in acquisition.implied(domain_text, names):
        hits.setdefault(h.name, h)
    req = rules.requirements(domain_text, catalogue.still().names)
    chosen = {c.name: c for c in still}
    out = []
    for e in catalogue.entries:
        if not e.temporal:
            continue
        still_form = next((k for k, v in MOVING_FORM.items() if v == e.name), None)
        if still_form is not None and still_form in req.forbidden:
            continue
        full = list(range(1, 6)) if e.ordinal else [1]
        hit = hits.get(e.name)
        if hit is not None:
            reason = f"The description says '{hit.quote}': {hit.why}."
            levels = [s for s in hit.severities if e.ordinal] or full
        elif still_form is not None and still_form in chosen:
            reason = (f"The plan has {still_form} and the description says '{evidence.quote}' (the pictures are frames "
                      f"of video): in video the {still_form} moves from frame to frame.")
            levels = full
        else:
            continue
        out.append(CorruptionChoice(name=e.name, severities=levels, reason=reason[0].upper() + reason[1:]))
    return out


@dataclass(frozen=True)
class Reading:
    """What the description says outright: cue hits per corruption, and whether it is outdoors."""

    hits: dict[str, cues.Hit]
    outdoor: str | None


def _quote(text: str, limit: int = 70) -> str:
    t = " ".join(text.split())
    return t if len(t) <= limit else t[: limit - 1].rsplit(" ", 1)[0] + "…"


class OfflinePlanner:
    def __init__(self, catalogue: Catalogue, params: OfflineParams | None = None):
        self.catalogue = catalogue
        self.p = params or OfflineParams()

    def similarities(self, text: str) -> tuple[np.ndarray, list[str], list[int], np.ndarray, list[str]]:
        """Scores per (chunk, corruption) and, for the reason, the best-matching situation.

        Returns (best cosine over description + situations, chunks, sentence ids,
        index into ``situations`` of the closest situation per cell, situations).
        The description takes part in the score (it carries the generic vocabulary: "dim
        light", "compressed") but reasons always quote a situation.
        """
        cat_mat, owners = catalogue_embeddings(self.catalogue)
        ch, sid = chunks(text)
        sims = embed(ch) @ cat_mat.T  # (chunks, catalogue texts)
        n = len(self.catalogue.entries)
        owner_idx = np.array([i for i, _ in owners])
        is_desc = np.array([t == self.catalogue.entries[i].description.strip() for i, t in owners])
        best = np.full((len(ch), n), -1.0, dtype=np.float32)
        quote = np.zeros((len(ch), n), dtype=np.int64)
        for j in range(n):
            cols = np.flatnonzero(owner_idx == j)
            best[:, j] = sims[:, cols].max(axis=1)
            sit = cols[~is_desc[cols]] if (~is_desc[cols]).any() else cols
            quote[:, j] = sit[sims[:, sit].argmax(axis=1)]
        return best, ch, sid, quote, [t for _, t in owners]

    def _allowed_semantic(self, i: int, reading: Reading) -> bool:
        e = self.catalogue.entries[i]
        if e.family in CUED_ONLY_FAMILIES or e.name in CUED_ONLY:
            return False
        return e.family not in OUTDOOR_FAMILIES or reading.outdoor is not None

    def _select(self, spec: np.ndarray, raw: np.ndarray, req: rules.Requirements, reading: Reading) -> list[int]:
        names = self.catalogue.names
        required = [i for i, nm in enumerate(names) if nm in req.required]
        free = [i for i, nm in enumerate(names) if nm not in req.forbidden and nm not in req.required]
        cued = sorted((i for i in free if names[i] in reading.hits), key=lambda i: (reading.hits[names[i]].start, i))
        # the semantic match fills gaps: a family the description already speaks to through a
        # cue ("noisy" -> iso_noise) gets no look-alike from similarity (speckle_noise)
        by_name = self.catalogue.by_name()
        cued_families = {by_name[nm].family for nm in reading.hits if nm in by_name and nm not in req.forbidden}
        ranked = sorted(
            (i for i in free if i not in cued and self._allowed_semantic(i, reading)
             and self.catalogue.entries[i].family not in cued_families),
            key=lambda i: (-spec[i], i),
        )
        p = self.p
        # similarity is a fallback for descriptions that say little about how their images are
        # taken: once the cues and acquisition factors give min_optional choices, it adds nothing
        # (a situation that merely sounds alike, "autonomous car in a blizzard", is not a reason)
        # (what the text explains counts whether or not a rule also requires it)
        reasoned = len(cued) + sum(1 for nm in req.required if nm in reading.hits)
        room = p.max_semantic if reasoned < p.min_optional else 0
        semantic = [i for i in ranked if spec[i] >= p.specificity and raw[i] >= p.threshold][:room]
        short = p.min_optional - reasoned - len(semantic)
        if short > 0:
            semantic += [i for i in ranked if i not in semantic][:short]
        return required + cued + semantic

    def _severities(self, score: float, ordinal: bool) -> list[int]:
        if not ordinal:
            return [1]
        t = (score - self.p.weak) / (self.p.strong - self.p.weak)
        top = 3 + int(round(2 * float(np.clip(t, 0.0, 1.0))))
        return list(range(1, top + 1))

    @staticmethod
    def _says(hit: cues.Hit) -> str:
        return f"the description says '{hit.quote}': {hit.why}"

    def _plan(self, spec: np.ndarray, matches: list[Match], req: rules.Requirements, reading: Reading) -> list[CorruptionChoice]:
        raw = np.array([m.score for m in matches])
        out = []
        for i in self._select(spec, raw, req, reading):
            e = self.catalogue.entries[i]
            m = matches[i]
            hit = reading.hits.get(e.name)
            full = list(range(1, 6)) if e.ordinal else [1]
            if e.name in req.required:
                choice = required_choice(e, req.required[e.name])
                if hit is not None:  # the rule is also what the description says: quote it
                    choice = choice.model_copy(update={"reason": choice.reason[:-1] + "; " + self._says(hit) + "."})
                choice = choice.model_copy(update={"severities": full})
            elif hit is not None:
                reason = self._says(hit)
                levels = [s for s in hit.severities if e.ordinal] or full
                choice = CorruptionChoice(name=e.name, severities=levels, reason=reason[0].upper() + reason[1:] + ".")
            else:
                choice = CorruptionChoice(
                    name=e.name,
                    severities=self._severities(m.score, e.ordinal),
                    reason=(
                        f"The description ('{_quote(m.chunk)}') matches the situation "
                        f"'{_quote(m.situation)}' (similarity {m.score:.2f})."
                    ),
                )
            out.append(choice)
        return out

    def run(self, domain_text: str, samples: int) -> VoteResult:
        full = self.catalogue
        # the image corruptions are chosen from the still catalogue alone, exactly as before temporal ones
        # existed (they would shift the semantic match's per-chunk mean); footage then adds its own
        self.catalogue = full.still()
        try:
            vote = self._run_still(domain_text, samples)
        finally:
            self.catalogue = full
        temporal = temporal_choices(domain_text, full, vote.chosen)
        vote.chosen = [*vote.chosen, *temporal]
        picked = {c.name for c in temporal}
        vote.frequencies = {**vote.frequencies, **{n: float(n in picked) for n in full.temporal_names}}
        return vote

    def _run_still(self, domain_text: str, samples: int) -> VoteResult:
        names = self.catalogue.names
        n = len(names)
        req = rules.requirements(domain_text, names)
        hits: dict[str, cues.Hit] = {}
        book = cues.cue_book()
        shown = {f.factor for f in acquisition.read(domain_text)}
        for h in cues.find(domain_text, set(names)):
            if not set(book.cues[h.cue].unless_factors) & shown:
                hits.setdefault(h.name, h)  # the first phrase that calls for it
        # then what follows from how the images are taken (a phrase naming the effect itself wins)
        for h in acquisition.implied(domain_text, set(names)):
            hits.setdefault(h.name, h)
        # then what the clauses say in words no keyword list holds, read by meaning
        for h in semantic.implied(domain_text, set(names), self.p.semantic):
            hits.setdefault(h.name, h)
        reading = Reading(hits, cues.outdoors(domain_text))
        best, ch, sid, quote, texts = self.similarities(domain_text)
        # Specificity: how much better a corruption matches a chunk than the average corruption
        # does. Generic chunks ("taken with phones") resemble many camera situations a little;
        # centring per chunk keeps them from crowding out the specific matches.
        centred = best - best.mean(axis=1, keepdims=True)
        seed = int.from_bytes(hashlib.sha256(domain_text.encode("utf-8")).digest()[:8], "little")
        rng = np.random.default_rng(seed)
        sentence_ids = sorted({s for s in sid if s >= 0})

        def scores_for(rows: np.ndarray) -> tuple[np.ndarray, list[Match]]:
            r = rows[centred[rows].argmax(axis=0)]
            cols = np.arange(n)
            spec = centred[r, cols]
            # the reason quotes the best sentence or clause, not the whole text (chunk 0), so it
            # points at the part of the description that matched
            parts = rows[rows != 0] if (rows != 0).any() else rows
            q = parts[centred[parts].argmax(axis=0)]
            ms = [Match(float(best[r[j], j]), ch[q[j]], texts[quote[q[j], j]]) for j in range(n)]
            return spec, ms

        all_rows = np.arange(len(ch))
        plans = []
        for k in range(samples):
            if k == 0:
                spec, ms = scores_for(all_rows)
            else:
                keep = {s for s in sentence_ids if rng.random() >= self.p.drop_prob}
                rows = np.array([r for r in all_rows if sid[r] == -1 or sid[r] in keep])
                spec, ms = scores_for(rows)
                spec = spec + rng.normal(0.0, self.p.jitter, size=n)
            plans.append(self._plan(spec, ms, req, reading))
        vote = majority_vote(plans, names)
        # Reasons come from the full-text sample (sample 0) when it chose the corruption, so the
        # stored explanation quotes the whole description; severities are the voted ones.
        first = {c.name: c for c in plans[0]}
        vote.chosen = [
            first[c.name].model_copy(update={"severities": c.severities}) if c.name in first else c for c in vote.chosen
        ]
        # where the text stacks factors (night + rain + a moving car), their corruptions together
        vote.compositions = compositions.propose(domain_text, hits, [c.name for c in vote.chosen], self.catalogue)
        return vote

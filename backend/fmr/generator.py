"""Algorithm 1 of the FMR paper with the domain's corruption catalogue as the perturbation family.

A perturbation is an ordered composition of the domain's corruptions, each at a level in
(0, 1]: level t puts every continuous parameter at ``weakest + t × (strongest - weakest)`` of
the corruption's ``ranges`` (corruptions without ranges climb their severity ladder instead).
Starting from the clean image, each step proposes up to ``candidates`` perturbations, each
raising one corruption's level by ``step_size`` (a corruption not yet applied joins the
composition), scores them all with the tested model and takes the one whose cross-entropy is
highest. The step is accepted only while the oracle's majority vote still gives the true
label; the first rejection ends the search and the last accepted image is kept.

Every random choice comes from per-image seeds (``domainbench.engine.jobs.image_seeds``), so an
image's result depends on the run seed and its dataset index only, never on the batch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from domainbench import corruptions
from domainbench.engine.jobs import image_seeds
from domainbench.fmr.oracle import Oracle
from domainbench.fmr.tested import TestedModel

#: losses are compared after rounding: a batch of another size may change the last float bits,
#: and that must not change which candidate wins
LOSS_DECIMALS = 5


@dataclass(frozen=True)
class SearchConfig:
    seed: int
    budget: int
    candidates: int = 4
    step_size: float = 0.2


@dataclass
class SearchResult:
    """Per image of a batch: what the search kept and how it got there."""

    #: the kept image: the last accepted one; the clean image where no step was accepted or
    #: the oracle rejects even the clean image (Algorithm 1's fallback, which PA counts)
    images: np.ndarray
    #: accepted steps per image
    steps: np.ndarray
    #: the oracle agrees with the label on the clean image: only these images are returned
    validated: np.ndarray
    oracle_clean: np.ndarray
    oracle_final: np.ndarray
    #: the applied perturbation per image: [(corruption or parameter, level), …]
    ops: list[list[tuple[str, float]]] = field(default_factory=list)

    def returned(self) -> tuple[np.ndarray, np.ndarray]:
        """(positions, images) the generator returns: never one the oracle rejects."""
        pos = np.flatnonzero(self.validated)
        return pos, self.images[pos]


def cross_entropy(logits: torch.Tensor, labels: np.ndarray) -> np.ndarray:
    loss = F.cross_entropy(logits.double(), torch.as_tensor(labels, dtype=torch.long), reduction="none")
    return np.round(loss.numpy(), LOSS_DECIMALS)


def level_params(name: str, level: float, overrides: dict[str, object] | None = None) -> dict[str, object]:
    """The corruption's parameters at ``level`` in (0, 1] of its continuous range (or ladder)."""
    spec = corruptions.get(name)
    if spec.ranges:
        point: dict[str, object] = {**spec.ladder[3], **(overrides or {})}
        for key, (a, b) in spec.ranges.items():
            point[key] = spec._cast(key, a + level * (b - a))
        return spec.validate(point)
    severity = min(5, max(1, math.ceil(5 * level - 1e-9)))
    return {**spec.severity_params(severity), **(overrides or {})}


class Renderer:
    """Applies a composition to clean images, one corruption seed per (image, corruption)."""

    def __init__(self, family: Sequence[str], seed: int, indices: np.ndarray,
                 overrides: dict[str, dict[str, object]] | None = None) -> None:
        self.family = list(family)
        self.overrides = overrides or {}
        self.seeds = {c: image_seeds(seed, f"fmr:{c}", 0, indices) for c in self.family}
        self._params: dict[tuple[str, float], dict[str, object]] = {}

    def params(self, name: str, level: float) -> dict[str, object]:
        key = (name, round(level, 9))
        if key not in self._params:
            self._params[key] = level_params(name, level, self.overrides.get(name))
        return self._params[key]

    def render(self, clean: np.ndarray, pos: int, ops: Sequence[tuple[str, float]]) -> np.ndarray:
        img = clean
        for name, level in ops:
            img = corruptions.corrupt_batch(img[None], name, params=self.params(name, level), seeds=[self.seeds[name][pos]])[0]
        return img


def _raise(ops: list[tuple[str, float]], name: str, step: float, ordinal: bool) -> list[tuple[str, float]]:
    out = list(ops)
    for j, (n, lv) in enumerate(out):
        if n == name:
            out[j] = (n, min(1.0, round(lv + step, 9)) if ordinal else 1.0)
            return out
    return out + [(name, 1.0 if not ordinal else min(1.0, round(step, 9)))]


def greedy_search(images: np.ndarray, labels: np.ndarray, indices: np.ndarray, tested: TestedModel, oracle: Oracle,
                  clean_votes: np.ndarray, family: Sequence[str], cfg: SearchConfig,
                  overrides: dict[str, dict[str, object]] | None = None) -> SearchResult:
    """Algorithm 1, greedy over the corruption catalogue, for one batch of labelled images."""
    n = len(images)
    labels = np.asarray(labels, dtype=np.int64)
    validated = oracle.agrees(clean_votes, labels)
    result = SearchResult(images=images.copy(), steps=np.zeros(n, dtype=np.int64), validated=validated,
                          oracle_clean=clean_votes, oracle_final=clean_votes.copy(), ops=[[] for _ in range(n)])
    if cfg.budget == 0 or not family:
        return result
    ordinal = {c: corruptions.get(c).ordinal for c in family}
    renderer = Renderer(family, cfg.seed, indices, overrides)
    active = validated.copy()
    for t in range(cfg.budget):
        pos_active = np.flatnonzero(active)
        if len(pos_active) == 0:
            break
        pick_seeds = image_seeds(cfg.seed, "fmr:candidates", t, indices[pos_active])
        cand_pos, cand_ops, cand_imgs = [], [], []
        for p, s in zip(pos_active, pick_seeds):
            levels = dict(result.ops[p])
            open_ = [c for c in family if levels.get(c, 0.0) < 1.0]
            if not open_:
                active[p] = False
                continue
            if len(open_) > cfg.candidates:
                rng = np.random.default_rng(s)
                open_ = [open_[j] for j in sorted(rng.choice(len(open_), cfg.candidates, replace=False))]
            for c in open_:
                ops = _raise(result.ops[p], c, cfg.step_size, ordinal[c])
                cand_pos.append(p)
                cand_ops.append(ops)
                cand_imgs.append(renderer.render(images[p], p, ops))
        if not cand_pos:
            break
        cp = np.asarray(cand_pos)
        loss = cross_entropy(tested.logits(np.stack(cand_imgs)), labels[cp])
        best: dict[int, int] = {}
        for j, p in enumerate(cand_pos):  # first candidate wins a tie: deterministic
            if p not in best or loss[j] > loss[best[p]]:
                best[p] = j
        chosen = sorted(best)
        picks = [best[p] for p in chosen]
        new_imgs = np.stack([cand_imgs[j] for j in picks])
        votes = oracle.votes(new_imgs)
        ok = oracle.agrees(votes, labels[chosen])
        for k, (p, j) in enumerate(zip(chosen, picks)):
            if ok[k]:
                result.images[p] = new_imgs[k]
                result.ops[p] = cand_ops[j]
                result.oracle_final[p] = votes[k]
                result.steps[p] += 1
            else:
                active[p] = False  # Algorithm 1: the first rejection ends this image's search
    return result

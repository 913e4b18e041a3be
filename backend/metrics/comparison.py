"""Paired comparison of models on the same images, and the plain verdict it supports: one rule for "beats".

The rule (docs/reading-the-numbers.md, "The verdict: one rule for 'beats'") decides on one measure, balanced
accuracy, at every step:

- per pair of models and per cell, the difference of balanced accuracy (A - B) is tested by a sign-flip test
  over images (``stats.paired.sign_flip_test``), Holm-adjusted over all cells and pairs of the comparison: the
  cells a verdict counts as better or worse;
- per pair, over the domain, the difference of balanced accuracy averaged over the corrupted cells gets the
  same test on each image's share of it, Holm-adjusted over the model pairs: A *beats* B when that adjusted
  p-value is below 1 - confidence, otherwise the two *tie* at this sample size;
- a tie says how many images per class would settle a 3-point difference for that same test at 80 % power
  (``stats.paired.sign_flip_sample_size``, at the level Holm gives the strongest pair).

An adaptive run (``arrival`` given: the order its images were evaluated in) stopped its cells by looking at the
data, so every test and interval of its comparison is anytime-valid instead: betting confidence sequences
(``stats.confseq``) of the same differences, whose p-values hold at any stopping time. The exact McNemar test
of top-1 accuracy per cell stays in the pairs table (``p_value``, ``p_holm``) as a top-1 detail; the verdict
does not count it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import combinations

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, computed_field

from domainbench.metrics.aggregate import CLEAN
from domainbench.metrics.classification import MetricInputError
from domainbench.metrics.letters import TiedGroups, tied_groups
from domainbench.metrics.outcomes import ImageOutcomes
from domainbench.stats import holm, mcnemar_exact, normal_quantile
from domainbench.stats.bootstrap import DEFAULT_RESAMPLES
from domainbench.stats.confseq import anytime_p_value, betting_cs, class_balance_weights, weighted_difference_stream
from domainbench.stats.paired import sign_flip_sample_size, sign_flip_test

#: the difference (in balanced accuracy) the sample-size estimate of a tie is for
RESOLVE_DIFFERENCE = 0.03
POWER = 0.8
#: how the verdict's tests are made, as the sentences and exports name it
FIXED_METHOD = "sign-flip test over images"
ADAPTIVE_METHOD = "anytime-valid betting test (adaptive run)"


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PairCell(_Frozen):
    """One pair of models on one cell (the JSON export's ``pairs`` entries)."""

    model_a: str
    model_b: str
    corruption: str
    severity: int
    #: images both models were evaluated on in the cell
    n: int
    #: images A gets right and B wrong, and the reverse (top-1)
    a_only: int
    b_only: int
    #: top-1: exact McNemar p-value (anytime-valid betting p-value on an adaptive run), and after Holm's correction
    #: over all cells and pairs
    p_value: float
    p_holm: float
    #: balanced accuracy of A minus B, and its interval (the verdict's test inverted; a confidence sequence on an
    #: adaptive run)
    difference: float
    ci_low: float
    ci_high: float
    #: the verdict's test of that balanced-accuracy difference, and after Holm over all cells and pairs
    p_balanced: float
    p_balanced_holm: float


class PairVerdict(_Frozen):
    """Two models over the domain: mean balanced accuracy over the corrupted cells and the verdict."""

    model_a: str
    model_b: str
    accuracy_a: float
    accuracy_b: float
    difference: float
    #: the difference's interval at the confidence level, for this pair alone (excludes 0 exactly when p_value is
    #: below 1 - confidence)
    ci_low: float
    ci_high: float
    #: the domain test of the difference, and after Holm over the model pairs (the verdict decides on p_holm)
    p_value: float
    p_holm: float
    #: model pairs the Holm adjustment ran over
    pairs_compared: int
    #: cells where A (B) has the higher balanced accuracy with p_balanced_holm below 1 - confidence
    better: int
    worse: int
    cells: int
    n_images: int
    classes: int
    #: class-balanced mean over images of the squared per-image difference (the test's null variance per image)
    second_moment: float
    #: images per class a fixed-size run would need for this test to detect a 3-point difference with 80 % power
    images_per_class_needed: int
    #: "a", "b" or None (a tie)
    winner: str | None
    #: True when the tests are the anytime-valid ones of an adaptive run
    sequential: bool = False
    sentence: str


class Comparison(_Frozen):
    confidence: float
    resamples: int
    seed: int
    #: how the verdicts' tests were made (FIXED_METHOD or ADAPTIVE_METHOD)
    method: str = FIXED_METHOD
    pairs: list[PairCell]
    verdicts: list[PairVerdict]
    #: cells of one name that the compared runs made differently (parameters, ladder, steps, shift folder):
    #: not paired across the runs; left out of a dump when none
    differing_cells: list[str] = Field(default_factory=list, exclude_if=lambda v: not v)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def groups(self) -> TiedGroups:
        """The tied groups of the verdicts (``metrics.letters``): models sharing a letter are not significantly
        different by the verdicts' test."""
        return tied_groups(self)


def _cells_of(outcomes: ImageOutcomes, model: str) -> set[tuple[str, int]]:
    return {(c, s) for (m, c, s) in outcomes.preds if m == model}


def _pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def _points(x: float) -> str:
    return f"{100 * x:+.1f}"


def _p(p: float) -> str:
    return "< 0.001" if p < 0.001 else f"= {p:.2g}" if p < 0.995 else "= 1"


def _about(n: int) -> str:
    """n rounded to two significant figures, with thousands separators."""
    if n < 100:
        return f"{n:,}"
    digits = int(math.floor(math.log10(n))) - 1
    return f"{round(n, -digits):,}"


def verdict_sentence(v: PairVerdict | dict, confidence: float) -> str:
    """The plain verdict, e.g. "ViT-B-32 beats RN50 on this domain by balanced accuracy: 61.2 % vs 55.0 % (+6.2
    points, 95 % CI 3.1 to 9.4, p < 0.001 Holm-adjusted over 3 model pairs); by the same measure better in 9 of 12
    cells, worse in none (Holm-adjusted over cells and pairs, p < 0.05)"; a tie says so and how many images per
    class would settle a 3-point difference."""
    d = v if isinstance(v, dict) else v.model_dump()
    level = f"{100 * confidence:g} %"
    alpha = f"{1 - confidence:.3g}"
    m = d["pairs_compared"]
    over = f" Holm-adjusted over {m} model pairs" if m > 1 else ""
    how = "anytime-valid, " if d.get("sequential") else ""
    a_wins = d["winner"] != "b"
    win, lose = (d["model_a"], d["model_b"]) if a_wins else (d["model_b"], d["model_a"])
    acc_w, acc_l = (d["accuracy_a"], d["accuracy_b"]) if a_wins else (d["accuracy_b"], d["accuracy_a"])
    diff, lo, hi = (d["difference"], d["ci_low"], d["ci_high"]) if a_wins else (-d["difference"], -d["ci_high"], -d["ci_low"])
    better, worse = (d["better"], d["worse"]) if a_wins else (d["worse"], d["better"])
    numbers = (f"{_pct(acc_w)} vs {_pct(acc_l)} ({_points(diff)} points, {how}{level} CI {100 * lo:.1f} to {100 * hi:.1f}, "
               f"p {_p(d['p_holm'])}{over})")
    cells = (f"by the same measure better in {better} of {d['cells']} cells, worse in {'none' if worse == 0 else worse} "
             f"(Holm-adjusted over cells and pairs, p < {alpha})")
    if d["winner"] is None:
        fixed = "a fixed-size run of " if d.get("sequential") else ""
        per_class = max(1, round(d["n_images"] / max(d["classes"], 1)))
        return (f"{win} and {lose} tie on this domain by balanced accuracy: {numbers} on {d['n_images']:,} images "
                f"(about {per_class:,} per class); {cells}; {fixed}about {_about(d['images_per_class_needed'])} images per "
                f"class would settle a {100 * RESOLVE_DIFFERENCE:g}-point difference")
    return f"{win} beats {lose} on this domain by balanced accuracy: {numbers}; {cells}"


def _class_weights(labels: np.ndarray, present: np.ndarray) -> np.ndarray:
    """Per image, its weight in the balanced accuracy over the ``present`` images: 1 / (classes present x its
    class's present images), 0 where absent; sum(weights * correct) is the balanced accuracy."""
    _, codes = np.unique(labels, return_inverse=True)
    size = np.bincount(codes, weights=present.astype(float))
    classes = int(np.count_nonzero(size))
    return np.where(present, 1.0 / (max(classes, 1) * np.maximum(size[codes], 1.0)), 0.0)


def _fixed_interval(contributions: np.ndarray, confidence: float) -> tuple[float, float]:
    """The sign-flip test inverted at ``confidence``: excludes 0 exactly when ``sign_flip_test`` < 1 - confidence.
    Its half-width uses the null variance sum(d^2), which exceeds the variance under any alternative."""
    d = contributions[contributions != 0]
    t = float(contributions.sum())
    if d.size == 0:
        return t, t
    half = float(np.abs(d).max()) + normal_quantile(confidence) * math.sqrt(float(np.sum(d * d)))
    return t - half, t + half


class _Stream:
    """An adaptive run's tests: the per-image differences in the order the images were evaluated, weighted towards
    class balance (``stats.confseq.class_balance_weights``) and scaled into [0, 1] for the betting sequences."""

    def __init__(self, labels: np.ndarray, arrival: np.ndarray, confidence: float) -> None:
        self.weights = class_balance_weights(labels)
        self.bound = float(self.weights.max())
        self.arrival = arrival
        self.confidence = confidence

    def _order(self, where: np.ndarray) -> np.ndarray:
        pos = np.flatnonzero(where)
        return pos[np.argsort(self.arrival[pos], kind="stable")]

    def test(self, diff: np.ndarray, where: np.ndarray) -> tuple[float, float, float]:
        """(anytime-valid p-value, confidence-sequence low, high) of the class-balanced difference."""
        pos = self._order(where)
        y = weighted_difference_stream(diff[pos], self.weights[pos])
        low, high = betting_cs(y, self.confidence)
        return (anytime_p_value(y, self.confidence), max(-1.0, self.bound * (2 * low - 1)),
                min(1.0, self.bound * (2 * high - 1)))

    def top1_p(self, diff: np.ndarray, where: np.ndarray) -> float:
        return anytime_p_value((diff[self._order(where)] + 1) / 2, self.confidence)


def compare_models(outcomes: ImageOutcomes, models: Sequence[str] | None = None, confidence: float = 0.95,
                   resamples: int = DEFAULT_RESAMPLES, seed: int = 0, arrival: np.ndarray | None = None) -> Comparison:
    """Every pair of ``models`` (default: all of the outcomes') on every cell both have, and the verdicts.

    ``arrival``: for an adaptive run, each image's position in the order it was evaluated (the tests are then the
    anytime-valid ones). ``resamples`` and ``seed`` are recorded for the caller's bootstrap intervals; the
    verdict's tests draw nothing."""
    if outcomes.labels is None:
        raise MetricInputError("the dataset is unlabelled: models can only be compared on labelled images")
    names = list(models) if models is not None else outcomes.models()
    if len(set(names)) < 2:
        raise MetricInputError(f"a comparison needs at least two models, got {names}; "
                               "pass --models A,B or compare runs with more models")
    y = outcomes.labels
    alpha = 1 - confidence
    stream = None if arrival is None else _Stream(y, np.asarray(arrival), confidence)
    _, codes = np.unique(y, return_inverse=True)
    n_classes = int(codes.max()) + 1 if codes.size else 0
    raw: list[dict] = []
    per_pair: dict[tuple[str, str], list[int]] = {}
    domain: dict[tuple[str, str], dict] = {}
    for a, b in combinations(names, 2):
        cells = sorted(_cells_of(outcomes, a) & _cells_of(outcomes, b), key=lambda k: (k[0] != CLEAN, k))
        if not cells:
            raise MetricInputError(f"models {a!r} and {b!r} share no evaluated cell: nothing to compare")
        corrupted = [k for k in cells if k[0] != CLEAN] or cells
        shares, diffs, seen, everywhere = [], [], [], np.ones(outcomes.n, dtype=bool)
        point_a, point_b = [], []
        n_images = 0
        for corr, sev in cells:
            both = outcomes.present(a, corr, sev) & outcomes.present(b, corr, sev)
            if not both.any():  # an answer that named no class is a (wrong) prediction: only unevaluated images
                raise MetricInputError(f"models {a!r} and {b!r} have no image with a prediction from both in cell "
                                       f"{corr}@{sev} (no image both evaluated); compare other models (--models) "
                                       "or resume the runs")
            ca, cb = outcomes.correct(a, corr, sev), outcomes.correct(b, corr, sev)
            a_only, b_only = int(np.sum(ca & ~cb & both)), int(np.sum(cb & ~ca & both))
            w = _class_weights(y, both)
            d = np.where(both, ca.astype(float) - cb.astype(float), 0.0)
            pa, pb = float(w @ ca), float(w @ cb)
            if stream is None:
                p_ba = sign_flip_test(w * d)
                low, high = _fixed_interval(w * d, confidence)
                p_top1 = mcnemar_exact(a_only, b_only)
            else:
                p_ba, low, high = stream.test(d, both)
                p_top1 = stream.top1_p(d, both)
            per_pair.setdefault((a, b), []).append(len(raw))
            raw.append({"model_a": a, "model_b": b, "corruption": corr, "severity": sev, "n": int(both.sum()),
                        "a_only": a_only, "b_only": b_only, "p_value": p_top1, "difference": pa - pb,
                        "ci_low": low, "ci_high": high, "p_balanced": p_ba})
            if (corr, sev) in corrupted:
                shares.append(w * d)
                diffs.append(d)
                seen.append(both)
                everywhere &= both
                point_a.append(pa)
                point_b.append(pb)
                n_images = max(n_images, int(both.sum()))
        if n_images == 0:  # e.g. units stored without per-image predictions
            raise MetricInputError(f"models {a!r} and {b!r} have no image both evaluated with per-image outcomes stored: "
                                   "nothing to compare")
        share = np.mean(shares, axis=0)  # each image's share of the mean difference over the corrupted cells
        per_image = np.mean(diffs, axis=0)
        if stream is None:
            p_domain = sign_flip_test(share)
            low, high = _fixed_interval(share, confidence)
        else:
            # one stream over every image a corrupted cell evaluated: its difference averaged over the cells still
            # running when it came (which cells those are was decided by the images before it, so under "equally
            # good in every cell and class" each term has mean 0 given the past and the betting test holds)
            count = np.sum(seen, axis=0)
            running = np.sum(diffs, axis=0) / np.maximum(count, 1)
            p_domain, low, high = stream.test(running, count > 0)
        # the test's null variance per image, balanced over classes (over the images every corrupted cell has):
        # what the sample size scales
        counts = np.bincount(codes[everywhere], minlength=n_classes)
        sums = np.bincount(codes[everywhere], per_image[everywhere] ** 2, n_classes)
        second = float(np.mean(sums[counts > 0] / counts[counts > 0])) if counts.any() else 0.0
        domain[(a, b)] = {"accuracy_a": float(np.mean(point_a)), "accuracy_b": float(np.mean(point_b)),
                          "ci_low": low, "ci_high": high, "p_value": p_domain, "cells": len(corrupted),
                          "n_images": n_images, "second_moment": second, "corrupted": set(corrupted)}
    cell_holm = holm([r["p_balanced"] for r in raw])
    top1_holm = holm([r["p_value"] for r in raw])
    pairs = [PairCell(**r, p_holm=p1, p_balanced_holm=pb) for r, p1, pb in zip(raw, top1_holm, cell_holm, strict=True)]
    pair_holm = holm([d["p_value"] for d in domain.values()])
    m = len(domain)
    verdicts = []
    for ((a, b), d), p_adj in zip(domain.items(), pair_holm, strict=True):
        mine = [pairs[i] for i in per_pair[(a, b)] if (pairs[i].corruption, pairs[i].severity) in d["corrupted"]]
        diff = d["accuracy_a"] - d["accuracy_b"]
        winner = None if p_adj >= alpha or diff == 0 else "a" if diff > 0 else "b"
        needed = sign_flip_sample_size(d["second_moment"], RESOLVE_DIFFERENCE, alpha / m, POWER)
        fields = {
            "model_a": a, "model_b": b, "accuracy_a": d["accuracy_a"], "accuracy_b": d["accuracy_b"], "difference": diff,
            "ci_low": d["ci_low"], "ci_high": d["ci_high"], "p_value": d["p_value"], "p_holm": p_adj, "pairs_compared": m,
            "better": sum(p.p_balanced_holm < alpha and p.difference > 0 for p in mine),
            "worse": sum(p.p_balanced_holm < alpha and p.difference < 0 for p in mine),
            "cells": d["cells"], "n_images": d["n_images"], "classes": n_classes, "second_moment": d["second_moment"],
            "images_per_class_needed": int(math.ceil(needed / max(n_classes, 1))), "winner": winner,
            "sequential": stream is not None,
        }
        verdicts.append(PairVerdict(**fields, sentence=verdict_sentence({**fields}, confidence)))
    return Comparison(confidence=confidence, resamples=resamples, seed=seed,
                      method=FIXED_METHOD if stream is None else ADAPTIVE_METHOD, pairs=pairs, verdicts=verdicts)


class FlipVerdict(_Frozen):
    """One pair of models compared without labels: by how often a corruption changes their clean prediction."""

    model_a: str
    model_b: str
    #: the mean over the corrupted cells of each model's share of images whose prediction the corruption flipped
    flips_a: float
    flips_b: float
    difference: float
    ci_low: float
    ci_high: float
    p_value: float
    p_holm: float
    pairs_compared: int
    cells: int
    n_images: int
    #: "a" or "b": the model that flips less (the steadier one), None for a tie at this sample size
    steadier: str | None
    sentence: str


def flip_sentence(v: dict, confidence: float) -> str:
    """The label-free verdict, e.g. "without labels, by label flips: A flips on 8.0 % of images under the corruptions,
    B on 20.0 % (-12.0 points, 95 % CI -15.1 to -8.9, p < 0.001): A is steadier" (a tie says so)."""
    level = f"{100 * confidence:g} %"
    m = v["pairs_compared"]
    over = f" Holm-adjusted over {m} model pairs" if m > 1 else ""
    numbers = (f"{v['model_a']} flips on {_pct(v['flips_a'])} of images under the corruptions, {v['model_b']} on "
               f"{_pct(v['flips_b'])} ({_points(v['difference'])} points, {level} CI {100 * v['ci_low']:.1f} to "
               f"{100 * v['ci_high']:.1f}, p {_p(v['p_holm'])}{over}; {v['n_images']:,} images, {v['cells']} cells)")
    if v["steadier"] is None:
        return (f"Without labels, by label flips: {numbers}: {v['model_a']} and {v['model_b']} are equally steady at this "
                "sample size. Steadier is not more accurate: a model that always answers the same class never flips.")
    win = v["model_a"] if v["steadier"] == "a" else v["model_b"]
    return (f"Without labels, by label flips: {numbers}: {win} is steadier under this domain's corruptions. "
            "Steadier is not more accurate: a model that always answers the same class never flips.")


def compare_flips(outcomes: ImageOutcomes, models: Sequence[str] | None = None,
                  confidence: float = 0.95) -> list[FlipVerdict]:
    """Every pair of ``models`` compared by label flips, which need no labels (an unlabelled run's verdict).

    Per pair, each corrupted cell both models evaluated (with both clean predictions) gives each image the
    difference of the two flip indicators, divided by the cell's images; an image's contribution is the mean of
    these over the cells, so the contributions sum to the difference of the two mean flip rates. That sum gets the
    verdict's sign-flip test over images (``stats.paired.sign_flip_test``: images are the paired unit, a cell's
    severities are the same images) and its inverted interval; the p-values are Holm-adjusted over the pairs."""
    names = list(models) if models is not None else outcomes.models()
    if len(set(names)) < 2:
        raise MetricInputError(f"a comparison needs at least two models, got {names}")
    raw: list[dict] = []
    for a, b in combinations(names, 2):
        cells = sorted(k for k in _cells_of(outcomes, a) & _cells_of(outcomes, b) if k[0] != CLEAN)
        shares, rate_a, rate_b, n_images = [], [], [], 0
        for corr, sev in cells:
            both = (outcomes.present(a, corr, sev) & outcomes.present(b, corr, sev)
                    & outcomes.present(a, CLEAN, 0) & outcomes.present(b, CLEAN, 0))
            n = int(both.sum())
            if n == 0:
                continue
            fa, fb = outcomes.flipped(a, corr, sev) & both, outcomes.flipped(b, corr, sev) & both
            shares.append((fa.astype(float) - fb.astype(float)) / n)
            rate_a.append(float(fa.sum()) / n)
            rate_b.append(float(fb.sum()) / n)
            n_images = max(n_images, n)
        if not shares:
            raise MetricInputError(f"models {a!r} and {b!r} share no corrupted cell with per-image predictions (and their "
                                   "clean ones) stored: nothing to compare")
        share = np.mean(shares, axis=0)
        low, high = _fixed_interval(share, confidence)
        raw.append({"model_a": a, "model_b": b, "flips_a": float(np.mean(rate_a)), "flips_b": float(np.mean(rate_b)),
                    "difference": float(np.mean(rate_a) - np.mean(rate_b)), "ci_low": low, "ci_high": high,
                    "p_value": sign_flip_test(share), "cells": len(shares), "n_images": n_images})
    adjusted = holm([r["p_value"] for r in raw])
    out = []
    for r, p_adj in zip(raw, adjusted, strict=True):
        steadier = None if p_adj >= 1 - confidence or r["difference"] == 0 else "a" if r["difference"] < 0 else "b"
        fields = {**r, "p_holm": p_adj, "pairs_compared": len(raw), "steadier": steadier}
        out.append(FlipVerdict(**fields, sentence=flip_sentence(fields, confidence)))
    return out

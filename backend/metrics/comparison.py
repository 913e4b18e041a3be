"""Paired comparison of models on the same images, and the plain verdict it supports.

Per pair of models and per cell: the exact McNemar test on the images exactly one of the two
gets right, and a paired bootstrap interval for the difference in balanced accuracy; Holm's
correction runs over all cells and pairs of one comparison. Per pair, over the domain: the
difference of balanced accuracy averaged over the corrupted cells, with a paired bootstrap
interval, and a one-sentence verdict; when the verdict is "no significant difference", the
observed discordance gives the number of images a 3-point difference would need (McNemar's
sample size at 80 % power).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import combinations

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from domainbench.metrics.aggregate import CLEAN
from domainbench.metrics.classification import MetricInputError
from domainbench.metrics.outcomes import ImageOutcomes
from domainbench.stats import (
    balanced_accuracy_weighted,
    holm,
    mcnemar_exact,
    paired_sample_size,
    percentile_interval,
    shared_bootstrap_weights,
)
from domainbench.stats.bootstrap import DEFAULT_RESAMPLES

#: the difference (in balanced accuracy) the sample-size estimate of a "no difference" verdict is for
RESOLVE_DIFFERENCE = 0.03
POWER = 0.8


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
    #: images A gets right and B wrong, and the reverse
    a_only: int
    b_only: int
    #: exact McNemar p-value, and after Holm's correction over all cells and pairs
    p_value: float
    p_holm: float
    #: balanced accuracy of A minus B, and its paired bootstrap interval
    difference: float
    ci_low: float
    ci_high: float


class PairVerdict(_Frozen):
    """Two models over the domain: mean balanced accuracy over the corrupted cells and the verdict."""

    model_a: str
    model_b: str
    accuracy_a: float
    accuracy_b: float
    difference: float
    ci_low: float
    ci_high: float
    #: cells where A (B) is better with Holm-adjusted p below 1 - confidence
    better: int
    worse: int
    cells: int
    n_images: int
    #: share of (image, cell) pairs exactly one of the two gets right
    discordance: float
    #: images a paired test would need to resolve a 3-point difference at 80 % power
    images_needed: int
    #: "a", "b" or None (no significant difference)
    winner: str | None
    sentence: str


class Comparison(_Frozen):
    confidence: float
    resamples: int
    seed: int
    pairs: list[PairCell]
    verdicts: list[PairVerdict]
    #: cells of one name that the compared runs made differently (parameters, ladder, steps, shift folder):
    #: not paired across the runs; left out of a dump when none
    differing_cells: list[str] = Field(default_factory=list, exclude_if=lambda v: not v)


def _cells_of(outcomes: ImageOutcomes, model: str) -> set[tuple[str, int]]:
    return {(c, s) for (m, c, s) in outcomes.preds if m == model}


def _pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def _points(x: float) -> str:
    return f"{100 * x:+.1f}"


def _about(n: int) -> str:
    """n rounded to two significant figures, with thousands separators."""
    if n < 100:
        return f"{n:,}"
    digits = int(math.floor(math.log10(n))) - 1
    return f"{round(n, -digits):,}"


def verdict_sentence(v: PairVerdict | dict, confidence: float) -> str:
    """The plain verdict, e.g. "ViT-B-32 beats RN50 on this domain: balanced accuracy 61.2 % vs 55.0 %
    (+6.2 points, 95 % CI 3.1 to 9.4); better in 9 of 12 cells, worse in none (Holm-adjusted p < 0.05)"."""
    d = v if isinstance(v, dict) else v.model_dump()
    level = f"{100 * confidence:g} %"
    alpha = f"{1 - confidence:.3g}"
    if d["winner"] is None:
        return (f"{d['model_a']} vs {d['model_b']}: no significant difference on {d['n_images']:,} images "
                f"(balanced accuracy {_pct(d['accuracy_a'])} vs {_pct(d['accuracy_b'])}, {_points(d['difference'])} points, "
                f"{level} CI {100 * d['ci_low']:.1f} to {100 * d['ci_high']:.1f}); about {_about(d['images_needed'])} images "
                f"would resolve a {100 * RESOLVE_DIFFERENCE:g}-point difference")
    a_wins = d["winner"] == "a"
    win, lose = (d["model_a"], d["model_b"]) if a_wins else (d["model_b"], d["model_a"])
    acc_w, acc_l = (d["accuracy_a"], d["accuracy_b"]) if a_wins else (d["accuracy_b"], d["accuracy_a"])
    diff, lo, hi = (d["difference"], d["ci_low"], d["ci_high"]) if a_wins else (-d["difference"], -d["ci_high"], -d["ci_low"])
    better, worse = (d["better"], d["worse"]) if a_wins else (d["worse"], d["better"])
    worse_text = "none" if worse == 0 else f"{worse}"
    return (f"{win} beats {lose} on this domain: balanced accuracy {_pct(acc_w)} vs {_pct(acc_l)} "
            f"({_points(diff)} points, {level} CI {100 * lo:.1f} to {100 * hi:.1f}); better in {better} of {d['cells']} cells, "
            f"worse in {worse_text} (Holm-adjusted p < {alpha})")


def compare_models(outcomes: ImageOutcomes, models: Sequence[str] | None = None, confidence: float = 0.95,
                   resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> Comparison:
    """Every pair of ``models`` (default: all of the outcomes') on every cell both have."""
    if outcomes.labels is None:
        raise MetricInputError("the dataset is unlabelled: models can only be compared on labelled images")
    names = list(models) if models is not None else outcomes.models()
    if len(set(names)) < 2:
        raise MetricInputError(f"a comparison needs at least two models, got {names}; "
                               "pass --models A,B or compare runs with more models")
    y = outcomes.labels
    weights = shared_bootstrap_weights(outcomes.n, y, resamples, seed)  # the run's intervals' own rows
    ones = np.ones((1, outcomes.n))
    raw: list[dict] = []
    per_pair: dict[tuple[str, str], list[int]] = {}
    domain: dict[tuple[str, str], dict] = {}
    for a, b in combinations(names, 2):
        cells = sorted(_cells_of(outcomes, a) & _cells_of(outcomes, b), key=lambda k: (k[0] != CLEAN, k))
        if not cells:
            raise MetricInputError(f"models {a!r} and {b!r} share no evaluated cell: nothing to compare")
        corrupted = [k for k in cells if k[0] != CLEAN] or cells
        draws_a, draws_b, point_a, point_b = [], [], [], []
        discordant = pairs_seen = 0
        n_images = 0
        for corr, sev in cells:
            both = outcomes.present(a, corr, sev) & outcomes.present(b, corr, sev)
            ca, cb = outcomes.correct(a, corr, sev), outcomes.correct(b, corr, sev)
            a_only, b_only = int(np.sum(ca & ~cb & both)), int(np.sum(cb & ~ca & both))
            w = weights * both
            da = balanced_accuracy_weighted(ca, y, w)
            db = balanced_accuracy_weighted(cb, y, w)
            pa = float(balanced_accuracy_weighted(ca, y, ones * both)[0])
            pb = float(balanced_accuracy_weighted(cb, y, ones * both)[0])
            iv = percentile_interval(da - db, confidence)
            assert iv is not None
            per_pair.setdefault((a, b), []).append(len(raw))
            raw.append({"model_a": a, "model_b": b, "corruption": corr, "severity": sev, "n": int(both.sum()),
                        "a_only": a_only, "b_only": b_only, "p_value": mcnemar_exact(a_only, b_only),
                        "difference": pa - pb, "ci_low": iv[0], "ci_high": iv[1]})
            if (corr, sev) in corrupted:
                draws_a.append(da)
                draws_b.append(db)
                point_a.append(pa)
                point_b.append(pb)
                discordant += a_only + b_only
                pairs_seen += int(both.sum())
                n_images = max(n_images, int(both.sum()))
        diff_draws = np.mean(draws_a, axis=0) - np.mean(draws_b, axis=0)
        iv = percentile_interval(diff_draws, confidence)
        assert iv is not None
        domain[(a, b)] = {"accuracy_a": float(np.mean(point_a)), "accuracy_b": float(np.mean(point_b)),
                          "ci_low": iv[0], "ci_high": iv[1], "cells": len(corrupted), "n_images": n_images,
                          "discordance": discordant / max(pairs_seen, 1), "corrupted": set(corrupted)}
    adjusted = holm([r["p_value"] for r in raw])
    alpha = 1 - confidence
    pairs = [PairCell(**r, p_holm=p) for r, p in zip(raw, adjusted, strict=True)]
    verdicts = []
    for (a, b), d in domain.items():
        mine = [pairs[i] for i in per_pair[(a, b)] if (pairs[i].corruption, pairs[i].severity) in d["corrupted"]]
        diff = d["accuracy_a"] - d["accuracy_b"]
        winner = "a" if d["ci_low"] > 0 else "b" if d["ci_high"] < 0 else None
        fields = {
            "model_a": a, "model_b": b, "accuracy_a": d["accuracy_a"], "accuracy_b": d["accuracy_b"], "difference": diff,
            "ci_low": d["ci_low"], "ci_high": d["ci_high"],
            # the direction of a significant McNemar test is that of its discordant counts
            "better": sum(p.p_holm < alpha and p.a_only > p.b_only for p in mine),
            "worse": sum(p.p_holm < alpha and p.b_only > p.a_only for p in mine),
            "cells": d["cells"], "n_images": d["n_images"], "discordance": d["discordance"],
            "images_needed": paired_sample_size(d["discordance"], RESOLVE_DIFFERENCE, alpha, POWER), "winner": winner,
        }
        verdicts.append(PairVerdict(**fields, sentence=verdict_sentence({**fields}, confidence)))
    return Comparison(confidence=confidence, resamples=resamples, seed=seed, pairs=pairs, verdicts=verdicts)

"""The temporal metrics of a clip run: per-frame and per-clip accuracy, flip rate, recovery time.

Definitions (a cell is one model under one corruption × severity, or clean; ``p[c][t]`` the prediction of
sampled frame ``t`` of clip ``c``, ``y[c]`` its label, ``q[c][t]`` the same model's clean prediction):

- ``frame_accuracy`` = Σ_c Σ_t [p[c][t] = y[c]] / Σ_c T_c: the share of sampled frames classified right.
- ``clip_accuracy_mean``: the share of clips whose *mean-embedding* prediction is right (the clip's frame
  embeddings, L2-normalised, averaged, classified as one image; contrastive models only).
- ``clip_accuracy_vote``: the share of clips whose *majority vote* over its frames' predictions is right
  (a tie goes to the lowest class index among the tied classes).
- ``clip_accuracy_video``: the share of clips whose *whole-clip* answer is right: a model that takes video
  input (``accepts_video``: Qwen2-VL) answers each clip's sampled frames as one video; None for other models.
- ``temporal_flip_rate`` = Σ_c Σ_{t≥1} [p[c][t] ≠ p[c][t−1]] / Σ_c (T_c − 1): the share of consecutive
  sampled-frame pairs whose prediction changes (pooled over clips; a clip of one frame has no pair).
  Needs no labels. ``temporal_flip_rate_clean`` is the same model's clean value, and ``flip_rate_added``
  the difference corrupted − clean: the flicker the corruption adds.
- ``video_answer_flip_rate``: the share of clips whose whole-clip answer under the corruption differs from the
  same model's answer to the clean clip (needs no labels; video-input models only, None on the clean cell).
- ``recovery_time``: an *episode* is a maximal run of consecutive sampled frames where the corrupted
  prediction differs from the same frame's clean prediction (p[c][t] ≠ q[c][t]) that ends inside the clip
  (a frame where they agree again follows it); its length in sampled frames is the number of frames until
  the clean prediction returns. ``recovery_time`` is the mean length over every episode of every clip.
  Episodes still open at the clip's last frame never recovered: they are counted in
  ``recovery_censored``, not in the mean. No episode: undefined (None).

Intervals: percentile bootstrap over clips (clips are the independent unit; frames of a clip come along
with it, ``stats.clustered``), 95 %, the same resamples for a cell and its clean cell so that
``flip_rate_added``'s interval is the paired one. Paired verdicts between two models on the same cell:
frame correctness by the sign-flip test on per-clip sums, clip correctness (vote) by exact McNemar
(``stats.clustered.paired_p_value``), Holm-corrected over all the run's tests.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import numpy as np

from domainbench.stats.bootstrap import DEFAULT_RESAMPLES, DEFAULT_SEED, percentile_interval
from domainbench.stats.clustered import clustered_interval, clustered_mean_draws, paired_p_value
from domainbench.stats.paired import holm

ALPHA = 0.05


@dataclass
class ClipCellData:
    """One model's predictions in one cell: per clip, its frames' predictions and its mean-embedding one."""

    preds: list[np.ndarray]
    labels: np.ndarray | None
    #: per clip, the prediction of the mean embedding; None: the model has no embeddings (generative)
    mean_preds: np.ndarray | None = None
    #: per clip, the answer to the clip given as one video; None: the model takes no video input
    video_preds: np.ndarray | None = None


def vote(preds: np.ndarray) -> int:
    """The majority class of a clip's frame predictions (ties: the lowest class index)."""
    return int(np.bincount(np.asarray(preds, dtype=np.int64)).argmax())


def _frame_clusters(preds: Sequence[np.ndarray]) -> np.ndarray:
    return np.concatenate([np.full(len(p), c) for c, p in enumerate(preds)]) if preds else np.zeros(0, int)


def frame_correct(d: ClipCellData) -> tuple[np.ndarray, np.ndarray] | None:
    """Per frame 1/0 correctness and its clip index (None: no labels)."""
    if d.labels is None:
        return None
    correct = np.concatenate([(np.asarray(p) == d.labels[c]).astype(float) for c, p in enumerate(d.preds)])
    return correct, _frame_clusters(d.preds)


def pair_flips(preds: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Per consecutive frame pair, 1/0 whether the prediction changed, and its clip index."""
    flags = [(np.asarray(p)[1:] != np.asarray(p)[:-1]).astype(float) for p in preds]
    clusters = [np.full(len(f), c) for c, f in enumerate(flags)]
    if not flags:
        return np.zeros(0), np.zeros(0, int)
    return np.concatenate(flags), np.concatenate(clusters)


def episodes(preds: np.ndarray, clean: np.ndarray) -> tuple[list[int], int]:
    """Lengths of the recovered episodes of one clip (module docstring) and how many were still open at its end."""
    differs = np.asarray(preds) != np.asarray(clean)
    lengths: list[int] = []
    run = 0
    for d in differs:
        if d:
            run += 1
        elif run:
            lengths.append(run)
            run = 0
    return lengths, int(run > 0)


def _mean(values: np.ndarray) -> float | None:
    return float(values.mean()) if values.size else None


def _ci(values: np.ndarray, clusters: np.ndarray, resamples: int, seed: int) -> tuple[float | None, float | None]:
    if values.size == 0:
        return None, None
    ci = clustered_interval(values, clusters, resamples=resamples, seed=seed)
    return (None, None) if ci is None else (float(ci[0]), float(ci[1]))


def cell_metrics(d: ClipCellData, clean: ClipCellData | None, *, resamples: int = DEFAULT_RESAMPLES,
                 seed: int = DEFAULT_SEED) -> dict[str, Any]:
    """Every metric of one cell with its interval (``NAME``, ``NAME_ci_low``, ``NAME_ci_high``)."""
    out: dict[str, Any] = {"clips": len(d.preds), "frames": int(sum(len(p) for p in d.preds))}

    def put(name: str, value: float | None, ci: tuple[float | None, float | None]) -> None:
        out[name], out[f"{name}_ci_low"], out[f"{name}_ci_high"] = value, ci[0], ci[1]

    fc = frame_correct(d)
    clip_ids = np.arange(len(d.preds))
    if fc is None:
        for name in ("frame_accuracy", "clip_accuracy_mean", "clip_accuracy_vote", "clip_accuracy_video"):
            put(name, None, (None, None))
    else:
        put("frame_accuracy", _mean(fc[0]), _ci(*fc, resamples, seed))
        assert d.labels is not None
        votes = np.array([vote(p) for p in d.preds]) if d.preds else np.zeros(0, int)
        right = (votes == d.labels).astype(float)
        put("clip_accuracy_vote", _mean(right), _ci(right, clip_ids, resamples, seed))
        if d.mean_preds is None:
            put("clip_accuracy_mean", None, (None, None))
        else:
            right_mean = (np.asarray(d.mean_preds) == d.labels).astype(float)
            put("clip_accuracy_mean", _mean(right_mean), _ci(right_mean, clip_ids, resamples, seed))
        if d.video_preds is None:
            put("clip_accuracy_video", None, (None, None))
        else:
            right_video = (np.asarray(d.video_preds) == d.labels).astype(float)
            put("clip_accuracy_video", _mean(right_video), _ci(right_video, clip_ids, resamples, seed))
    flips, fclusters = pair_flips(d.preds)
    put("temporal_flip_rate", _mean(flips), _ci(flips, fclusters, resamples, seed))
    if clean is None:
        for name in ("temporal_flip_rate_clean", "flip_rate_added", "video_answer_flip_rate", "recovery_time"):
            put(name, None, (None, None))
        out["recovery_censored"] = None
        return out
    if d.video_preds is None or clean.video_preds is None:
        put("video_answer_flip_rate", None, (None, None))
    else:
        changed = (np.asarray(d.video_preds) != np.asarray(clean.video_preds)).astype(float)
        put("video_answer_flip_rate", _mean(changed), _ci(changed, clip_ids, resamples, seed))
    cflips, cclusters = pair_flips(clean.preds)
    put("temporal_flip_rate_clean", _mean(cflips), _ci(cflips, cclusters, resamples, seed))
    if flips.size:
        # the same clips drawn for both: the paired bootstrap of the difference
        draws = clustered_mean_draws(flips, fclusters, resamples, seed) - clustered_mean_draws(cflips, cclusters, resamples, seed)
        ci = percentile_interval(draws)
        put("flip_rate_added", float(flips.mean() - cflips.mean()),
            (None, None) if ci is None else (float(ci[0]), float(ci[1])))
    else:
        put("flip_rate_added", None, (None, None))
    lengths: list[int] = []
    owners: list[int] = []
    censored = 0
    for c, (p, q) in enumerate(zip(d.preds, clean.preds)):
        ls, open_ = episodes(p, q)
        lengths += ls
        owners += [c] * len(ls)
        censored += open_
    ep = np.asarray(lengths, dtype=float)
    put("recovery_time", _mean(ep), _ci(ep, np.asarray(owners, dtype=int), resamples, seed))
    out["recovery_censored"] = censored
    return out


def paired_verdicts(cells: dict[tuple[str, str], ClipCellData], models: Sequence[str], cell_keys: Sequence[str]) -> list[dict[str, Any]]:
    """Per cell and pair of models: the two-sided tests of frame accuracy and clip accuracy (vote), Holm-corrected
    over every test of the run; ``verdict`` names the better model where the corrected p is below 0.05."""
    rows: list[dict[str, Any]] = []
    for key in cell_keys:
        for a, b in combinations(models, 2):
            da, db = cells.get((a, key)), cells.get((b, key))
            if da is None or db is None or da.labels is None:
                continue
            fa, fb = frame_correct(da), frame_correct(db)
            assert fa is not None and fb is not None
            va = np.array([vote(p) for p in da.preds]) == da.labels
            vb = np.array([vote(p) for p in db.preds]) == db.labels
            for metric, x, y, clusters in (("frame_accuracy", fa[0], fb[0], fa[1]),
                                           ("clip_accuracy_vote", va.astype(float), vb.astype(float), None)):
                rows.append({"cell": key, "metric": metric, "model_a": a, "model_b": b,
                             "difference": float(x.mean() - y.mean()) if x.size else None,
                             "p_value": float(paired_p_value(x, y, clusters)) if x.size else 1.0})
    for r, p in zip(rows, holm([r["p_value"] for r in rows])):
        r["p_holm"] = float(p)
        d = r["difference"] or 0.0
        r["verdict"] = (r["model_a"] if d > 0 else r["model_b"]) if p < ALPHA and d != 0 else "tied"
    return rows


__all__ = ["ClipCellData", "cell_metrics", "episodes", "frame_correct", "pair_flips", "paired_verdicts", "vote"]

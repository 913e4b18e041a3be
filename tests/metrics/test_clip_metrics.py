"""The temporal metrics of clip runs (``metrics.clips``) against independent brute-force loops."""

from __future__ import annotations

import numpy as np
import pytest

from domainbench.metrics.clips import ClipCellData, cell_metrics, episodes, paired_verdicts, vote
from domainbench.metrics.registry import metrics_of
from domainbench.stats.bootstrap import DEFAULT_RESAMPLES, DEFAULT_SEED
from domainbench.stats.clustered import cluster_bootstrap_weights


def _random_cell(rng: np.random.Generator, clips: int = 7, classes: int = 3,
                 shortest: int = 1) -> tuple[ClipCellData, ClipCellData]:
    lengths = rng.integers(shortest, 9, clips)
    labels = rng.integers(0, classes, clips)
    clean = [rng.integers(0, classes, n) for n in lengths]
    # the corrupted predictions agree with the clean ones most of the time, so episodes are short
    corrupted = [np.where(rng.random(n) < 0.6, c, rng.integers(0, classes, n)) for c, n in zip(clean, lengths)]
    video_clean = rng.integers(0, classes, clips)
    video = np.where(rng.random(clips) < 0.5, video_clean, rng.integers(0, classes, clips))
    return (ClipCellData(corrupted, labels, rng.integers(0, classes, clips), video),
            ClipCellData(clean, labels, rng.integers(0, classes, clips), video_clean))


def _brute(d: ClipCellData, clean: ClipCellData) -> dict[str, float | None]:
    right = total = flips = pairs = cflips = cpairs = 0
    for c, p in enumerate(d.preds):
        for t in range(len(p)):
            right += int(p[t] == d.labels[c])
            total += 1
            if t:
                pairs += 1
                flips += int(p[t] != p[t - 1])
        q = clean.preds[c]
        for t in range(1, len(q)):
            cpairs += 1
            cflips += int(q[t] != q[t - 1])
    votes = []
    for p in d.preds:
        counts = {k: list(p).count(k) for k in set(p.tolist())}
        best = max(counts.values())
        votes.append(min(k for k, v in counts.items() if v == best))
    lengths, censored = [], 0
    for p, q in zip(d.preds, clean.preds):
        t = 0
        while t < len(p):
            if p[t] != q[t]:
                s = t
                while t < len(p) and p[t] != q[t]:
                    t += 1
                if t < len(p):
                    lengths.append(t - s)
                else:
                    censored += 1
            else:
                t += 1
    return {"frame_accuracy": right / total, "clip_accuracy_vote": float(np.mean(np.array(votes) == d.labels)),
            "clip_accuracy_mean": float(np.mean(d.mean_preds == d.labels)),
            "clip_accuracy_video": sum(int(v == y) for v, y in zip(d.video_preds, d.labels)) / len(d.labels),
            "video_answer_flip_rate": sum(int(v != w) for v, w in zip(d.video_preds, clean.video_preds)) / len(d.labels),
            "temporal_flip_rate": flips / pairs if pairs else None,
            "temporal_flip_rate_clean": cflips / cpairs if cpairs else None,
            "flip_rate_added": flips / pairs - cflips / cpairs if pairs else None,
            "recovery_time": float(np.mean(lengths)) if lengths else None, "recovery_censored": censored}


@pytest.mark.parametrize("seed", range(6))
def test_every_clip_metric_equals_a_brute_force_loop(seed: int) -> None:
    d, clean = _random_cell(np.random.default_rng(seed))
    got = cell_metrics(d, clean, resamples=200)
    want = _brute(d, clean)
    for name, value in want.items():
        assert got[name] == pytest.approx(value, abs=1e-12) if value is not None else got[name] is None, name
    assert got["frames"] == sum(len(p) for p in d.preds) and got["clips"] == len(d.preds)


def test_the_intervals_are_the_percentiles_of_a_bootstrap_over_clips() -> None:
    # clips of two frames or more: every clip then has frame pairs, so the frames' and the pairs' bootstraps
    # draw over the same clips
    d, clean = _random_cell(np.random.default_rng(11), clips=9, shortest=2)
    got = cell_metrics(d, clean)
    # an independent loop: resample clips with the registry's weights, recompute each pooled rate
    clusters = np.arange(len(d.preds))
    w = cluster_bootstrap_weights(clusters, DEFAULT_RESAMPLES, DEFAULT_SEED)
    accs, flips, added = [], [], []
    for r in range(DEFAULT_RESAMPLES):
        right = total = f = n = cf = cn = 0.0
        for c, (p, q) in enumerate(zip(d.preds, clean.preds)):
            k = w[r, c]
            right += k * np.sum(p == d.labels[c])
            total += k * len(p)
            f += k * np.sum(p[1:] != p[:-1])
            n += k * (len(p) - 1)
            cf += k * np.sum(q[1:] != q[:-1])
            cn += k * (len(q) - 1)
        accs.append(right / total)
        flips.append(f / n if n else np.nan)
        added.append(f / n - cf / cn if n else np.nan)
    assert (got["frame_accuracy_ci_low"], got["frame_accuracy_ci_high"]) == pytest.approx(
        tuple(np.percentile(accs, [2.5, 97.5])), abs=1e-12)
    assert (got["temporal_flip_rate_ci_low"], got["temporal_flip_rate_ci_high"]) == pytest.approx(
        tuple(np.nanpercentile(flips, [2.5, 97.5])), abs=1e-12)
    assert (got["flip_rate_added_ci_low"], got["flip_rate_added_ci_high"]) == pytest.approx(
        tuple(np.nanpercentile(added, [2.5, 97.5])), abs=1e-12)


def test_a_clip_of_identical_frames_has_flip_rate_zero_and_no_episode() -> None:
    same = [np.full(8, 2), np.full(5, 1)]
    got = cell_metrics(ClipCellData(same, np.array([2, 0]), np.array([2, 1])),
                       ClipCellData(same, np.array([2, 0]), np.array([2, 1])))
    assert got["temporal_flip_rate"] == 0.0 and got["temporal_flip_rate_clean"] == 0.0
    assert got["flip_rate_added"] == 0.0 and got["recovery_time"] is None and got["recovery_censored"] == 0
    assert got["frame_accuracy"] == pytest.approx(8 / 13) and got["clip_accuracy_vote"] == 0.5


def test_recovery_episodes_by_hand() -> None:
    clean = np.array([0, 0, 0, 0, 0, 0, 0, 0])
    assert episodes(np.array([0, 1, 1, 0, 2, 0, 1, 1]), clean) == ([2, 1], 1)  # the last run never recovers
    assert episodes(clean, clean) == ([], 0)
    assert vote(np.array([2, 1, 1, 2])) == 1  # a tie goes to the lower class
    # hand-worked: pairs 0-1 flip, 1-2 same, 2-3 flip -> 2 of 3
    got = cell_metrics(ClipCellData([np.array([0, 1, 1, 0])], np.array([0]), None), None)
    assert got["temporal_flip_rate"] == pytest.approx(2 / 3) and got["clip_accuracy_mean"] is None
    assert got["clip_accuracy_video"] is None and got["video_answer_flip_rate"] is None


def test_video_answers_by_hand() -> None:
    # 4 clips: whole-clip answers 0,1,1,2 against labels 0,1,0,0 -> 2 of 4 right; clean answers 0,1,0,2 -> 1 of 4 changed
    frames = [np.zeros(3, dtype=int)] * 4
    labels = np.array([0, 1, 0, 0])
    clean = ClipCellData(frames, labels, None, np.array([0, 1, 0, 2]))
    got = cell_metrics(ClipCellData(frames, labels, None, np.array([0, 1, 1, 2])), clean, resamples=500)
    assert got["clip_accuracy_video"] == 0.5 and got["video_answer_flip_rate"] == 0.25
    assert 0.0 <= got["video_answer_flip_rate_ci_low"] <= 0.25 <= got["video_answer_flip_rate_ci_high"] <= 1.0
    # the clean cell has no answer flips; a model that answers no whole clips has neither metric
    assert cell_metrics(clean, None)["video_answer_flip_rate"] is None
    assert cell_metrics(clean, None)["clip_accuracy_video"] == 0.75
    assert cell_metrics(ClipCellData(frames, labels), ClipCellData(frames, labels))["video_answer_flip_rate"] is None


def test_paired_verdicts_name_the_better_model_after_holm() -> None:
    labels = np.zeros(30, dtype=int)
    good = ClipCellData([np.zeros(6, dtype=int) for _ in range(30)], labels)
    bad = ClipCellData([np.ones(6, dtype=int) for _ in range(30)], labels)
    rows = paired_verdicts({("a", "clean"): good, ("b", "clean"): bad}, ["a", "b"], ["clean"])
    assert {r["metric"] for r in rows} == {"frame_accuracy", "clip_accuracy_vote"}
    by = {r["metric"]: r for r in rows}
    # clip vote: 30 discordant clips all for a -> exact McNemar p = 2 * 0.5**30; Holm over 2 tests doubles the smaller
    assert by["clip_accuracy_vote"]["p_value"] == pytest.approx(2 * 0.5 ** 30)
    assert all(r["verdict"] == "a" and r["difference"] == 1.0 for r in rows)
    tied = paired_verdicts({("a", "clean"): good, ("b", "clean"): good}, ["a", "b"], ["clean"])
    assert all(r["verdict"] == "tied" for r in tied)


def test_the_registry_declares_every_exported_clip_metric() -> None:
    names = [m.name for m in metrics_of("clip", always=False)]
    d, clean = _random_cell(np.random.default_rng(3))
    got = cell_metrics(d, clean, resamples=50)
    assert set(names) <= set(got) and {"frame_accuracy", "temporal_flip_rate", "recovery_time"} <= set(names)
    assert all(not m.always for m in metrics_of("clip", always=False))

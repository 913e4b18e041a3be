"""The metrics of a clip run (``engine.clip_kind``): one row per model × cell, computed by ``metrics.clips``
(whose docstring defines each exactly) from the frame predictions the run stores; intervals by a bootstrap
over clips."""

from __future__ import annotations

from domainbench.metrics.registry import Metric

_FRAMES = ("clip: each sampled frame's prediction, the clip's label",)
_BOOT = "pooled over the cell's clips; interval: percentile bootstrap over clips"

METRICS = (
    Metric("frame_accuracy", "per-frame accuracy", "fraction", "higher",
           "share of the clips' sampled frames classified right", "clip", _FRAMES, _BOOT,
           interval="bootstrap", order=10, field="frame_accuracy", always=False),
    Metric("clip_accuracy_mean", "clip accuracy (mean embedding)", "fraction", "higher",
           "share of clips whose mean frame embedding (L2-normalised frames, averaged) is classified right",
           "clip", ("clip: the clip's mean frame embedding's prediction",), _BOOT, interval="bootstrap", order=20,
           field="clip_accuracy_mean", always=False),
    Metric("clip_accuracy_vote", "clip accuracy (vote)", "fraction", "higher",
           "share of clips whose majority vote over its frames' predictions is right (ties: lowest class index)",
           "clip", _FRAMES, _BOOT, interval="bootstrap", order=30, field="clip_accuracy_vote", always=False),
    Metric("clip_accuracy_video", "clip accuracy (video input)", "fraction", "higher",
           "share of clips whose whole-clip answer (the sampled frames given as one video) is right; video-input "
           "models only", "clip", ("clip: the model's answer to the clip as one video",), _BOOT, interval="bootstrap",
           order=35, field="clip_accuracy_video", always=False),
    Metric("temporal_flip_rate", "temporal flip rate", "fraction", "lower",
           "share of consecutive sampled-frame pairs whose prediction changes (needs no labels)", "clip", _FRAMES,
           _BOOT, interval="bootstrap", order=40, field="temporal_flip_rate", always=False),
    Metric("temporal_flip_rate_clean", "temporal flip rate, clean", "fraction", "lower",
           "the same model's temporal flip rate on the clean clips", "clip", _FRAMES, _BOOT, interval="bootstrap",
           order=50, field="temporal_flip_rate_clean", always=False),
    Metric("flip_rate_added", "flip rate added", "fraction", "lower",
           "temporal flip rate under the corruption minus clean: the flicker the corruption adds", "clip", _FRAMES,
           "difference of the pooled rates; interval: paired bootstrap over clips", interval="bootstrap", order=60,
           field="flip_rate_added", always=False),
    Metric("video_answer_flip_rate", "video answer flips", "fraction", "lower",
           "share of clips whose whole-clip answer under the corruption differs from the answer to the clean clip "
           "(needs no labels); video-input models only", "clip",
           ("clip: the model's answer to the clip as one video, clean and corrupted",), _BOOT, interval="bootstrap",
           order=65, field="video_answer_flip_rate", always=False),
    Metric("recovery_time", "recovery time", "steps", "lower",
           "mean length, in sampled frames, of the runs of frames whose prediction differs from the clean one, "
           "until the clean prediction returns (runs still open at a clip's end are left out and counted)", "clip",
           ("clip: each sampled frame's prediction, clean and corrupted",), _BOOT, interval="bootstrap", order=70,
           field="recovery_time", always=False),
    Metric("recovery_censored", "unrecovered episodes", "count", None,
           "episodes of differing predictions still open at a clip's last sampled frame", "clip",
           ("clip: each sampled frame's prediction, clean and corrupted",), "summed over clips", order=80,
           field="recovery_censored", always=False),
)

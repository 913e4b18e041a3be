"""Generative VLMs on clips (issue 41): an ``openai-vlm:`` endpoint answers each sampled frame as its own image, and
the clip's vote and temporal flip rate follow from those answers."""

from __future__ import annotations

import base64
import io
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from tests.models.fake_vlm_server import Answer, serve  # noqa: F401 (the fixture)


def _images_of(req: dict[str, Any]) -> list[np.ndarray]:
    out = []
    for part in req["messages"][0]["content"]:
        if part["type"] == "image_url":
            url = part["image_url"]["url"]
            assert url.startswith("data:image/png;base64,")
            out.append(np.asarray(Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))).convert("RGB")))
    return out


def _brightness_class(img: np.ndarray, n_classes: int) -> int:
    """The fake endpoint's rule: the class from the frame's mean grey level, in bands 6 levels wide (so a flickering
    lamp moves a frame between classes and a steady frame keeps its class)."""
    return int(img.astype(np.float64).mean() // 6) % n_classes


def _flip_rate(preds: list[list[int]]) -> float:
    flips = sum(a != b for p in preds for a, b in zip(p[:-1], p[1:]))
    return flips / sum(len(p) - 1 for p in preds)


def _vote(preds: list[int]) -> int:
    counts = {c: preds.count(c) for c in set(preds)}
    return min(c for c in counts if counts[c] == max(counts.values()))  # ties: the lowest class index


def test_an_endpoint_answers_each_frame_and_the_clip_metrics_follow_from_its_answers(serve: Any, home: Path,
                                                                                    tmp_path: Path) -> None:
    from domainbench.data.clip_samples import write_sample_clips
    from domainbench.data.clips import Sampling
    from domainbench.engine.clip_kind import clip_cells, corrupt, load_clip_run, open_inputs, start_clip_run
    from domainbench.records.config import CorruptionChoice, DomainConfig, RunConfig
    from domainbench.store import open_store

    clips = write_sample_clips(tmp_path / "clips", per_class=2, frames=8, size=32, classes=2, seed=0)
    classes = sorted(p.name for p in clips.iterdir())
    answered: list[int] = []

    def answer(req: dict[str, Any], n: int) -> Answer:
        (img,) = _images_of(req)  # one frame per request
        answered.append(_brightness_class(img, len(classes)))
        return Answer(content=f"It is a {classes[answered[-1]]}.")

    server = serve(answer)
    name = f"openai-vlm:fake@{server.url}"
    domain = DomainConfig(domain="d", corruptions=[CorruptionChoice(name="flicker", severities=[5])])
    cfg = RunConfig(dataset=str(clips), image_size=32, workers=0, models=[name], model_args={name: {"mode": "generate"}})
    store = open_store(f"sqlite:///{tmp_path / 'db.sqlite'}")
    rid = start_clip_run(store, domain, cfg, Sampling(frames=6), "endpoint-clips")
    result = load_clip_run(store, rid)
    store.close()

    # what the endpoint was shown, frame by frame, decoded again here; the answers it gives them, by its rule
    inputs = open_inputs(domain, cfg, Sampling(frames=6))
    assert [c.clip.name for c in inputs.clips] == [c["clip"] for c in result.clips]
    labels = [c["label"] for c in result.clips]
    expected = {cell.key: [[_brightness_class(f, len(classes)) for f in corrupt(cell, c, cfg.seed)] for c in inputs.clips]
                for cell in clip_cells(domain)}
    distinct = {f.tobytes() for cell in clip_cells(domain) for c in inputs.clips for f in corrupt(cell, c, cfg.seed)}
    assert len(server.requests) == len(distinct)  # every distinct frame asked once, a repeated one from the cache
    rows = {r["corruption"]: r for r in result.rows}
    for cell in clip_cells(domain):
        unit = result.units[f"{name}\t{cell.key}"]
        assert unit["preds"] == expected[cell.key] and unit["mean_preds"] is None
        row = rows[cell.corruption]
        votes = [_vote(p) for p in expected[cell.key]]
        assert row["clip_accuracy_vote"] == np.mean(np.asarray(votes) == np.asarray(labels))
        assert row["clip_accuracy_mean"] is None  # an endpoint has no embedding
        frames_right = [p == lab for ps, lab in zip(expected[cell.key], labels) for p in ps]
        assert row["frame_accuracy"] == np.mean(frames_right) and row["frames"] == 24
        assert np.isclose(row["temporal_flip_rate"], _flip_rate(expected[cell.key]))
    clean, flick = _flip_rate(expected["clean"]), _flip_rate(expected["flicker:5"])
    assert flick > clean  # the flickering lamp moves frames between the endpoint's bands: the test can fail
    assert np.isclose(rows["flicker"]["temporal_flip_rate_clean"], clean)
    assert np.isclose(rows["flicker"]["flip_rate_added"], flick - clean)

"""Generative VLMs on clips (issue 41): an ``openai-vlm:`` endpoint answers each sampled frame as its own image, and
the clip's vote and temporal flip rate follow from those answers."""

from __future__ import annotations

import base64
import io
from pathlib import Path
from typing import Any

import numpy as np
import pytest
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


def _video_loglik_by_the_loss(model: Any, processor: Any, frames: np.ndarray, prompt: str, classname: str) -> float:
    """log p(class | video prompt) from transformers' own cross-entropy: labels only on the class's tokens, so the
    mean loss times their count is minus the sum of their log-probabilities."""
    import torch

    ctx = processor(videos=[frames], text=[prompt], return_tensors="pt")
    whole = processor(videos=[frames], text=[prompt + classname], return_tensors="pt")  # the prompt ends in "\n"
    n_ctx = ctx["input_ids"].shape[1]
    labels = whole["input_ids"].clone()
    labels[:, :n_ctx] = -100
    with torch.inference_mode():
        loss = model(**whole, labels=labels).loss
    return -float(loss) * (whole["input_ids"].shape[1] - n_ctx)


def test_a_video_model_answers_each_clip_as_one_video_and_the_answer_is_stored_per_clip(
        tmp_path: Path, monkeypatch: Any) -> None:
    import torch
    from transformers import Qwen2VLForConditionalGeneration

    from domainbench.data.clip_samples import write_sample_clips
    from domainbench.data.clips import Sampling
    from domainbench.engine.clip_kind import clip_cells, corrupt, load_clip_run, open_inputs, start_clip_run
    from domainbench.engine.clip_output import prediction_rows
    from domainbench.models.generative import VLMOptions
    from domainbench.models.hf_vlm_backend import load_hf_vlm
    from domainbench.records.config import CorruptionChoice, DomainConfig, RunConfig
    from domainbench.store import open_store
    from tests.models.tiny_vlms import save_tiny_llava, save_tiny_qwen2_vl

    clips = write_sample_clips(tmp_path / "clips", per_class=1, frames=6, size=32, classes=2, seed=0)
    folder = save_tiny_qwen2_vl(tmp_path / "qwen")
    name = f"hf-vlm:{folder}"
    seen: list[tuple[int, ...]] = []
    forward = Qwen2VLForConditionalGeneration.forward

    def spy(self: Any, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("video_grid_thw") is not None:
            seen.append(tuple(int(x) for x in kwargs["video_grid_thw"][0]))
        return forward(self, *args, **kwargs)

    monkeypatch.setattr(Qwen2VLForConditionalGeneration, "forward", spy)
    domain = DomainConfig(domain="d", corruptions=[CorruptionChoice(name="flicker", severities=[5])])
    cfg = RunConfig(dataset=str(clips), image_size=32, workers=0, models=[name])
    store = open_store(f"sqlite:///{tmp_path / 'db.sqlite'}")
    rid = start_clip_run(store, domain, cfg, Sampling(frames=4), "video-clips")
    result = load_clip_run(store, rid)
    store.close()
    # the video path was taken: 2 cells x 2 clips x 2 classes forwards, each of a 4-frame video (2 temporal patches
    # of 2 frames; 32-px frames rounded to 28 px, 2 x 2 patches of 14 px)
    assert seen == [(2, 2, 2)] * 8

    m = load_hf_vlm(folder, torch.device("cpu"), name)
    m.configure([p.name for p in sorted(clips.iterdir())], VLMOptions())
    assert m.accepts_video()
    (prompt,) = m.video_prompts()
    inputs = open_inputs(domain, cfg, Sampling(frames=4))
    for key in ("clean", "flicker:5"):
        unit = result.units[f"{name}\t{key}"]
        assert len(unit["preds"]) == 2 and all(len(p) == 4 for p in unit["preds"])  # frames still answered one by one
        (cell,) = [c for c in clip_cells(domain) if c.key == key]
        frames = [corrupt(cell, c, cfg.seed) for c in inputs.clips]
        want = [int(np.argmax([_video_loglik_by_the_loss(m.model, m.processor, f, prompt, cls) for cls in m.classes]))
                for f in frames]
        assert unit["video_preds"] == want and "video_answers" not in unit
    # the whole-clip answers reach the rows and the prediction export
    labels = np.array([c["label"] for c in result.clips])
    clean_video = np.array(result.units[f"{name}\tclean"]["video_preds"])
    flicker_video = np.array(result.units[f"{name}\tflicker:5"]["video_preds"])
    rows = {r["corruption"]: r for r in result.rows}
    assert rows["clean"]["clip_accuracy_video"] == pytest.approx(np.mean(clean_video == labels))
    assert rows["flicker"]["clip_accuracy_video"] == pytest.approx(np.mean(flicker_video == labels))
    assert rows["flicker"]["video_answer_flip_rate"] == pytest.approx(np.mean(flicker_video != clean_video))
    assert rows["clean"]["video_answer_flip_rate"] is None
    exported = {(p["corruption"], p["clip"]): p["clip_prediction_video"] for p in prediction_rows(result)}
    for c, clip in enumerate(result.clips):
        assert exported[("flicker", clip["clip"])] == m.classes[flicker_video[c]]
        np.testing.assert_allclose(m.classify_videos(frames).scores,
                                   [[_video_loglik_by_the_loss(m.model, m.processor, f, prompt, cls) for cls in m.classes]
                                    for f in frames], rtol=1e-4)
    # a model without video input (LLaVA) keeps the frame-by-frame answers only
    llava = load_hf_vlm(save_tiny_llava(tmp_path / "llava"), torch.device("cpu"), "hf-vlm:llava")
    llava.configure(["a", "b"], VLMOptions())
    assert not llava.accepts_video()

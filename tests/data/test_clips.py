"""Clip datasets (``data.clips``): discovery, sampling by presentation time, and each bad input's one line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from domainbench.data import clips as clips_mod
from domainbench.data.clip_samples import encode_clip, moving_item_frames
from domainbench.data.clips import (Sampling, UnreadableClipError, decode_clip, decode_clips, is_clip_dataset,
                                    open_clips, sample_times)
from domainbench.errors import UserInputError


def _frames(n: int, size: int = 32) -> np.ndarray:
    # each frame's mean grey level encodes its index, so a decoded frame tells which one it is
    return np.stack([np.full((size, size, 3), 10 + 20 * i, dtype=np.uint8) for i in range(n)])


def _which(frame: np.ndarray) -> int:
    return int(round((float(frame.mean()) - 10) / 20))


def _on_screen(times: list[float], t: float) -> int:
    """The frame shown at time t, by a plain loop."""
    shown = 0
    for i, s in enumerate(times):
        if s <= t + 1e-12:
            shown = i
    return shown


def test_frames_are_sampled_evenly_by_time_on_a_variable_frame_rate_clip(tmp_path: Path) -> None:
    # 12 frames, the first six 0.05 s apart and the rest 0.25 s apart: by index, an even sample would crowd
    # into the first 0.3 s; by time it spreads over the clip's 1.75 s
    times = [0.05 * i for i in range(6)] + [0.3 + 0.25 * i for i in range(6)]
    path = encode_clip(_frames(12), tmp_path / "a" / "vfr.mp4", fps=20, times=times)
    ds = open_clips(str(tmp_path), image_size=32)
    sampling = Sampling(frames=4, seed=3)
    got = decode_clip(ds.clips[0], sampling, 32)
    step = float(np.median(np.diff(times)))
    end = times[-1] + step
    u = clips_mod._offset(3, ds.clips[0].name)
    want = sorted({_on_screen(times, times[0] + (k + u) * (end - times[0]) / 4) for k in range(4)})
    assert got.indices == want
    assert [_which(f) for f in got.frames] == want  # the pixels are those frames'
    assert got.times == pytest.approx([times[i] for i in want], abs=1e-3)
    assert max(want) >= 8  # the sample reaches into the slow second half
    assert path.is_file()


def test_fps_sampling_and_max_frames_by_brute_force() -> None:
    times = [0.0, 0.1, 0.2, 0.5, 0.55, 0.9, 1.3, 1.4]
    for fps, most in ((2.0, None), (5.0, 3), (50.0, None)):
        s = Sampling(frames=None, fps=fps, max_frames=most, seed=1)
        u = clips_mod._offset(1, "c")
        targets, t = [], u / fps
        while t < 1.5 and (most is None or len(targets) < most):
            targets.append(t)
            t += 1 / fps
        assert sample_times(times, 1.5, s, "c") == sorted({_on_screen(times, x) for x in targets})
    # more frames asked than the clip has: each frame once, none repeated
    assert sample_times(times, 1.5, Sampling(frames=20), "c") == list(range(8))


def test_the_same_seed_samples_the_same_frames_and_another_may_not() -> None:
    times = list(np.arange(100) / 25)
    a = sample_times(times, 4.0, Sampling(frames=8, seed=0), "x")
    assert a == sample_times(times, 4.0, Sampling(frames=8, seed=0), "x")
    assert len(a) == 8 and any(sample_times(times, 4.0, Sampling(frames=8, seed=s), "x") != a for s in range(1, 6))


def test_frame_folders_manifests_and_class_folders(tmp_path: Path) -> None:
    from PIL import Image

    folder = tmp_path / "ds" / "cat" / "clip_x"
    folder.mkdir(parents=True)
    for i, f in enumerate(_frames(6)):
        Image.fromarray(f).save(folder / f"{i + 1:04d}.png")
    rng = np.random.default_rng(0)
    encode_clip(moving_item_frames(np.full((28, 28), 200, np.uint8), 6, 32, rng), tmp_path / "ds" / "dog" / "d.mp4")
    assert is_clip_dataset(str(tmp_path / "ds")) and not is_clip_dataset(str(tmp_path))
    stills = tmp_path / "stills" / "cat"
    (stills / "sub").mkdir(parents=True)
    for name in ("a.png", "sub/b.png"):
        Image.fromarray(_frames(1)[0]).save(stills / name)
    assert not is_clip_dataset(str(tmp_path / "stills"))  # still images with a stray folder: an image dataset
    assert is_clip_dataset(str(tmp_path / "ds" / "cat" / "..")) and not is_clip_dataset("sample")
    ds = open_clips(str(tmp_path / "ds"), image_size=32)
    assert ds.classes == ["cat", "dog"] and [c.label for c in ds.clips] == [0, 1]
    got = decode_clip(ds.clips[0], Sampling(frames=3, seed=0), 32)
    assert [_which(f) for f in got.frames] == got.indices and len(got.indices) == 3
    assert len(ds.paths) == 7  # six frames and one video: what the fingerprint reads
    (tmp_path / "m.csv").write_text("clip,label\nds/cat/clip_x,cat\nds/dog/d.mp4,dog\n")
    m = open_clips(str(tmp_path / "m.csv"), image_size=32)
    assert is_clip_dataset(str(tmp_path / "m.csv")) and [c.label for c in m.clips] == [0, 1]


def _audio_only(path: Path) -> Path:
    import av

    with av.open(str(path), "w") as out:
        stream = out.add_stream("aac", rate=8000)
        for i in range(4):
            frame = av.AudioFrame.from_ndarray(np.zeros((1, 1024), dtype=np.float32), format="fltp", layout="mono")
            frame.sample_rate = 8000
            frame.pts = i * 1024
            for p in stream.encode(frame):
                out.mux(p)
        for p in stream.encode():
            out.mux(p)
    return path


@pytest.mark.parametrize("case", ["not_a_video", "truncated", "audio_only", "empty"])
def test_each_unreadable_clip_is_one_line_naming_it_and_the_fix_or_skipped(tmp_path: Path, case: str) -> None:
    root = tmp_path / "ds"
    good = encode_clip(_frames(6), root / "a" / "good.mp4")
    encode_clip(_frames(6), root / "b" / "good2.mp4")
    bad = root / "b" / "bad.mp4"
    if case == "not_a_video":
        bad.write_text("this is not a video\n")
    elif case == "truncated":
        bad.write_bytes(good.read_bytes()[:200])
    elif case == "audio_only":
        _audio_only(bad)
    else:
        bad.write_bytes(b"")
    ds = open_clips(str(root), image_size=32)
    with pytest.raises(UnreadableClipError) as e:
        decode_clips(ds, Sampling(frames=4))
    msg = str(e.value)
    assert "b/bad.mp4" in msg and "--skip-unreadable" in msg and "\n" not in msg
    if case == "audio_only":
        assert "no video stream" in msg
    decoded, skipped = decode_clips(ds, Sampling(frames=4), skip_unreadable=True)
    assert [d.clip.name for d in decoded] == ["a/good.mp4", "b/good2.mp4"] and [s[0] for s in skipped] == ["b/bad.mp4"]


def test_frames_over_the_bound_and_bad_sampling_options_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    encode_clip(_frames(4, 64), tmp_path / "a" / "big.mp4")
    ds = open_clips(str(tmp_path), image_size=32)
    monkeypatch.setattr(clips_mod, "MAX_FRAME_SIDE", 48)
    with pytest.raises(UnreadableClipError, match=r"a/big.mp4: has 64x64 frames, over the 48-pixel bound"):
        decode_clips(ds, Sampling(frames=2))
    for bad, pattern in ((Sampling(frames=0), r"--frames 0: .*--frames N with N >= 1"),
                         (Sampling(frames=4, fps=2.0), "give one"), (Sampling(frames=None, fps=-1.0), "--fps -1.0"),
                         (Sampling(frames=None, fps=2.0, max_frames=0), "--max-frames 0"),
                         (Sampling(frames=None, max_frames=4), "--max-frames 4 bounds --fps sampling; give --fps")):
        with pytest.raises(UserInputError, match=pattern):
            bad.check()
    assert Sampling(frames=None).check() == Sampling(frames=8)  # the default


def test_decoding_in_worker_processes_gives_the_same_frames(tmp_path: Path) -> None:
    for c in range(2):
        for j in range(2):
            encode_clip(_frames(6 + j + c), tmp_path / f"c{c}" / f"{j}.mp4")
    ds = open_clips(str(tmp_path), image_size=32)
    here, _ = decode_clips(ds, Sampling(frames=4, seed=2))
    pooled, _ = decode_clips(ds, Sampling(frames=4, seed=2), workers=2, parallel_from=2)
    assert [d.clip.name for d in pooled] == [d.clip.name for d in here]
    for a, b in zip(here, pooled):
        assert np.array_equal(a.frames, b.frames) and a.indices == b.indices and a.times == b.times

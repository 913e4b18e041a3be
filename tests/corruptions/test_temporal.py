"""Temporal corruptions and image corruptions on clips (``domainbench.corruptions.clips``).

The clips are made here: bundled Fashion-MNIST items moving over a photograph (scikit-learn's
sample image), 8 to 16 frames of 48 x 64 pixels, so every test runs in well under a second.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import platform
import subprocess
import sys
from functools import lru_cache

import cv2
import numpy as np
import pytest
from skimage.metrics import structural_similarity
from sklearn.datasets import load_sample_image

from domainbench import corruptions
from domainbench.corruptions import CorruptionError, corrupt_clip, is_temporal, temporal_names
from domainbench.corruptions.clips import clip_params, frame_seeds
from domainbench.corruptions.kernels.temporal import (
    CameraShakeParams,
    ExposureLagParams,
    FlickerParams,
    RollingShutterParams,
    exposure_error,
    beat_hz,
    flicker_gains,
    h264_encoder,
    kept_sources,
    mains_for,
    rgb_to_yuv420,
    shake_trajectory,
    yuv420_to_rgb,
)
from domainbench.data import load_sample

FIRST = {"flicker", "frame_drop"}
#: the four the issue's end-to-end run needs
CORE = {"flicker", "frame_drop", "camera_shake", "h264_compression"}


@lru_cache
def moving_clip(n_frames: int = 12, h: int = 48, w: int = 64, item: int = 0) -> np.ndarray:
    """A Fashion-MNIST item sliding right and down over a photograph: every frame differs from the others."""
    background = cv2.resize(load_sample_image("china.jpg"), (w, h), interpolation=cv2.INTER_AREA)
    sprite = load_sample().arrays[item]
    sprite = sprite[..., 0] if sprite.ndim == 3 else sprite
    sprite = cv2.resize(sprite, (20, 20), interpolation=cv2.INTER_AREA)
    frames = np.repeat(background[None], n_frames, axis=0)
    for t in range(n_frames):
        y, x = 2 + (t * (h - 24)) // max(n_frames - 1, 1), 2 + (t * (w - 24)) // max(n_frames - 1, 1)
        patch = frames[t, y:y + 20, x:x + 20]
        patch[:] = np.maximum(patch, sprite[..., None])
    frames.setflags(write=False)
    return frames


def damage(clean: np.ndarray, corrupted: np.ndarray) -> float:
    return float(np.abs(corrupted.astype(np.float64) - clean.astype(np.float64)).mean())


def test_the_temporal_corruptions_are_registered_and_marked() -> None:
    assert CORE <= set(temporal_names())
    assert temporal_names() == corruptions.names(temporal=True)
    assert set(corruptions.names()) == set(corruptions.names(temporal=False)) | set(temporal_names())
    assert is_temporal("flicker") and not is_temporal("gaussian_noise")
    entries = {e["name"]: e for e in corruptions.catalogue()}
    assert entries["flicker"]["temporal"] is True and entries["fog"]["temporal"] is False
    with pytest.raises(CorruptionError, match="unknown corruption.*flicker"):
        is_temporal("flickr")


@pytest.mark.parametrize("name", sorted(FIRST))
def test_a_still_image_is_refused_with_the_fix(name: str) -> None:
    img = moving_clip()[0]
    with pytest.raises(CorruptionError, match=f"{name}.*temporal.*corrupt_clip"):
        corruptions.corrupt(img, name, severity=2)
    with pytest.raises(CorruptionError, match="temporal"):
        corruptions.corrupt_batch(moving_clip()[:2], name, severity=2)
    with pytest.raises(CorruptionError, match="composition step.*temporal"):
        corruptions.check_steps([("fog", 2), (name, 2)])


@pytest.mark.parametrize("name", [*sorted(corruptions.names(temporal=True)), "gaussian_noise", "motion_blur"])
def test_severity_zero_is_a_bit_exact_copy(name: str) -> None:
    clip = moving_clip()
    out = corrupt_clip(name, clip, 0, seed=5, fps=30)
    np.testing.assert_array_equal(out, clip)
    assert out is not clip and out.flags.writeable and out.dtype == np.uint8
    assert clip_params(name, 0) is None


@pytest.mark.parametrize("name", sorted(corruptions.names(temporal=True)))
def test_ladder_rises_with_severity(name: str) -> None:
    """Mean |corrupted - clean| over 3 clips x seeds (common random numbers) rises at every step."""
    curves = []
    for k in range(3):
        clip = moving_clip(16, item=k)
        curves.append([damage(clip, corrupt_clip(name, clip, s, seed=100 + k, fps=30)) for s in range(6)])
    curve = np.mean(curves, axis=0)
    assert curve[0] == 0.0
    assert np.all(np.diff(curve) > 0.02 * curve[-1]), curve  # each step adds at least 2 % of the strongest's damage


def test_a_float_severity_interpolates_between_the_ladders_steps() -> None:
    lo, hi = corruptions.resolve_params("flicker", severity=2), corruptions.resolve_params("flicker", severity=3)
    mid = clip_params("flicker", 2.5)
    assert mid is not None and mid["depth"] == pytest.approx((lo["depth"] + hi["depth"]) / 2)
    assert clip_params("flicker", 3.0) == hi
    clip = moving_clip()
    d = [damage(clip, corrupt_clip("flicker", clip, s, seed=1, fps=30)) for s in (2, 2.5, 3)]
    assert d[0] < d[1] < d[2]


@pytest.mark.parametrize(("light_hz", "fps", "beat"), [(100, 30, 10.0), (120, 30, 0.0), (120, 25, 5.0), (100, 25, 0.0),
                                                      (100, 29.97, 10.09), (120, 29.97, 0.12), (100, 24, 4.0)])
def test_beat_is_the_alias_of_the_lamps_pulse(light_hz: float, fps: float, beat: float) -> None:
    assert beat_hz(light_hz, fps) == pytest.approx(beat, abs=1e-9)


def test_auto_mains_picks_the_grid_that_beats_with_the_frame_rate() -> None:
    assert mains_for(30.0) == 50.0 and mains_for(25.0) == 60.0 and mains_for(24.0) == 50.0


@pytest.mark.parametrize(("fps", "mains", "expected_hz"), [(30.0, 0.0, 10.0), (25.0, 0.0, 5.0), (24.0, 60.0, 0.0 + 0.0),
                                                           (20.0, 60.0, 0.0), (40.0, 50.0, 20.0), (32.0, 50.0, 4.0)])
def test_flicker_mean_brightness_follows_the_beat(fps: float, mains: float, expected_hz: float) -> None:
    """The per-frame mean brightness ratio's FFT peaks at the alias of 2 x mains (a flat ratio where it is 0)."""
    n = 96
    still = np.repeat(moving_clip(2)[:1], n, axis=0)
    spec = corruptions.get("flicker")
    p = FlickerParams(depth=0.4, mains_hz=mains)
    out = spec.apply_clip(still, p, np.random.default_rng(3), fps)
    ratio = out.reshape(n, -1).mean(axis=1) / still.reshape(n, -1).mean(axis=1)
    if expected_hz == 0.0:
        assert np.ptp(ratio) < 0.01  # the lamp is seen at the same phase in every frame: a constant offset
        return
    spectrum = np.abs(np.fft.rfft(ratio - ratio.mean()))
    freqs = np.fft.rfftfreq(n, d=1.0 / fps)
    assert freqs[np.argmax(spectrum)] == pytest.approx(expected_hz, abs=freqs[1] / 2)
    # the modulation is the one drawn: amplitude depth / 2 around 1 - depth / 2 (rounding to uint8 aside)
    assert ratio.min() >= 1 - 0.4 - 0.01 and ratio.max() <= 1 + 0.01
    assert np.ptp(ratio) > 0.3


def test_flicker_gains_match_the_lamp_formula() -> None:
    p = FlickerParams(depth=0.5, mains_hz=50.0)
    t = np.arange(7) / 30.0
    expected = 1 - 0.25 * (1 + np.cos(2 * np.pi * 100 * t + 1.0))
    np.testing.assert_allclose(flicker_gains(7, 30.0, p, 1.0), expected, rtol=0, atol=1e-12)


def test_frame_drop_shows_only_input_frames_in_order() -> None:
    clip = moving_clip(16)
    flat = clip.reshape(16, -1)
    for seed in range(6):
        out = corrupt_clip("frame_drop", clip, 5, seed=seed, fps=30)
        assert out.shape == clip.shape
        src = [int(np.flatnonzero((flat == o.ravel()).all(axis=1))[0]) for o in out]
        assert src[0] == 0 and all(b >= a for a, b in zip(src, src[1:]))
        assert all(s == t or s == src[t - 1] for t, s in enumerate(src))  # a frame is itself or the previous one shown
    dropped = [int((kept_sources(16, corruptions.get("frame_drop").params_model(**clip_params("frame_drop", s)),
                                  np.random.default_rng(9)) != np.arange(16)).sum()) for s in range(1, 6)]
    assert dropped == sorted(dropped) and dropped[-1] > dropped[0]  # a weaker step's drops are kept at stronger ones


def test_frame_drop_rate_matches_the_two_state_model() -> None:
    """Long-run share of dropped frames = drop / (1 - burst + drop), the stationary law of the two-state chain."""
    p = corruptions.get("frame_drop").params_model(drop=0.3, burst=0.5)
    src = kept_sources(200_000, p, np.random.default_rng(0))
    share = float((src != np.arange(src.size)).mean())
    assert share == pytest.approx(0.3 / (1 - 0.5 + 0.3), abs=0.005)


def test_image_corruption_modes_static_and_independent() -> None:
    flat = np.full((4, 32, 32, 3), 128, np.uint8)
    static = corrupt_clip("gaussian_noise", flat, 3, seed=7, fps=30, mode="static")
    independent = corrupt_clip("gaussian_noise", flat, 3, seed=7, fps=30, mode="independent")
    np.testing.assert_array_equal(static[0], static[1])  # the same noise field on every frame
    assert not np.array_equal(independent[0], independent[1])  # a new draw per frame
    np.testing.assert_array_equal(corrupt_clip("gaussian_noise", flat, 3, seed=7, fps=30), independent)  # the default
    clip = moving_clip(8)
    for mode in ("static", "independent"):
        out = corrupt_clip("motion_blur", clip, 2, seed=11, fps=25, mode=mode)
        seeds = frame_seeds(11, 8, mode)
        for t in (0, 5):  # each frame is the still-image corruption with its frame's seed
            np.testing.assert_array_equal(out[t], corruptions.corrupt(clip[t], "motion_blur", severity=2, seed=seeds[t]))
    assert len(set(frame_seeds(11, 8, "independent"))) == 8 and set(frame_seeds(11, 8, "static")) == {11}


_CHILD = """
import hashlib, json, sys
import numpy as np
from domainbench.corruptions import corrupt_clip
clip = np.load(sys.argv[1])
cases = json.loads(sys.argv[2])
print(json.dumps([hashlib.sha256(corrupt_clip(n, clip, s, seed=42, fps=29.97, mode=m).tobytes()).hexdigest()
                  for n, s, m in cases]))
"""


def test_the_same_seed_gives_the_same_clip_in_another_process(tmp_path) -> None:
    clip = moving_clip(10)
    path = tmp_path / "clip.npy"
    np.save(path, clip)
    cases = [[n, 4, None] for n in sorted(temporal_names())] + [
        ["gaussian_noise", 3, "static"], ["gaussian_noise", 3, "independent"], ["flicker", 2.5, None]]
    here = [hashlib.sha256(corrupt_clip(n, clip, s, seed=42, fps=29.97, mode=m).tobytes()).hexdigest() for n, s, m in cases]
    done = subprocess.run([sys.executable, "-c", _CHILD, str(path), json.dumps(cases)], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) == here
    other = [hashlib.sha256(corrupt_clip(n, clip, s, seed=43, fps=29.97, mode=m).tobytes()).hexdigest() for n, s, m in cases]
    # and the seed matters, except to the codec, which draws nothing
    assert [c[0] for c, a, b in zip(cases, here, other) if a == b] == ["h264_compression"]


_H264_CHILD = """
import hashlib, sys
import numpy as np
from domainbench.corruptions import corrupt_clip
print(hashlib.sha256(corrupt_clip("h264_compression", np.load(sys.argv[1]), 4, seed=42, fps=29.97).tobytes()).hexdigest())
"""


def test_h264_compression_is_byte_identical_whatever_ran_before_and_whatever_the_heap_holds(tmp_path) -> None:
    """x264's SIMD macroblock-tree code read past its buffers, so the bytes hung on what the heap held there. Before
    ``cpu-independent``: about 1 call in 10 differed once other corruptions had run in the process, and both a
    process started with glibc's ``MALLOC_PERTURB_=1`` and a call made under ``mallopt(M_PERTURB, 1)`` (fresh
    allocations filled with 0xfe) differed every time."""
    clip = moving_clip(10)
    first = corrupt_clip("h264_compression", clip, 4, seed=42, fps=29.97)
    others = [n for n in sorted(temporal_names()) if n != "h264_compression"] + ["frost", "gaussian_noise", "pixelate"]
    differing = []
    for i in range(30):
        name = others[i % len(others)]
        corrupt_clip(name, clip, 3, seed=i, fps=29.97, mode=None if is_temporal(name) else "independent")
        again = corrupt_clip("h264_compression", clip, 4, seed=42, fps=29.97)
        if not np.array_equal(again, first):
            differing.append((i, name, round(damage(first, again), 3)))
    assert differing == []
    if platform.libc_ver()[0] == "glibc":
        libc = ctypes.CDLL(None)
        m_perturb = -6  # glibc's malloc.h
        for byte in (1, 0x55):
            libc.mallopt(m_perturb, byte)
            try:
                again = corrupt_clip("h264_compression", clip, 4, seed=42, fps=29.97)
            finally:
                libc.mallopt(m_perturb, 0)
            assert np.array_equal(again, first), f"M_PERTURB {byte}"
    path = tmp_path / "clip.npy"
    np.save(path, clip)
    env = {**os.environ, "MALLOC_PERTURB_": "1"}
    done = subprocess.run([sys.executable, "-c", _H264_CHILD, str(path)], capture_output=True, text=True, check=True, env=env)
    assert done.stdout.strip() == hashlib.sha256(first.tobytes()).hexdigest()
    # the codec draws nothing: another seed gives the same bytes
    assert np.array_equal(corrupt_clip("h264_compression", clip, 4, seed=43, fps=29.97), first)
    assert damage(clip, first) > 5


def test_the_codecs_colour_conversion_is_bt601_limited_range() -> None:
    """Checked against scikit-image's BT.601 ``rgb2ycbcr``/``ycbcr2rgb`` (float): Y per pixel, chroma as the mean
    of each 2 x 2 block, and back from full-resolution chroma on flat 2 x 2 blocks, all within one level."""
    from skimage.color import rgb2ycbcr, ycbcr2rgb

    rng = np.random.default_rng(5)
    h, w = 8, 12
    img = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    buf = rgb_to_yuv420(img)
    assert buf.shape == (h * 3 // 2, w) and buf.dtype == np.uint8
    flat = buf.ravel().astype(float)
    ref = rgb2ycbcr(img)
    np.testing.assert_allclose(flat[:h * w].reshape(h, w), ref[..., 0], atol=1.0)
    for k, plane in enumerate((flat[h * w:h * w * 5 // 4], flat[h * w * 5 // 4:])):
        block = ref[..., 1 + k].reshape(h // 2, 2, w // 2, 2).mean(axis=(1, 3))
        np.testing.assert_allclose(plane.reshape(h // 2, w // 2), block, atol=1.0)
    # flat 2 x 2 blocks lose nothing to subsampling; the (1, 3)/4 upsampling keeps flat chroma flat
    blocks = np.repeat(np.repeat(rng.integers(0, 256, (h // 2, w // 2, 3), dtype=np.uint8), 2, 0), 2, 1)
    flat_clip = np.broadcast_to(blocks[:1, :1], blocks.shape).copy()
    back = yuv420_to_rgb(rgb_to_yuv420(flat_clip), h, w).astype(float)
    np.testing.assert_allclose(back, flat_clip, atol=1.0)
    ycc = rgb2ycbcr(flat_clip)
    np.testing.assert_allclose(back, np.clip(ycbcr2rgb(ycc) * 255, 0, 255), atol=1.0)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"frames": moving_clip().astype(np.float32)}, r"frames must have dtype uint8, got float32 \(scale floats"),
    ({"frames": moving_clip()[0]}, r"shape \(T, H, W, 3\).*got \(48, 64, 3\).*frames\[None\]"),
    ({"frames": np.zeros((4, 32, 32, 4), np.uint8)}, r"alpha channel"),
    ({"frames": moving_clip()[:, :8]}, r"8x64; corruptions need at least 16x16"),
    ({"frames": [[0]]}, r"frames must be a numpy array"),
    ({"name": "flikker"}, r"unknown corruption 'flikker'.*flicker"),
    ({"mode": "static"}, r"'flicker' is temporal.*takes no mode.*leave mode out"),
    ({"name": "fog", "mode": "per-frame"}, r"mode of image corruption 'fog'.*independent, static.*got 'per-frame'"),
    ({"severity": 0.5}, r"severity of corruption 'flicker' must be 0 .* or in \[1, 5\]"),
    ({"severity": 6}, r"in \[1, 5\]"),
    ({"severity": True}, r"must be a number"),
    ({"fps": 0}, r"fps must be the clip's frame rate"),
    ({"fps": float("nan")}, r"fps must be"),
    ({"seed": -1}, r"seed must be in"),
])
def test_bad_input_is_one_clear_error(kwargs: dict, message: str) -> None:
    args = {"name": "flicker", "frames": moving_clip(), "severity": 2, "seed": 0, "fps": 30.0, "mode": None, **kwargs}
    with pytest.raises(CorruptionError, match=message):
        corrupt_clip(args.pop("name"), args.pop("frames"), args.pop("severity"), **args)


def test_the_input_clip_is_never_written() -> None:
    clip = np.array(moving_clip())
    before = clip.copy()
    for name in temporal_names():
        corrupt_clip(name, clip, 5, seed=1, fps=30)
    np.testing.assert_array_equal(clip, before)


def test_h264_damage_rises_with_severity_and_follows_the_group_of_pictures() -> None:
    """1 - SSIM (scikit-image, mean over frames) rises at every step, on an even and an odd frame size."""
    assert h264_encoder() == "libx264"  # PyAV's wheels bundle it; mpeg4 is only the fallback
    for h, w in ((64, 64), (49, 63)):
        clip = moving_clip(12, h, w)
        curve = [1 - ssim(clip, corrupt_clip("h264_compression", clip, s, seed=0, fps=25)) for s in range(1, 6)]
        assert np.all(np.diff(curve) > 0.03), curve
        assert curve[0] > 0.02  # severity 1 is visible
    # a key frame every 6 frames: the frames after a key frame are predicted and degrade until the next one
    spec = corruptions.get("h264_compression")
    clip = moving_clip(12, 64, 64)
    out = spec.apply_clip(clip, spec.params_model(bpp=0.05, gop=6), np.random.default_rng(0), 25.0)
    per_frame = [1 - structural_similarity(a, b, channel_axis=-1, data_range=255) for a, b in zip(clip, out)]
    assert per_frame[0] < np.mean(per_frame[1:6]) and per_frame[6] < np.mean(per_frame[7:12]), np.round(per_frame, 3)


def test_camera_shake_follows_a_smooth_trajectory_within_its_amplitude() -> None:
    p = CameraShakeParams(amplitude=10.0, exposure=0.5, max_hz=4.0)
    disp, vel = shake_trajectory(3000, 30.0, p, 1.0, np.random.default_rng(4))
    assert np.abs(disp).max() <= 10.0 + 1e-9 and np.abs(disp).max() > 5.0
    # the velocity (pixels per frame) is the derivative of the path: sampled densely, the central difference agrees
    fine_disp, fine_vel = shake_trajectory(3000, 3000.0, p, 1.0, np.random.default_rng(4))
    np.testing.assert_allclose((fine_disp[2:] - fine_disp[:-2]) / 2, fine_vel[1:-1], atol=1e-3 * np.abs(fine_vel).max())
    # smooth: no component faster than max_hz, so the path's spectrum is empty above it
    spectrum = np.abs(np.fft.rfft(disp[:, 0] - disp[:, 0].mean()))
    freqs = np.fft.rfftfreq(3000, d=1 / 30.0)
    assert spectrum[freqs > 4.5].max() < 0.02 * spectrum.max()
    # a still scene shifted by the drawn path: frame t's content moved by disp[t] (up to interpolation and blur)
    still = np.repeat(moving_clip(2, 64, 64)[:1], 6, axis=0)
    spec = corruptions.get("camera_shake")
    out = spec.apply_clip(still, CameraShakeParams(amplitude=20.0, exposure=0.0), np.random.default_rng(5), 30.0)
    d, _ = shake_trajectory(6, 30.0, CameraShakeParams(amplitude=20.0, exposure=0.0), 64 / 224, np.random.default_rng(5))
    for t in range(6):
        shift = cv2.phaseCorrelate(still[t, ..., 1].astype(np.float64), out[t, ..., 1].astype(np.float64))[0]
        np.testing.assert_allclose(shift, d[t], atol=0.35)


def test_exposure_lag_is_the_step_response_of_a_second_order_loop() -> None:
    """The exposure error equals scipy's step response of wn^2 / (s^2 + 2 z wn s + wn^2), subtracted from 1."""
    from scipy import signal

    p = ExposureLagParams(stops=2.0, settle=0.3, damping=0.4)
    fps, start, n = 30.0, 3, 40
    err = exposure_error(n, fps, p, start, -1.0)
    assert np.all(err[:start] == 0.0) and err[start] == pytest.approx(-2.0)
    wn = 1 / 0.3
    t = (np.arange(n - start)) / fps
    _, y = signal.step(signal.lti([wn**2], [1, 2 * 0.4 * wn, wn**2]), T=t)
    np.testing.assert_allclose(err[start:], -2.0 * (1 - y), atol=1e-6)
    assert err.max() > 0.3  # under-damped: the camera overshoots the new light level before settling


def test_rolling_shutter_leans_a_vertical_edge_by_the_readout_delay() -> None:
    """A vertical edge under a pan to the right: row r shows the scene speed * readout * r / H pixels further on."""
    from domainbench.corruptions.draws import RecordingGenerator

    h = w = 64
    frame = np.zeros((h, w, 3), np.uint8)
    frame[:, 32:] = 255
    clip = np.repeat(frame[None], 3, axis=0)
    p = RollingShutterParams(speed=224 / 64 * 16.0, readout=1.0, wobble=0.0)  # 16 pixels per frame at this size
    out = corruptions.get("rolling_shutter").apply_clip(clip, p, RecordingGenerator(0, {"direction": 0.0}), 30.0)
    edge = np.array([np.interp(127.5, row[:, 0].astype(float), np.arange(w)) for row in out[1]])
    np.testing.assert_allclose(edge, 31.5 - 16.0 * np.arange(h) / h, atol=0.1)  # cv2.remap: 1/32-pixel steps


def test_lens_dirt_grows_across_the_clip() -> None:
    clip = moving_clip(10)
    out = corrupt_clip("lens_dirt_buildup", clip, 4, seed=2, fps=30)
    np.testing.assert_array_equal(out[0], clip[0])  # a clean lens at the start
    dirty = [float((np.abs(o.astype(int) - c).max(axis=-1) > 8).mean()) for o, c in zip(out, clip)]
    assert all(b >= a for a, b in zip(dirty, dirty[1:])) and dirty[-1] > 0.1, dirty


@pytest.mark.parametrize("name", ["moving_rain", "moving_snow"])
def test_weather_moves_between_frames_and_keeps_its_density(name: str) -> None:
    """On a still scene consecutive frames differ (the weather moves) while the amount of weather per frame stays."""
    still = np.repeat(moving_clip(2)[:1], 6, axis=0)
    out = corrupt_clip(name, still, 3, seed=4, fps=30).astype(np.float64)
    amount = np.abs(out - still).mean(axis=(1, 2, 3))
    assert np.ptp(amount) < 0.15 * amount.mean(), amount
    assert all(np.abs(a - b).mean() > 1.0 for a, b in zip(out, out[1:]))


def test_snowflakes_fall_by_the_speed_per_frame() -> None:
    """The flake field of frame t is frame 0's shifted by t * fall / fps (pixels at this size) and the drawn drift."""
    from domainbench.corruptions.draws import RecordingGenerator
    from domainbench.corruptions.kernels.temporal import MovingSnowParams

    black = np.zeros((3, 224, 224, 3), np.uint8)
    p = MovingSnowParams(**clip_params("moving_snow", 3), ).model_copy(update={"fall": 150.0, "scene": 1.0})
    rng = RecordingGenerator(8, {"drift": 0.2})
    out = corruptions.get("moving_snow").apply_clip(black, p, rng, 30.0)[..., 0].astype(np.float64)
    # 150 px/s at 30 fps: 5 px a frame, so 10 px down and 0.2 x 10 px sideways after two frames (whole pixels: exact)
    np.testing.assert_array_equal(out[2], np.roll(out[0], (10, 2), axis=(0, 1)))
    assert not np.array_equal(out[1], out[0])


def ssim(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.mean([structural_similarity(x, y, channel_axis=-1, data_range=255) for x, y in zip(a, b)]))

"""Temporal corruptions: damage whose state evolves across the frames of a clip.

Clip kernels take (frames (T, H, W, 3) uint8, params, rng, fps) and return new frames of the
same shape (see ``domainbench.corruptions.spec``); one generator per clip, so a trajectory, a
flicker phase or a drop pattern is drawn once and followed frame after frame.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache

import cv2
import numpy as np
from pydantic import Field, field_validator

from domainbench.corruptions.draws import record
from domainbench.corruptions.kernels._common import apf, fractal_noise, size_scale, to_uint8
from domainbench.corruptions.kernels._imagenet_c import motion_trail
from domainbench.corruptions.kernels.weather import RainParams, SnowParams, snow_blend, snow_layer
from domainbench.corruptions.spec import CorruptionSpec, Params

#: mains frequencies of the world's grids; a lamp on mains pulses at twice the mains frequency
MAINS_HZ: tuple[float, float] = (50.0, 60.0)


def beat_hz(light_hz: float, fps: float) -> float:
    """The frequency (Hz, in [0, fps / 2]) at which a light pulsing at ``light_hz`` appears in frames taken at ``fps``.

    Sampling folds ``light_hz`` onto its alias: the distance to the nearest multiple of ``fps``.
    """
    r = math.fmod(light_hz, fps)
    return min(r, fps - r)


def mains_for(fps: float) -> float:
    """The grid (50 or 60 Hz) whose light beats fastest with ``fps``: the frame rate set for the *other* grid,
    which is when flicker shows (a 30 fps camera under 50 Hz light beats at 10 Hz; under 60 Hz not at all)."""
    return max(MAINS_HZ, key=lambda m: (round(beat_hz(2 * m, fps), 9), -m))


class FlickerParams(Params):
    depth: float = Field(0.2, ge=0.0, le=0.9, description="modulation depth: each frame's brightness falls to between 1 - depth and 1 of the scene's")
    mains_hz: float = Field(0.0, ge=0.0, le=70.0, description="mains frequency in Hz (the light pulses at twice it); 0 picks whichever of 50 and 60 beats with the clip's frame rate")

    @field_validator("mains_hz")
    @classmethod
    def _grid(cls, v: float) -> float:
        if v != 0.0 and v < 40.0:
            raise ValueError("mains_hz is 0 (automatic) or a grid frequency in [40, 70] Hz")
        return v


def flicker_gains(n_frames: int, fps: float, p: FlickerParams, phase: float) -> np.ndarray:
    """Per-frame brightness gain in [1 - depth, 1]: the lamp's 2 x mains pulse sampled at the frame times."""
    mains = p.mains_hz or mains_for(fps)
    t = np.arange(n_frames, dtype=np.float64) / fps
    return 1.0 - p.depth * 0.5 * (1.0 + np.cos(2.0 * np.pi * 2.0 * mains * t + phase))


def flicker(frames: np.ndarray, p: FlickerParams, rng: np.random.Generator, fps: float) -> np.ndarray:
    """Mains-light flicker: every frame scaled by the lamp's brightness at its capture time (the aliasing beat)."""
    phase = record(rng, "phase", float(rng.uniform(0.0, 2.0 * np.pi)))  # where in the lamp's cycle the clip starts
    gains = flicker_gains(frames.shape[0], fps, p, phase).astype(np.float32)
    return to_uint8(frames.astype(np.float32) * gains[:, None, None, None])


class FrameDropParams(Params):
    drop: float = Field(0.2, ge=0.0, le=0.95, description="probability that a frame after a kept one is dropped")
    burst: float = Field(0.4, ge=0.0, le=0.95, description="probability that a frame after a dropped one is dropped too (bursty loss)")


def kept_sources(n_frames: int, p: FrameDropParams, rng: np.random.Generator) -> np.ndarray:
    """For each output frame the index of the input frame shown: itself when kept, the last kept one when dropped.

    The first frame is always kept. One uniform draw per frame decides, against ``drop`` after a kept
    frame and ``burst`` after a dropped one (a two-state loss model), so for a seed the dropped
    frames of a weaker step are dropped at every stronger one (drop and burst both rise on the ladder).
    """
    u = rng.random(n_frames)
    src = np.zeros(n_frames, dtype=np.int64)
    dropped = False
    for t in range(1, n_frames):
        dropped = bool(u[t] < (p.burst if dropped else p.drop))
        src[t] = src[t - 1] if dropped else t
    return src


def frame_drop(frames: np.ndarray, p: FrameDropParams, rng: np.random.Generator, fps: float) -> np.ndarray:
    """Dropped frames replaced by repeats of the last kept one (a stalled stream or a full buffer)."""
    src = kept_sources(frames.shape[0], p, rng)
    record(rng, "dropped", int((src != np.arange(frames.shape[0])).sum()))
    return frames[src]


class CameraShakeParams(Params):
    amplitude: float = Field(6.0, ge=0.0, le=40.0, description="largest displacement of the frame in pixels at a 224-pixel short side")
    exposure: float = Field(0.5, ge=0.0, le=1.0, description="share of the frame interval the shutter is open: the blur is the path travelled meanwhile")
    max_hz: float = Field(4.0, ge=0.5, le=15.0, description="fastest component of the shake in Hz (hand tremor 1-4 Hz, vehicle vibration higher)")


#: sinusoids summed per axis: enough for a trajectory that does not look periodic over a clip
SHAKE_COMPONENTS = 3


def shake_trajectory(n_frames: int, fps: float, p: CameraShakeParams, scale: float,
                     rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Per-frame (dx, dy) displacement and (vx, vy) velocity in pixels (per frame) of a smooth random shake.

    Each axis is a sum of sinusoids with random frequencies (0.3 to ``max_hz``), phases and weights,
    normalised so its peak over a long time is ``amplitude``. The random values are drawn before
    any parameter is used, so every severity of a seed follows the same path, only larger.
    """
    unit_freq = rng.uniform(0.3 / 15.0, 1.0, (2, SHAKE_COMPONENTS))
    phases = rng.uniform(0.0, 2.0 * np.pi, (2, SHAKE_COMPONENTS))
    weights = rng.uniform(0.5, 1.0, (2, SHAKE_COMPONENTS))
    freqs = 0.3 + unit_freq * (p.max_hz - 0.3)  # Hz; [0.3, max_hz]
    weights = weights / weights.sum(axis=1, keepdims=True)
    amp = p.amplitude * scale
    t = np.arange(n_frames, dtype=np.float64)[:, None, None] / fps  # (T, 1, 1)
    arg = 2.0 * np.pi * freqs[None] * t + phases[None]  # (T, 2, K)
    disp = amp * (weights[None] * np.sin(arg)).sum(axis=-1)
    vel = amp * (weights[None] * 2.0 * np.pi * freqs[None] / fps * np.cos(arg)).sum(axis=-1)
    return disp, vel


def camera_shake(frames: np.ndarray, p: CameraShakeParams, rng: np.random.Generator, fps: float) -> np.ndarray:
    """Each frame translated along a smooth random trajectory and smeared along its motion during the exposure."""
    disp, vel = shake_trajectory(frames.shape[0], fps, p, size_scale(frames), rng)
    out = np.empty_like(frames)
    for t, frame in enumerate(frames):
        m = np.float32([[1, 0, disp[t, 0]], [0, 1, disp[t, 1]]])
        moved = cv2.warpAffine(frame, m, (frame.shape[1], frame.shape[0]), flags=cv2.INTER_LINEAR,
                               borderMode=cv2.BORDER_REFLECT_101)
        # while the shutter is open the frame travels back along its velocity: ImageNet-C's one-sided trail,
        # flat weights (a uniform smear), pointing where the content came from
        travel = float(np.hypot(*vel[t])) * p.exposure
        if travel >= 1.0:
            angle = math.degrees(math.atan2(-vel[t, 1], -vel[t, 0]))
            out[t] = to_uint8(motion_trail(moved, travel / 2.0, 1e3, angle))
        else:
            out[t] = moved
    return out


class H264Params(Params):
    bpp: float = Field(0.05, ge=0.001, le=2.0, description="bitrate in bits per pixel per frame (bitrate = bpp x width x height x fps)")
    gop: int = Field(12, ge=1, le=250, description="group of pictures: frames from one key frame to the next")


@lru_cache(maxsize=1)
def h264_encoder() -> str:
    """libx264 when PyAV's FFmpeg has it (its wheels do); mpeg4 part 2 otherwise."""
    import av

    return "libx264" if "libx264" in av.codecs_available else "mpeg4"


def rgb_to_yuv420(frame: np.ndarray) -> np.ndarray:
    """One even-sided RGB frame as a planar 4:2:0 buffer (Y, then U, then V; PyAV's ``yuv420p`` ndarray layout),
    BT.601 limited range in integer arithmetic, chroma averaged over each 2 x 2 block (centre sited).

    Done here rather than by FFmpeg's swscale, whose SIMD paths are not bit-exact with its C path, so the codec's
    input is the same on every CPU."""
    h, w = frame.shape[:2]
    r, g, b = (frame[..., c].astype(np.int32) for c in range(3))
    y = ((66 * r + 129 * g + 25 * b + 128) >> 8) + 16
    # chroma at full precision (x 256) summed over each 2 x 2 block (x 4), rounded once
    u = (-38 * r - 74 * g + 112 * b).reshape(h // 2, 2, w // 2, 2).sum(axis=(1, 3))
    v = (112 * r - 94 * g - 18 * b).reshape(h // 2, 2, w // 2, 2).sum(axis=(1, 3))
    u, v = (((c + 512) >> 10) + 128 for c in (u, v))
    planes = [np.clip(c, 0, 255).astype(np.uint8).ravel() for c in (y, u, v)]
    return np.concatenate(planes).reshape(h * 3 // 2, w)


def _upsample2(c: np.ndarray, axis: int) -> np.ndarray:
    """Twice as many samples along ``axis`` by the centre-sited (1, 3) / 4 filter, edges repeated; x 4, not rounded."""
    n = c.shape[axis]
    prev = np.take(c, np.r_[0, np.arange(n - 1)], axis=axis)
    nxt = np.take(c, np.r_[np.arange(1, n), n - 1], axis=axis)
    out = np.stack([prev + 3 * c, 3 * c + nxt], axis=axis + 1)
    shape = list(c.shape)
    shape[axis] *= 2
    return out.reshape(shape)


def yuv420_to_rgb(buf: np.ndarray, h: int, w: int) -> np.ndarray:
    """The inverse of :func:`rgb_to_yuv420` for a decoded ``yuv420p`` buffer (chroma upsampled bilinearly),
    integer arithmetic, rounded once."""
    flat = buf.reshape(-1)
    y = flat[: h * w].reshape(h, w).astype(np.int32) - 16
    u = flat[h * w: h * w * 5 // 4].reshape(h // 2, w // 2).astype(np.int32)
    v = flat[h * w * 5 // 4: h * w * 3 // 2].reshape(h // 2, w // 2).astype(np.int32)
    # chroma x 16 after the two passes; Y scaled to match
    d, e = (_upsample2(_upsample2(c, 0), 1) - 16 * 128 for c in (u, v))
    y16 = 298 * 16 * y
    rgb = np.stack([y16 + 409 * e, y16 - 100 * d - 208 * e, y16 + 516 * d], axis=-1)
    return np.clip((rgb + 2048) >> 12, 0, 255).astype(np.uint8)


#: x264 options beyond the preset. ``cpu-independent``: x264's SIMD macroblock-tree functions read past the end of
#: their buffers, so the encoding depended on whatever the heap held there (about 1 call in 10 differed once other
#: corruptions had run in the process; a fresh process with ``MALLOC_PERTURB_=1`` differed every time), and their
#: floating point is not bit-exact with the C path; with it x264 takes its C versions and gives the same bytes as
#: with all assembly off (checked), on every CPU. One thread, no scene cuts: x264's output depends on both.
X264_PARAMS = "scenecut=0:threads=1:lookahead-threads=1:cpu-independent=1"


def codec_roundtrip(frames: np.ndarray, fps: float, bitrate: int, gop: int) -> np.ndarray:
    """The clip encoded at ``bitrate`` with key frames every ``gop`` frames and decoded again: the same bytes for
    the same frames in every process and on every machine (single thread, CPU-independent x264, colour conversion
    in numpy)."""
    import av

    t, h, w = frames.shape[:3]
    # 4:2:0 chroma needs even sides: pad by repeating the edge, crop after decoding
    padded = np.pad(frames, ((0, 0), (0, h % 2), (0, w % 2), (0, 0)), mode="edge") if (h % 2 or w % 2) else frames
    ph, pw = padded.shape[1:3]
    name = h264_encoder()
    enc = av.CodecContext.create(name, "w")
    enc.width, enc.height, enc.pix_fmt = pw, ph, "yuv420p"
    enc.time_base = Fraction(1, 1000)
    enc.framerate = Fraction(fps).limit_denominator(1001)
    enc.bit_rate = int(bitrate)
    enc.gop_size = gop
    enc.thread_count = 1
    if name == "libx264":
        enc.options = {"preset": "medium", "threads": "1",
                       "x264-params": f"keyint={gop}:min-keyint={gop}:{X264_PARAMS}"}
    packets = []
    for i, frame in enumerate(padded):
        vf = av.VideoFrame.from_ndarray(rgb_to_yuv420(frame), format="yuv420p")
        vf.pts = int(round(i * 1000 / fps))
        vf.time_base = enc.time_base
        packets.extend(enc.encode(vf))
    packets.extend(enc.encode(None))
    dec = av.CodecContext.create("h264" if name == "libx264" else "mpeg4", "r")
    dec.thread_count = 1
    decoded = []
    for packet in packets:
        decoded.extend(dec.decode(packet))
    decoded.extend(dec.decode(None))
    if len(decoded) != t:
        raise RuntimeError(f"{name} round trip returned {len(decoded)} frames for {t}")
    if any(f.format.name != "yuv420p" or (f.height, f.width) != (ph, pw) for f in decoded):
        raise RuntimeError(f"{name} round trip returned frames other than {pw}x{ph} yuv420p")
    decoded.sort(key=lambda f: f.pts)
    return np.stack([yuv420_to_rgb(f.to_ndarray(), ph, pw)[:h, :w] for f in decoded])


#: short side below which a clip is enlarged before encoding: at fewer pixels the codec's fixed cost per frame
#: (headers, one macroblock row) uses up the bitrate and the strongest steps all hit its coarsest quantiser
MIN_CODEC_SIDE = 128


def h264_compression(frames: np.ndarray, p: H264Params, rng: np.random.Generator, fps: float) -> np.ndarray:
    """A real H.264 round trip: blocking, ringing and smearing that build up across each group of pictures."""
    t, h, w = frames.shape[:3]
    k = math.ceil(MIN_CODEC_SIDE / min(h, w))
    if k == 1:
        return codec_roundtrip(frames, fps, max(1000, round(p.bpp * h * w * fps)), p.gop)
    big = np.stack([cv2.resize(f, (w * k, h * k), interpolation=cv2.INTER_LINEAR) for f in frames])
    out = codec_roundtrip(big, fps, max(1000, round(p.bpp * h * w * k * k * fps)), p.gop)
    return np.stack([cv2.resize(f, (w, h), interpolation=cv2.INTER_AREA) for f in out])


class MovingRainParams(RainParams):
    exposure: float = Field(0.5, ge=0.05, le=1.0, description="share of the frame interval the shutter is open: a streak is the fall during it, so drops move streak length / exposure per frame")


def moving_rain(frames: np.ndarray, p: MovingRainParams, rng: np.random.Generator, fps: float) -> np.ndarray:
    """The rain corruption's streaks, drawn once per clip, falling along their slant from frame to frame.

    The drops wrap around the frame (a drop leaving at the bottom re-enters at the top), so the
    density stays that of the still ``rain`` corruption at the same parameters.
    """
    from domainbench.corruptions.kernels.weather import rain_drops

    h, w = frames.shape[1:3]
    slant, length, drops = rain_drops(h, w, p, rng)
    blur = max(1, int(round(3 * size_scale(frames))))
    step = length / p.exposure  # pixels a drop falls between two frames
    lo_x, hi_x = max(0, -slant), max(1, min(w, w - slant))
    span_y = max(1, h - length)
    out = np.empty_like(frames)
    for t, frame in enumerate(frames):
        fall = step * t
        ys = np.mod(drops[:, 1] + fall, span_y)
        xs = lo_x + np.mod(drops[:, 0] - lo_x + fall * slant / length, hi_x - lo_x)
        moved = np.stack([np.floor(xs), np.floor(ys)], axis=1).astype(drops.dtype)
        out[t] = apf.add_rain(np.ascontiguousarray(frame), slant, length, 1, (200, 200, 200), blur, p.darkening, moved)
    return out


class MovingSnowParams(SnowParams):
    fall: float = Field(90.0, ge=0.0, le=1000.0, description="speed the flakes fall, pixels per second at a 224-pixel short side")


def moving_snow(frames: np.ndarray, p: MovingSnowParams, rng: np.random.Generator, fps: float) -> np.ndarray:
    """The snow corruption's flake field, drawn once per clip, drifting down (and sideways with the wind) frame by frame."""
    h, w = frames.shape[1:3]
    full = snow_layer(h, w, p, rng)
    flakes = full + full[::-1, ::-1]
    drift = record(rng, "drift", float(rng.uniform(-0.3, 0.3)))  # sideways wind, as a share of the fall
    step = p.fall * size_scale(frames) / fps
    out = np.empty_like(frames)
    for t, frame in enumerate(frames):
        m = np.float32([[1, 0, drift * step * t], [0, 1, step * t]])
        moved = cv2.warpAffine(flakes, m, (w, h), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_WRAP)
        out[t] = snow_blend(frame, moved, p)
    return out


class RollingShutterParams(Params):
    speed: float = Field(12.0, ge=0.0, le=80.0, description="pan speed of the camera, pixels per frame at a 224-pixel short side")
    readout: float = Field(0.8, ge=0.0, le=1.0, description="share of the frame interval the sensor takes to read its rows top to bottom")
    wobble: float = Field(3.0, ge=0.0, le=20.0, description="amplitude of the shake on top of the pan (pixels at 224): the 'jello' wobble")


def rolling_shutter(frames: np.ndarray, p: RollingShutterParams, rng: np.random.Generator, fps: float) -> np.ndarray:
    """Rows read one after another while the camera pans and shakes: straight verticals lean and wobble.

    Row ``r`` of an H-row frame is read ``readout * r / H`` of a frame interval after row 0, so it
    shows the scene displaced by the camera's velocity times that delay.
    """
    h, w = frames.shape[1:3]
    scale = size_scale(frames)
    direction = record(rng, "direction", float(rng.uniform(-30.0, 30.0)) + 180.0 * float(rng.integers(0, 2)))
    _, vel = shake_trajectory(frames.shape[0], fps, CameraShakeParams(amplitude=p.wobble, exposure=0.0, max_hz=8.0), scale, rng)
    theta = math.radians(direction)
    pan = p.speed * scale * np.array([math.cos(theta), math.sin(theta)])
    delay = p.readout * np.arange(h, dtype=np.float32) / h  # frame intervals after row 0
    xs, ys = np.meshgrid(np.arange(w, dtype=np.float32), np.arange(h, dtype=np.float32))
    out = np.empty_like(frames)
    for t, frame in enumerate(frames):
        v = pan + vel[t]
        map_x = xs + (v[0] * delay)[:, None].astype(np.float32)
        map_y = ys + (v[1] * delay)[:, None].astype(np.float32)
        out[t] = cv2.remap(frame, map_x, map_y, interpolation=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REFLECT_101)
    return out


class ExposureLagParams(Params):
    stops: float = Field(1.5, ge=0.0, le=5.0, description="size of the light change in photographic stops (factor 2 each)")
    settle: float = Field(0.4, ge=0.02, le=5.0, description="time constant of the auto-exposure loop in seconds")
    damping: float = Field(0.5, ge=0.1, le=1.0, description="damping of the loop (1: no overshoot; lower: it overshoots and rings)")


def exposure_error(n_frames: int, fps: float, p: ExposureLagParams, start: int, sign: float) -> np.ndarray:
    """Per-frame exposure error in stops: the light changes by ``sign * stops`` at frame ``start``; the camera's
    exposure loop (second order, natural frequency ``1 / settle`` rad/s, ``damping``) closes the gap with an
    overshoot. The error is the step size times one minus the loop's unit step response."""
    tau = (np.arange(n_frames, dtype=np.float64) - start) / fps
    z, wn = p.damping, 1.0 / p.settle
    err = np.zeros(n_frames)
    after = tau >= 0
    ta = tau[after]
    if z < 1.0:
        wd = wn * math.sqrt(1.0 - z * z)
        err[after] = np.exp(-z * wn * ta) * (np.cos(wd * ta) + z / math.sqrt(1.0 - z * z) * np.sin(wd * ta))
    else:
        err[after] = np.exp(-wn * ta) * (1.0 + wn * ta)
    return sign * p.stops * err


def exposure_lag(frames: np.ndarray, p: ExposureLagParams, rng: np.random.Generator, fps: float) -> np.ndarray:
    """The scene's light jumps (a tunnel's exit, a light switched on) and auto-exposure catches up with an overshoot."""
    n = frames.shape[0]
    start = record(rng, "start", int(rng.integers(0, max(1, n // 3))))  # within the clip's first third
    sign = record(rng, "sign", float(1.0 if rng.random() < 0.5 else -1.0))  # brighter or darker
    gains = np.exp2(exposure_error(n, fps, p, start, sign)).astype(np.float32)
    return to_uint8(frames.astype(np.float32) * gains[:, None, None, None])


class LensDirtParams(Params):
    coverage: float = Field(0.2, ge=0.0, le=0.9, description="share of the lens covered by dirt at the clip's last frame (none at its first)")
    opacity: float = Field(0.7, ge=0.0, le=1.0, description="how much light the thickest dirt blocks")
    blur: float = Field(6.0, ge=0.0, le=40.0, description="defocus of the dirt (it sits on the lens, out of focus), pixels at 224")


def dirt_field(h: int, w: int, rng: np.random.Generator) -> np.ndarray:
    """Where dirt settles first: smooth noise in [0, 1] (h, w); the most-covered pixels rank highest."""
    return fractal_noise(h, w, rng, base_cells=4, octaves=4, persistence=0.6)


def lens_dirt_buildup(frames: np.ndarray, p: LensDirtParams, rng: np.random.Generator, fps: float) -> np.ndarray:
    """Dirt (mud, dust, splashes) that builds up on the lens over the clip: clean at the first frame, ``coverage`` at the last."""
    n, h, w = frames.shape[:3]
    field = dirt_field(h, w, rng)
    tint = np.array([record(rng, "tint", float(rng.uniform(0.25, 0.5)))] * 3, np.float32) * np.float32([1.0, 0.85, 0.65])
    order = np.sort(field.ravel())
    sigma = p.blur * size_scale(frames)
    out = np.empty_like(frames)
    for t, frame in enumerate(frames):
        share = p.coverage * (t / (n - 1) if n > 1 else 1.0)
        if share <= 0.0:
            out[t] = frame
            continue
        cut = order[min(order.size - 1, int(round((1.0 - share) * order.size)))]
        # thickness rises from the dirt's edge inwards, so edges are thin and soft like a real deposit
        thick = np.clip((field - cut) / max(1e-6, 1.0 - cut) * 4.0, 0.0, 1.0) * (field >= cut)
        if sigma > 0.1:
            thick = cv2.GaussianBlur(thick.astype(np.float32), (0, 0), sigmaX=sigma, borderType=cv2.BORDER_REFLECT_101)
        alpha = (np.float32(p.opacity) * thick.astype(np.float32))[..., None]
        x = frame.astype(np.float32)
        out[t] = to_uint8(x * (1 - alpha) + alpha * tint * np.float32(255.0) * (x.mean() / 255.0 + 0.5))
    return out


CORRUPTIONS: list[CorruptionSpec] = [
    CorruptionSpec(
        name="flicker",
        family="photometric",
        description=(
            "Brightness that pulses between frames under mains-powered light: the lamp's pulse, sampled at the "
            "clip's frame rate, aliases into a slow beat."
        ),
        situations=[
            "CCTV camera indoors under fluorescent tubes",
            "broadcast footage of a sports hall lit by sodium lamps",
            "dash-cam in a tunnel lit by mains lamps",
            "factory inspection camera under LED panels with a cheap driver",
            "smartphone video of a screen or a shop interior",
        ],
        params_model=FlickerParams,
        ladder={s: {"depth": d, "mains_hz": 0.0} for s, d in zip(range(1, 6), (0.08, 0.16, 0.26, 0.38, 0.52))},
        ranges={"depth": (0.04, 0.6)},
        apply_clip=flicker,
        backend="numpy (per-frame gain)",
        draws={"phase": (0.0, 2.0 * np.pi)},
    ),
    CorruptionSpec(
        name="frame_drop",
        family="digital",
        description="Frames lost in capture or transmission, each replaced by the last frame that arrived: the clip stutters and freezes.",
        situations=[
            "wireless CCTV feed over a congested network",
            "drone video downlink at the edge of its range",
            "body-cam recording to a slow memory card",
            "video call or live stream on a weak mobile connection",
            "robot camera whose frames are dropped by an overloaded computer",
        ],
        params_model=FrameDropParams,
        ladder={1: {"drop": 0.1, "burst": 0.2}, 2: {"drop": 0.2, "burst": 0.3}, 3: {"drop": 0.3, "burst": 0.45},
                4: {"drop": 0.4, "burst": 0.6}, 5: {"drop": 0.5, "burst": 0.75}},
        ranges={"drop": (0.05, 0.6), "burst": (0.1, 0.8)},
        apply_clip=frame_drop,
        backend="numpy (frame indexing)",
        draws={"dropped": None},
    ),
    CorruptionSpec(
        name="camera_shake",
        family="blur",
        description="The camera shakes along a smooth random path: each frame is displaced and smeared along its motion.",
        situations=[
            "handheld phone or body-cam footage while walking",
            "dash-cam on a rough road",
            "drone camera buffeted by wind",
            "robot arm camera vibrating as the arm moves",
            "CCTV camera on a pole swaying in the wind",
        ],
        params_model=CameraShakeParams,
        ladder={1: {"amplitude": 2.0, "exposure": 0.3}, 2: {"amplitude": 4.0, "exposure": 0.4},
                3: {"amplitude": 7.0, "exposure": 0.5}, 4: {"amplitude": 11.0, "exposure": 0.6},
                5: {"amplitude": 16.0, "exposure": 0.7}},
        ranges={"amplitude": (1.0, 20.0), "exposure": (0.25, 0.8)},
        apply_clip=camera_shake,
        backend="cv2 (warpAffine per frame, ImageNet-C's motion trail along the velocity)",
    ),
    CorruptionSpec(
        name="h264_compression",
        family="digital",
        description="The clip encoded with H.264 at a low bitrate and decoded: blocks and smear that follow the group of pictures.",
        situations=[
            "CCTV recorder storing weeks of footage at a low bitrate",
            "drone video streamed over a weak radio link",
            "dash-cam or body-cam clip shared through a messaging app",
            "live broadcast over a congested network",
            "endoscopy video archived in a compressed format",
        ],
        params_model=H264Params,
        ladder={1: {"bpp": 0.2}, 2: {"bpp": 0.1}, 3: {"bpp": 0.05}, 4: {"bpp": 0.025}, 5: {"bpp": 0.0125}},
        ranges={"bpp": (0.3, 0.01)},
        apply_clip=h264_compression,
        backend="PyAV: libx264 (preset medium, one thread, cpu-independent) encode, FFmpeg h264 decode, BT.601 4:2:0 conversion in numpy; mpeg4 part 2 where libx264 is absent",
        # 2: byte-reproducible (x264 cpu-independent, colour conversion in numpy instead of swscale)
        ladder_version=2,
    ),
    CorruptionSpec(
        name="moving_rain",
        family="weather",
        description="Rain streaks that fall consistently from frame to frame over a darkened overcast scene.",
        situations=[
            "dash-cam video while driving through a downpour",
            "street CCTV during a rainstorm",
            "outdoor sports broadcast in the rain",
            "drone video in drizzle",
            "harbour camera footage during a storm",
        ],
        params_model=MovingRainParams,
        ladder={
            1: {"drops": 200.0, "drop_length": 10.0, "darkening": 0.9, "exposure": 0.5},
            2: {"drops": 400.0, "drop_length": 14.0, "darkening": 0.85, "exposure": 0.5},
            3: {"drops": 650.0, "drop_length": 18.0, "darkening": 0.8, "exposure": 0.5},
            4: {"drops": 900.0, "drop_length": 22.0, "darkening": 0.75, "exposure": 0.5},
            5: {"drops": 1300.0, "drop_length": 26.0, "darkening": 0.7, "exposure": 0.5},
        },
        ranges={"drops": (100.0, 1500.0), "drop_length": (8.0, 28.0), "darkening": (0.95, 0.65)},
        apply_clip=moving_rain,
        backend="albumentations pixel.functional.add_rain per frame (the rain corruption's streaks, moved)",
        draws={"slant": (-10.0, 10.0)},
    ),
    CorruptionSpec(
        name="moving_snow",
        family="weather",
        description="Snowflakes streaked by motion that drift down through the clip over a whitened scene.",
        situations=[
            "traffic camera footage in a snowstorm",
            "dash-cam video in a blizzard",
            "ski resort webcam stream during snowfall",
            "drone video over a snowy field while it snows",
            "body-cam footage on a winter night",
        ],
        params_model=MovingSnowParams,
        ladder={s: {"mean": 0.55, "spread": 0.3, "zoom": 4.0, "threshold": th, "radius": 12.0, "sigma": 8.0,
                    "scene": sc, "fall": 90.0}
                for s, th, sc in zip(range(1, 6), (0.97, 0.93, 0.89, 0.85, 0.81), (0.85, 0.78, 0.7, 0.62, 0.55))},
        ranges={"threshold": (0.98, 0.8), "scene": (0.9, 0.55)},
        apply_clip=moving_snow,
        backend="numpy/cv2 (the snow corruption's flake field, shifted per frame)",
        draws={"angle": (-135.0, -45.0), "drift": (-0.3, 0.3)},
    ),
    CorruptionSpec(
        name="rolling_shutter",
        family="geometric",
        description="Rows read one after another while the camera pans and shakes, so verticals lean and wobble.",
        situations=[
            "phone video panned quickly across a street",
            "drone camera on a vibrating airframe",
            "dash-cam passing close objects at speed",
            "robot camera on a fast-moving arm",
            "body-cam footage while running",
        ],
        params_model=RollingShutterParams,
        ladder={1: {"speed": 4.0, "readout": 0.8, "wobble": 1.0}, 2: {"speed": 8.0, "readout": 0.8, "wobble": 2.0},
                3: {"speed": 14.0, "readout": 0.8, "wobble": 3.0}, 4: {"speed": 22.0, "readout": 0.8, "wobble": 4.0},
                5: {"speed": 32.0, "readout": 0.8, "wobble": 5.0}},
        ranges={"speed": (2.0, 40.0), "wobble": (0.5, 6.0)},
        apply_clip=rolling_shutter,
        backend="cv2.remap per frame (row-wise displacement)",
        draws={"direction": (-30.0, 210.0)},
    ),
    CorruptionSpec(
        name="exposure_lag",
        family="photometric",
        description="The light changes suddenly and auto-exposure catches up late, overshooting: frames burn out or go dark.",
        situations=[
            "dash-cam driving out of a tunnel into daylight",
            "body-cam stepping from a dark stairwell into the street",
            "CCTV when the lights of a warehouse are switched on",
            "drone flying from shade into bright sun",
            "endoscope tip moving close to the tissue and back",
        ],
        params_model=ExposureLagParams,
        ladder={1: {"stops": 0.3, "settle": 0.12, "damping": 0.6}, 2: {"stops": 0.6, "settle": 0.16, "damping": 0.55},
                3: {"stops": 1.0, "settle": 0.2, "damping": 0.5}, 4: {"stops": 1.5, "settle": 0.25, "damping": 0.45},
                5: {"stops": 2.0, "settle": 0.3, "damping": 0.4}},
        ranges={"stops": (0.2, 2.5), "settle": (0.1, 0.4)},
        apply_clip=exposure_lag,
        backend="numpy (per-frame gain from a second-order exposure loop)",
        draws={"start": None, "sign": (-1.0, 1.0)},
    ),
    CorruptionSpec(
        name="lens_dirt_buildup",
        family="occlusion",
        description="Dirt builds up on the lens during the clip: soft, out-of-focus smudges that grow and darken the view.",
        situations=[
            "dash-cam on a muddy road",
            "off-road robot camera kicking up dust",
            "drone camera collecting spray over the sea",
            "endoscope lens smeared by fluid during a procedure",
            "outdoor CCTV lens gathering grime",
        ],
        params_model=LensDirtParams,
        ladder={1: {"coverage": 0.05, "opacity": 0.5}, 2: {"coverage": 0.1, "opacity": 0.6}, 3: {"coverage": 0.18, "opacity": 0.7},
                4: {"coverage": 0.28, "opacity": 0.8}, 5: {"coverage": 0.4, "opacity": 0.9}},
        ranges={"coverage": (0.03, 0.5), "opacity": (0.4, 0.95)},
        apply_clip=lens_dirt_buildup,
        backend="numpy/cv2 (fractal dirt field, growing threshold, Gaussian defocus)",
        draws={"tint": (0.25, 0.5)},
    ),
]

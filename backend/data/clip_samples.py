"""Short clips made from the bundled sample: a Fashion-MNIST item moving over a background.

For the tests, the video benchmark and a first try of clip runs without footage of one's own; nothing
is downloaded. Each clip is encoded with PyAV (H.264 in mp4 by default) into ``FOLDER/CLASS/NAME.mp4``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np


def moving_item_frames(item: np.ndarray, frames: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """(frames, size, size, 3) uint8: ``item`` (a 28x28 grey image) scaled up and drifting over a textured
    background along a straight line (the item stays whole in every frame)."""
    from PIL import Image

    side = max(8, int(size * 0.75))
    big = np.asarray(Image.fromarray(item).resize((side, side), Image.Resampling.BILINEAR), dtype=np.float32)
    yy, xx = np.mgrid[0:size, 0:size]
    phase = rng.uniform(0, 2 * np.pi)
    background = 40 + 20 * np.sin(xx / 5.0 + phase) * np.cos(yy / 7.0)
    room = size - side
    start, end = rng.integers(0, room + 1, 2), rng.integers(0, room + 1, 2)
    out = np.empty((frames, size, size, 3), dtype=np.uint8)
    for t in range(frames):
        f = t / max(frames - 1, 1)
        y, x = np.round(start + f * (end - start)).astype(int)
        canvas = background.copy()
        patch = canvas[y:y + side, x:x + side]
        canvas[y:y + side, x:x + side] = np.maximum(patch, big)
        out[t] = np.repeat(np.clip(canvas, 0, 255).astype(np.uint8)[..., None], 3, axis=2)
    return out


def encode_clip(frames: np.ndarray, path: Path, fps: float = 8.0, codec: str = "libx264",
                times: list[float] | None = None) -> Path:
    """Write (T, H, W, 3) uint8 frames as a video; ``times`` (seconds) gives variable frame timing."""
    import fractions

    import av

    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w") as out:
        stream = out.add_stream(codec, rate=int(round(fps)))
        stream.width, stream.height = frames.shape[2], frames.shape[1]
        stream.pix_fmt = "yuv420p"
        if codec == "libx264":
            stream.options = {"crf": "18", "preset": "ultrafast"}
        base = fractions.Fraction(1, 1000)
        stream.codec_context.time_base = base
        for i, f in enumerate(frames):
            frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(f), format="rgb24")
            frame.pts = int(round((times[i] if times is not None else i / fps) * 1000))
            frame.time_base = base
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return path


def write_sample_clips(folder: str | Path, per_class: int = 2, frames: int = 12, size: int = 48,
                       classes: int = 3, seed: int = 0) -> Path:
    """``per_class`` clips of each of the sample's first ``classes`` classes under ``folder/CLASS/``; the folder."""
    from domainbench.data import load_sample

    root = Path(folder)
    ds = load_sample()
    assert ds.arrays is not None and ds.labels is not None
    rng = np.random.default_rng(seed)
    for c in range(classes):
        items = np.flatnonzero(ds.labels == c)[:per_class]
        for j, i in enumerate(items):
            grey = ds.arrays[i][..., 0] if ds.arrays[i].ndim == 3 else ds.arrays[i]
            encode_clip(moving_item_frames(grey, frames, size, rng), root / ds.classes[c] / f"clip{j}.mp4")
    return root


__all__ = ["encode_clip", "moving_item_frames", "write_sample_clips"]

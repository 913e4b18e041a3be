"""Clips as a dataset: video files or folders of frames, and the frames a run samples from each.

A clip dataset is, like an image dataset, class folders or a CSV manifest:

- ``clips/CLASS/NAME.mp4`` (also ``.webm``, ``.mkv``, ``.avi``): one clip per video file;
- ``clips/CLASS/NAME/0001.jpg ...``: one clip per folder of frames, in file-name order;
- ``clips.csv`` with a ``clip`` column (a video file or a frame folder, relative to the CSV) and an
  optional ``label`` column.

Videos are decoded with PyAV (its wheels bundle FFmpeg). Frames are picked by presentation time, not
by frame number, so a variable-frame-rate clip is sampled evenly over its duration:

- ``frames=N``: the clip's duration ``D`` (first frame's time to the last frame's end) is cut into ``N``
  equal segments and the frame shown at ``start + (k + u) D / N`` is taken from segment ``k``, with one
  offset ``u`` in [0, 1) drawn per clip from the run's seed; a clip with fewer than ``N`` frames gives
  each of its frames once (nothing is repeated, which would hide flips);
- ``fps=F`` (with ``max_frames``): the frames shown at ``start + u / F + k / F`` for ``k = 0, 1, ...``
  while inside the clip, at most ``max_frames`` of them. Frame folders have no timestamps: their frames
  are ``FRAME_FOLDER_FPS`` apart.

The sampled frames' indices (in presentation order) and times are what a clip run stores.
"""

from __future__ import annotations

import csv
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from domainbench.data import IMAGE_EXTENSIONS, square_image
from domainbench.errors import UserInputError

VIDEO_EXTENSIONS = (".mp4", ".webm", ".mkv", ".avi")
#: the nominal rate of a folder of frames (no timestamps), for ``fps`` sampling
FRAME_FOLDER_FPS = 25.0
#: a decoded frame wider or taller than this is refused (an 8K frame is 7680 wide): one such frame
#: is ~200 MB as RGB and its clip would hold many
MAX_FRAME_SIDE = 8192
#: frames a clip may have; a longer one is refused before its frames fill memory
MAX_CLIP_FRAMES = 100_000
#: the flag that lets a run go on without the clips that do not decode
SKIP = "--skip-unreadable"


@dataclass(frozen=True)
class Sampling:
    """How frames are taken from each clip (``frames`` or ``fps``, seeded)."""

    frames: int | None = 8
    fps: float | None = None
    max_frames: int | None = None
    seed: int = 0

    def check(self) -> Sampling:
        if self.frames is not None and self.fps is not None:
            raise UserInputError("--frames and --fps both given: sample a fixed number of frames per clip (--frames N) "
                                 "or a rate (--fps F with --max-frames M); give one")
        if self.fps is None and self.frames is None:
            if self.max_frames is not None:
                raise UserInputError(f"--max-frames {self.max_frames} bounds --fps sampling; give --fps F too, or "
                                     "--frames N instead")
            return Sampling(8, None, None, self.seed)
        if self.frames is not None and self.frames < 1:
            raise UserInputError(f"--frames {self.frames}: a clip needs at least one sampled frame; give --frames N "
                                 "with N >= 1 (8 is the default)")
        if self.fps is not None and not (np.isfinite(self.fps) and self.fps > 0):
            raise UserInputError(f"--fps {self.fps}: give a positive frame rate, e.g. --fps 2")
        if self.max_frames is not None and self.max_frames < 1:
            raise UserInputError(f"--max-frames {self.max_frames}: give at least 1")
        if self.frames is not None and self.max_frames is not None:
            raise UserInputError("--max-frames bounds --fps sampling; with --frames N leave it out")
        return self

    def as_dict(self) -> dict[str, float | int | None]:
        return {"frames": self.frames, "fps": self.fps, "max_frames": self.max_frames, "seed": self.seed}


@dataclass(frozen=True)
class Clip:
    #: the clip's name: its path relative to the dataset root
    name: str
    path: Path
    label: int | None
    #: a folder of frames: its frame files in order; None: a video file
    frame_files: tuple[Path, ...] | None = None


@dataclass
class ClipDataset:
    name: str
    root: Path
    classes: list[str]
    clips: list[Clip]
    labelled: bool = True
    image_size: int = 224

    def __len__(self) -> int:
        return len(self.clips)

    @property
    def paths(self) -> list[Path]:
        """Every file the clips read (``data.fingerprint`` fingerprints these, as for an image folder)."""
        out: list[Path] = []
        for c in self.clips:
            out.extend(c.frame_files if c.frame_files is not None else (c.path,))
        return out

    def without(self, names: set[str]) -> ClipDataset:
        return ClipDataset(self.name, self.root, self.classes, [c for c in self.clips if c.name not in names],
                           self.labelled, self.image_size)


@dataclass
class DecodedClip:
    """A clip's sampled frames: ``frames`` (T, S, S, 3) uint8, their indices and times, the clip's frame rate."""

    clip: Clip
    frames: np.ndarray
    indices: list[int]
    times: list[float]
    fps: float
    total_frames: int = 0
    extra: dict[str, float] = field(default_factory=dict)


class UnreadableClipError(UserInputError):
    """A clip that cannot give frames: not a video, truncated, audio only, no decodable frame, too large."""

    def __init__(self, clip: str, why: str) -> None:
        super().__init__(f"clip {clip}: {why}; remove or re-encode it, or pass {SKIP} to leave it out (recorded)")
        self.clip, self.why = clip, why


def _is_video(p: Path) -> bool:
    return p.is_file() and p.suffix.lower() in VIDEO_EXTENSIONS


def _frames_in(folder: Path) -> tuple[Path, ...]:
    return tuple(sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_EXTENSIONS))


def is_clip_dataset(spec: str) -> bool:
    """Whether ``spec`` names clips: a CSV with a ``clip`` column, or class folders holding videos or frame folders."""
    path = Path(spec).expanduser()
    if path.is_file() and path.suffix.lower() == ".csv":
        with open(path, newline="", encoding="utf-8", errors="replace") as f:
            header = next(csv.reader(f), [])
        return "clip" in [h.strip() for h in header]
    if not path.is_dir():
        return False
    videos = frame_folders = stills = False
    for cls in (d for d in path.iterdir() if d.is_dir()):
        for entry in cls.iterdir():
            videos = videos or _is_video(entry)
            stills = stills or (entry.is_file() and entry.suffix.lower() in IMAGE_EXTENSIONS)
            frame_folders = frame_folders or (entry.is_dir() and bool(_frames_in(entry)))
    # class folders of still images with a stray sub-folder stay an image dataset
    return videos or (frame_folders and not stills)


def _clip_at(root: Path, path: Path, label: int | None) -> Clip | None:
    rel = str(path.relative_to(root)) if path.is_relative_to(root) else str(path)
    if _is_video(path):
        return Clip(rel, path, label)
    if path.is_dir():
        frames = _frames_in(path)
        return Clip(rel, path, label, frames) if frames else None
    return None


def open_clips(spec: str, classes: Sequence[str] | None = None, image_size: int = 224) -> ClipDataset:
    """The clips ``spec`` names (class folders or a manifest), in a fixed order; files are not decoded yet."""
    path = Path(spec).expanduser().absolute()
    if path.is_file():
        return _open_manifest(path, classes, image_size)
    if not path.is_dir():
        raise UserInputError(f"clip dataset {spec}: no such folder or manifest; give a folder of class folders of "
                             f"videos ({', '.join(VIDEO_EXTENSIONS)}) or of frame folders, or a CSV with a clip column")
    names = sorted(d.name for d in path.iterdir() if d.is_dir() and not d.name.startswith("."))
    clips: list[Clip] = []
    for i, cls in enumerate(names):
        for entry in sorted((path / cls).iterdir()):
            clip = _clip_at(path, entry, i)
            if clip is not None:
                clips.append(clip)
    used = sorted({c.label for c in clips if c.label is not None})
    kept = [names[i] for i in used]
    remap = {old: new for new, old in enumerate(used)}
    clips = [Clip(c.name, c.path, remap[c.label], c.frame_files) for c in clips if c.label is not None]
    if not clips:
        raise UserInputError(f"clip dataset {spec} holds no clips; put videos ({', '.join(VIDEO_EXTENSIONS)}) or "
                             "folders of frames in one folder per class")
    if classes:
        extra = [c for c in kept if c not in classes]
        if extra:
            raise UserInputError(f"clip dataset {spec} has class folders {extra} that --classes does not name; "
                                 "name them in --classes or leave --classes out")
        index = {c: i for i, c in enumerate(classes)}
        clips = [Clip(c.name, c.path, index[kept[c.label]], c.frame_files) for c in clips if c.label is not None]
        kept = list(classes)
    return ClipDataset(path.name, path, kept, clips, True, image_size)


def _open_manifest(path: Path, classes: Sequence[str] | None, image_size: int) -> ClipDataset:
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    if not rows or "clip" not in rows[0]:
        raise UserInputError(f"manifest {path}: needs a header with a clip column (and optionally label); add it")
    labelled = "label" in rows[0] and all((r.get("label") or "").strip() for r in rows)
    names = list(classes) if classes else sorted({r["label"].strip() for r in rows}) if labelled else []
    if not names:
        raise UserInputError(f"manifest {path} has no labels: give the class names with --classes a,b,...")
    index = {c: i for i, c in enumerate(names)}
    clips = []
    for n, r in enumerate(rows, start=2):
        target = (path.parent / r["clip"].strip()).absolute()
        label = None
        if labelled:
            lab = r["label"].strip()
            if lab not in index:
                raise UserInputError(f"manifest {path} line {n}: label {lab!r} is not one of --classes; fix the row")
            label = index[lab]
        clip = _clip_at(path.parent.absolute(), target, label)
        if clip is None:
            raise UserInputError(f"manifest {path} line {n}: {r['clip']!r} is not a video ({', '.join(VIDEO_EXTENSIONS)}) "
                                 "or a folder of frames; fix the path")
        clips.append(clip)
    return ClipDataset(path.stem, path.parent, names, clips, labelled, image_size)


def _offset(seed: int, clip: str) -> float:
    """The sampling offset u in [0, 1) of one clip: from the run's seed and the clip's name, the same on every
    process and executor."""
    digest = hashlib.sha256(f"{seed}\0{clip}".encode()).digest()
    return int.from_bytes(digest[:8], "little") / 2.0 ** 64


def sample_times(times: Sequence[float], end: float, sampling: Sampling, clip: str) -> list[int]:
    """Indices (into ``times``, presentation order) of the frames a run takes from a clip.

    ``times``: each frame's presentation time, increasing; ``end``: when the last frame stops showing.
    The frame taken for a target time ``t`` is the one on screen at ``t`` (the last with time <= t)."""
    t = np.asarray(times, dtype=np.float64)
    start = float(t[0])
    duration = max(end - start, 0.0)
    u = _offset(sampling.seed, clip)
    if sampling.frames is not None:
        if sampling.frames >= len(t):
            return list(range(len(t)))
        targets = start + (np.arange(sampling.frames) + u) * duration / sampling.frames
    else:
        assert sampling.fps is not None
        step = 1.0 / sampling.fps
        count = int(np.floor((duration - u * step) / step)) + 1 if duration > u * step else 1
        if sampling.max_frames is not None:
            count = min(count, sampling.max_frames)
        targets = start + u * step + np.arange(count) * step
    picked = np.clip(np.searchsorted(t, targets, side="right") - 1, 0, len(t) - 1)
    # an fps above the clip's own rate lands twice on a frame: each frame is taken once
    return sorted(set(int(i) for i in picked))


def _decode_video(clip: Clip, size: int) -> tuple[list[np.ndarray], list[float], float]:
    import av

    frames: list[np.ndarray] = []
    times: list[float] = []
    try:
        with av.open(str(clip.path)) as container:
            if not container.streams.video:
                kinds = sorted({s.type for s in container.streams}) or ["no streams"]
                raise UnreadableClipError(clip.name, f"has no video stream ({', '.join(map(str, kinds))})")
            stream = container.streams.video[0]
            rate = float(stream.average_rate or stream.guessed_rate or 0) or 0.0
            for frame in container.decode(stream):
                if frame.width > MAX_FRAME_SIDE or frame.height > MAX_FRAME_SIDE:
                    raise UnreadableClipError(clip.name, f"has {frame.width}x{frame.height} frames, over the "
                                              f"{MAX_FRAME_SIDE}-pixel bound per side; downscale it")
                if len(frames) >= MAX_CLIP_FRAMES:
                    raise UnreadableClipError(clip.name, f"has more than {MAX_CLIP_FRAMES:,} frames; cut it shorter")
                t = frame.time if frame.time is not None else len(frames) / (rate or FRAME_FOLDER_FPS)
                frames.append(square_image(frame.to_image(), size))
                times.append(float(t))
    except UnreadableClipError:
        raise
    except (av.error.FFmpegError, OSError, ValueError) as e:
        if not frames:
            raise UnreadableClipError(clip.name, f"is not a readable video ({type(e).__name__}: {e})") from None
        # a truncated file: the frames before the damage are kept, and sampled by their times
    if not frames:
        raise UnreadableClipError(clip.name, "has no decodable video frame")
    order = np.argsort(times, kind="stable")  # presentation order (decoders give it; a broken file may not)
    frames = [frames[i] for i in order]
    times = [times[i] for i in order]
    if not rate and len(times) > 1:
        rate = (len(times) - 1) / max(times[-1] - times[0], 1e-9)
    return frames, times, rate or FRAME_FOLDER_FPS


def decode_clip(clip: Clip, sampling: Sampling, size: int) -> DecodedClip:
    """The sampled frames of one clip (raises :class:`UnreadableClipError`)."""
    if clip.frame_files is not None:
        from PIL import Image, UnidentifiedImageError

        from domainbench.data.decoding import to_rgb

        times = [i / FRAME_FOLDER_FPS for i in range(len(clip.frame_files))]
        picked = sample_times(times, len(times) / FRAME_FOLDER_FPS, sampling, clip.name)
        out = []
        for i in picked:
            try:
                with Image.open(clip.frame_files[i]) as im:
                    if max(im.size) > MAX_FRAME_SIDE:
                        raise UnreadableClipError(clip.name, f"frame {clip.frame_files[i].name} is {im.size[0]}x"
                                                  f"{im.size[1]}, over the {MAX_FRAME_SIDE}-pixel bound; downscale it")
                    out.append(square_image(to_rgb(im), size))
            except (UnidentifiedImageError, OSError) as e:
                raise UnreadableClipError(clip.name, f"frame {clip.frame_files[i].name} does not decode ({e})") from None
        return DecodedClip(clip, np.stack(out), picked, [times[i] for i in picked], FRAME_FOLDER_FPS,
                           len(clip.frame_files))
    frames, times, rate = _decode_video(clip, size)
    step = float(np.median(np.diff(times))) if len(times) > 1 else 1.0 / rate
    picked = sample_times(times, times[-1] + step, sampling, clip.name)
    return DecodedClip(clip, np.stack([frames[i] for i in picked]), picked, [times[i] for i in picked], rate,
                       len(frames))


def _decode_one(args: tuple[Clip, Sampling, int]) -> DecodedClip | tuple[str, str]:
    try:
        return decode_clip(*args)
    except UnreadableClipError as e:
        return (e.clip, e.why)


#: clips below which decoding stays in this process: starting the worker processes costs more than a few clips
PARALLEL_FROM = 16


def decode_clips(ds: ClipDataset, sampling: Sampling, *, skip_unreadable: bool = False, workers: int = 0,
                 parallel_from: int = PARALLEL_FROM) -> tuple[list[DecodedClip], list[tuple[str, str]]]:
    """Every clip's sampled frames, decoded in ``workers`` processes (0 or 1: here) once there are
    ``parallel_from`` clips or more, and the clips skipped as unreadable with why, in the dataset's order
    whatever the workers. Without ``skip_unreadable`` the first unreadable clip raises its one-line error."""
    jobs = [(c, sampling, ds.image_size) for c in ds.clips]
    if workers > 1 and len(jobs) >= max(2, parallel_from):
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        # forkserver: the children import numpy, PIL and av only, never the parent's torch threads
        with ProcessPoolExecutor(min(workers, len(jobs)), mp_context=multiprocessing.get_context("forkserver")) as pool:
            results = list(pool.map(_decode_one, jobs, chunksize=max(1, len(jobs) // (4 * workers))))
    else:
        results = [_decode_one(j) for j in jobs]
    decoded, unreadable = [], []
    for r in results:
        if isinstance(r, DecodedClip):
            decoded.append(r)
        elif not skip_unreadable:
            raise UnreadableClipError(*r)
        else:
            unreadable.append(r)
    if not decoded:
        raise UserInputError(f"clip dataset {ds.name}: none of its {len(ds)} clips decodes; fix the files")
    return decoded, unreadable


__all__ = ["Clip", "ClipDataset", "DecodedClip", "FRAME_FOLDER_FPS", "MAX_FRAME_SIDE", "Sampling",
           "UnreadableClipError", "VIDEO_EXTENSIONS", "decode_clip", "decode_clips", "is_clip_dataset", "open_clips",
           "sample_times"]

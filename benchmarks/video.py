"""Frames scored per second by a clip run against a bare loop on the same frames.

The clips are made from the bundled sample (``data.clip_samples``: an item drifting over a background,
H.264 through PyAV). Both sides score the same sampled frames of the same clips with the same models:

- **run**: ``engine.clip_kind.start_clip_run`` on the clean cell (what ``domainbench run PLAN --dataset CLIPS
  --frames N`` does after its imports: open and decode the clips, sample frames by time, score every frame,
  store each unit and the metrics' rows, bootstrap intervals and paired verdicts included);
- **bare**: a plain loop: PyAV decode of each clip, the same frames picked, resized, the model's own
  preprocessing and forward pass (``model.preprocess`` then ``model.encode_image``), argmax against the
  classifier, nothing stored.

Models are loaded once, before either clock starts (their loading is not what is compared). Printed: frames
scored per second of each and their ratio, run / bare (target >= 0.8).

    python benchmarks/video.py --quick                 # 12 clips, CPU, under a minute
    python benchmarks/video.py --device cuda           # 96 clips of 64 frames at 224 px, on a GPU
    python benchmarks/video.py --device cuda --vit     # the same with open_clip ViT-B-32 (random weights, no download)
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("NO_ALBUMENTATIONS_UPDATE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
import torch

from domainbench.records.config import DomainConfig, RunConfig
from domainbench.data import square_image
from domainbench.data.clip_samples import write_sample_clips
from domainbench.data.clips import Sampling, open_clips, sample_times
from domainbench.engine import clip_kind
from domainbench.engine.scoring import load_models
from domainbench.store.sqlite_store import SQLiteStore

MODELS = ["embedded:fmnist-plain", "embedded:fmnist-augmented"]


def bare_loop(clips: list[Path], models: list, sampling: Sampling, size: int, names: list[str], batch: int,
              device: str = "cpu") -> int:
    import av

    frames_scored = 0
    decoded = []
    for path, name in zip(clips, names):
        with av.open(str(path)) as c:
            stream = c.streams.video[0]
            pictures, times = [], []
            for f in c.decode(stream):
                pictures.append(square_image(f.to_image(), size))
                times.append(float(f.time))
        step = float(np.median(np.diff(times)))
        picked = sample_times(times, times[-1] + step, sampling, name)
        decoded.append(np.stack([pictures[i] for i in picked]))
    allframes = np.concatenate(decoded)
    for ms in models:
        with torch.inference_mode():
            for i in range(0, len(allframes), batch):
                pixels = ms.model.preprocess(allframes[i:i + batch]).to(device)
                emb = torch.nn.functional.normalize(ms.model.encode_image(pixels).float(), dim=1)
                (emb @ ms.classifier.T.float()).argmax(dim=1).cpu()
        frames_scored += len(allframes)
    return frames_scored


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="12 clips of 24 frames at 64 px")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--frames", type=int, default=None, help="frames sampled per clip (default 16, quick 8)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--vit", action="store_true",
                    help="score with open_clip ViT-B-32 at random weights (the users' shape) instead of the embedded models")
    args = ap.parse_args()
    per_class, length, size = (2, 24, 64) if args.quick else (16, 64, 224)
    frames = args.frames or (8 if args.quick else 16)
    batch = 128
    with tempfile.TemporaryDirectory() as tmp:
        root = write_sample_clips(Path(tmp) / "clips", per_class=per_class, frames=length, size=size, classes=6)
        ds = open_clips(str(root), image_size=size)
        names = [c.name for c in ds.clips]
        sampling = Sampling(frames=frames, seed=0)
        store = SQLiteStore(str(Path(tmp) / "db.sqlite"))
        names_of_models = MODELS
        if args.vit:
            from engine import make_checkpoint  # benchmarks/engine.py: the same random checkpoint its run uses

            ckpt = Path(tmp) / "vit-b-32-random.safetensors"
            make_checkpoint(ckpt)
            names_of_models = [f"open_clip:ViT-B-32/{ckpt}"]
        models = load_models(names_of_models, ds.classes, args.device, batch, None, cache=store)
        cfg = RunConfig(dataset=str(root), models=names_of_models, image_size=size, device=args.device, workers=0,
                        batch_size=batch)
        clip_kind._load_models = lambda *_a, **_k: models  # loaded once above, for both sides
        domain = DomainConfig(domain="video benchmark", corruptions=[])
        run_t, bare_t = [], []
        n_run = n_bare = 0
        for r in range(args.repeats):
            if args.device.startswith("cuda"):
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            rid = clip_kind.start_clip_run(store, domain, cfg, sampling, run_id=f"bench-{r}")
            if args.device.startswith("cuda"):
                torch.cuda.synchronize()
            run_t.append(time.perf_counter() - t0)
            n_run = sum(len(c["frame_indices"]) for c in clip_kind.load_clip_run(store, rid).clips) * len(models)
            t0 = time.perf_counter()
            n_bare = bare_loop([c.path for c in ds.clips], models, sampling, size, names, batch, args.device)
            if args.device.startswith("cuda"):
                torch.cuda.synchronize()
            bare_t.append(time.perf_counter() - t0)
        assert n_run == n_bare, (n_run, n_bare)
        run_fps, bare_fps = n_run / min(run_t), n_bare / min(bare_t)
        print(f"device {args.device} ({torch.cuda.get_device_name() if args.device.startswith('cuda') else 'cpu'}); "
              f"{len(ds)} clips of {length} frames at {size} px, {frames} sampled each, {len(models)} models: "
              f"{n_run} frames scored per repeat (best of {args.repeats})")
        print(f"run   {run_fps:10.1f} frames/s  ({min(run_t):.3f} s)")
        print(f"bare  {bare_fps:10.1f} frames/s  ({min(bare_t):.3f} s)")
        print(f"ratio run / bare = {run_fps / bare_fps:.2f} (target >= 0.8)")


if __name__ == "__main__":
    main()

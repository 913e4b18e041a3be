"""`domainbench run` at the users' shape against the bare forward pass, and the store at 1,000 classes.

Measures, in one invocation:

- **run vs bare, two ratios.** 224-px JPEG photos (random crops of scikit-learn's bundled sample
  photos, saved in class folders) scored by open_clip ViT-B-32 at random weights.
  *run*: the real command, ``domainbench run DOMAIN --dataset FOLDER --models ... --no-stability
  --no-threat`` in a subprocess, with the damage stage (SSIM/PSNR per cell) on as by default; the
  weights come from a temporary safetensors checkpoint (``open_clip:ViT-B-32//path.safetensors``:
  nothing is downloaded). *bare*: a subprocess doing the same job by hand:
  ``open_clip.create_model_and_transforms("ViT-B-32")`` without pretrained weights (no checkpoint
  read at all), the same zero-shot classifier, PIL decode, the same corruptions
  (``domainbench.corruptions.corrupt``), open_clip's own preprocess, ``encode_image`` in a plain
  loop of batches of 64, the same number of forward passes.
  *Whole process*: both timed from launch to exit (interpreter start, imports, model load, the
  classifier, everything after): what a user waits for. *Stage timing*: each wall less its own
  start-up (the run's stored ``startup`` stages: imports, dataset, model load, text embeddings; the
  bare loop's imports, model creation and classifier, which it reports): the steady rate of the two.
  images/s = images × cells ÷ wall. At ``--n`` (150 by default) and, with ``--n-large N``, again at N
  (1,000 in issue 43; long on a CPU: ~7× the first).
- **peak RSS** of the run at N and 2N images (N = 600 by default, clean + one cheap cell), stage by
  stage (``run_memory.py``: imports, loading the model, scoring the shards, the report), with the
  model's parameter bytes and the peak of Python/numpy allocations while scoring, and with the
  worker processes' RSS added.
- **bytes per (model, cell)** at 1,000 images × 1,000 classes, as the engine stores the unit in SQLite
  and as BSON, for the clean pass, a plain cell and a shadow cell (per-image draws are not stored:
  0 bytes per cell, made again by ``query.drawn_of``; what they would add is printed beside).
- **report build** at ~10,000 units (``benchmarks/report_scale.py``), SQLite (and mongomock
  without ``--quick``).
- **class-prompt embeddings**: ``--classes imagenet1k --template openai80`` (1,000 classes × 80
  templates on a GPU; on a CPU, where ViT-B-32's text tower embeds ~10–20 prompts/s on 2 cores, the
  first ``--text-classes`` classes, default 25, ``--quick`` 4) encoded by the run's own path
  (``text_cache.cached_classifier``: all prompts in batches of 256) against one text forward per
  class (CLIP's notebook loop), same model, same prompts, with the rows checked equal; then the
  same call again, answered from the store's cache.

    python benchmarks/engine.py --quick     # N = 32, clean + 2 cheap cells; memory at 32 and 64: a few minutes on 2 cores
    python benchmarks/engine.py             # N = 150, clean + 6 cells; memory at 600 and 1,200
    python benchmarks/engine.py --only speed --n-large 1000   # both ratios at N = 150 and N = 1,000 (issue 43)
    python benchmarks/engine.py --only memory   # just the memory runs (600 and 1,200 images)
    python benchmarks/engine.py --only text     # just the class-prompt embeddings
    python benchmarks/engine.py --device cuda --corrupt-on device   # on a GPU machine
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

os.environ.setdefault("NO_ALBUMENTATIONS_UPDATE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np

HERE = Path(__file__).resolve().parent
CHEAP = [("brightness", [1, 3]), ("contrast", [1, 3]), ("saturate", [1, 3])]


def make_photos(root: Path, n_images: int, n_classes: int = 8, seed: int = 0) -> None:
    """``n_images`` 224-px JPEG crops of scikit-learn's sample photos, spread over class folders."""
    from PIL import Image
    from sklearn.datasets import load_sample_images

    photos = load_sample_images().images  # two 427 × 640 RGB photos bundled with scikit-learn
    rng = np.random.default_rng(seed)
    for i in range(n_images):
        src = photos[i % len(photos)]
        side = int(rng.integers(224, min(src.shape[:2]) + 1))
        y, x = int(rng.integers(0, src.shape[0] - side + 1)), int(rng.integers(0, src.shape[1] - side + 1))
        crop = Image.fromarray(src[y : y + side, x : x + side]).resize((224, 224), Image.Resampling.BICUBIC)
        folder = root / f"class_{i % n_classes}"
        folder.mkdir(parents=True, exist_ok=True)
        crop.save(folder / f"img_{i:05d}.jpg", quality=90)


def make_checkpoint(path: Path) -> None:
    """ViT-B-32 at random weights, saved where ``open_clip:ViT-B-32/PATH`` reads it (safetensors when the
    name says so: read memory-mapped, no unpickling)."""
    import open_clip
    import torch

    torch.manual_seed(0)
    model = open_clip.create_model("ViT-B-32", pretrained=None)
    if path.suffix == ".safetensors":
        from safetensors.torch import save_file

        # contiguous copies: safetensors refuses tensors that share storage or are views
        save_file({k: v.detach().contiguous().clone() for k, v in model.state_dict().items()}, str(path))
    else:
        torch.save(model.state_dict(), path)


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """(wall seconds, peak RSS in MB, stdout+stderr tail) of a subprocess."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert proc.stdout is not None
    out = proc.stdout.read().decode(errors="replace")
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"command failed: {' '.join(cmd)}\n{out[-3000:]}")
    return wall, usage.ru_maxrss / 1024, out[-2000:]


BARE = textwrap.dedent('''
    import time
    t0 = time.perf_counter()
    import sys, json, numpy as np, torch, open_clip
    from PIL import Image
    from pathlib import Path
    from domainbench import corruptions
    from domainbench.engine.jobs import image_seeds
    from domainbench.models.base import DEFAULT_TEMPLATES
    folder, cells, batch, device = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    torch.manual_seed(0)
    model, _, preprocess = open_clip.create_model_and_transforms("ViT-B-32", device=device)  # random weights
    model.eval()
    tok = open_clip.get_tokenizer("ViT-B-32")
    classes = sorted(p.name for p in Path(folder).iterdir())
    paths = sorted(Path(folder).rglob("*.jpg"))
    with torch.inference_mode():
        t = model.encode_text(tok([t.format(c) for c in classes for t in DEFAULT_TEMPLATES]).to(device)).float()
        t = torch.nn.functional.normalize(t, dim=-1).reshape(len(classes), len(DEFAULT_TEMPLATES), -1).mean(1)
        clf = torch.nn.functional.normalize(t, dim=-1)
        startup = time.perf_counter() - t0
        forwards = 0
        for corr, sev in cells:
            seeds = image_seeds(0, corr, sev, np.arange(len(paths))) if corr != "clean" else None
            for i in range(0, len(paths), batch):
                imgs = [np.asarray(Image.open(p).convert("RGB")) for p in paths[i:i + batch]]
                if seeds is not None:
                    imgs = [corruptions.corrupt(im, corr, severity=sev, seed=s) for im, s in zip(imgs, seeds[i:i + batch])]
                x = torch.stack([preprocess(Image.fromarray(im)) for im in imgs]).to(device)
                emb = torch.nn.functional.normalize(model.encode_image(x).float(), dim=-1)
                (emb @ clf.T).argmax(1).cpu()
                forwards += len(imgs)
    print(json.dumps({"forwards": forwards, "startup_s": startup}))
''')


def domain_toml(path: Path, cells: list[tuple[str, list[int]]]) -> None:
    text = 'domain = "engine benchmark"\n'
    for name, sevs in cells:
        text += f'[[corruptions]]\nname = "{name}"\nseverities = {sevs}\nreason = "benchmark"\n'
    path.write_text(text)


CLI = "from domainbench.app.cli import main; import sys; sys.argv[0] = 'domainbench'; main()"


def ckpt_path(work: Path, safetensors: bool = False) -> Path:
    return work / ("vit-b-32-random.safetensors" if safetensors else "vit-b-32-random.pt")


def run_vs_bare(n: int, cells: list[tuple[str, list[int]]], batch: int, device: str, corrupt_on: str,
                work: Path, defaults: bool = False) -> dict[str, float]:
    env = {**os.environ, "DOMAINBENCH_HOME": str(work / "home"), "PYTHONUNBUFFERED": "1"}
    ckpt = ckpt_path(work, safetensors=True)
    if not ckpt.exists():
        make_checkpoint(ckpt)
    domain_toml(work / "domain.toml", cells)
    flat = [("clean", 0)] + [(c, s) for c, sevs in cells for s in sevs]
    out: dict[str, float] = {"cells": len(flat)}
    folder = work / f"photos_{n}"
    if not folder.exists():
        make_photos(folder, n)
    run_id = f"bench-{n}"
    wall, rss, _ = timed([sys.executable, "-c", CLI,
                          *run_args(work / "domain.toml", folder, ckpt, batch, device, corrupt_on, run_id)], env)
    from domainbench.store import open_store

    store = open_store(None, work / "home")
    timings = store.get_run(run_id).timings  # type: ignore[union-attr]
    store.close()
    startup = timings.get("startup", {})
    out["run_s"], out["run_peak_rss_mb"], out["run_startup_s"] = wall, rss, sum(startup.values())
    out |= {f"run_startup_{k.replace(' ', '_')}_s": v for k, v in startup.items()}
    out["run_damage_in_process_s"] = timings.get("run", {}).get("damage", 0.0)
    print(f"domainbench run, {n} images x {len(flat)} cells: {wall:.1f} s, peak RSS {rss:.0f} MB; start-up "
          f"{out['run_startup_s']:.1f} s ({', '.join(f'{k} {v:.1f}' for k, v in startup.items())}); damage measured "
          f"in the scoring process {out['run_damage_in_process_s']:.1f} s", flush=True)
    bare_wall, bare_rss, text = timed([sys.executable, "-c", BARE, str(folder), json.dumps(flat),
                                       str(batch), "cuda" if device.startswith("cuda") else "cpu"], env)
    bare = json.loads(text.strip().splitlines()[-1])
    assert bare["forwards"] == n * len(flat), (bare["forwards"], n, len(flat))
    out["bare_s"], out["bare_peak_rss_mb"], out["bare_startup_s"] = bare_wall, bare_rss, bare["startup_s"]
    print(f"bare loop, {n} images x {len(flat)} cells: {bare_wall:.1f} s, peak RSS {bare_rss:.0f} MB; start-up "
          f"(imports, random model, classifier) {bare['startup_s']:.1f} s", flush=True)
    images = n * len(flat)
    out["run_images_per_s"] = images / out["run_s"]
    out["bare_images_per_s"] = images / out["bare_s"]
    # whole process: launch to exit, what a user waits for
    out["ratio_run_over_bare"] = out["run_images_per_s"] / out["bare_images_per_s"]
    # stage timing: each side's wall less its own start-up, the steady rates
    out["ratio_stages_run_over_bare"] = (images / (out["run_s"] - out["run_startup_s"])) / (
        images / (out["bare_s"] - out["bare_startup_s"]))
    if defaults:
        out |= with_defaults(n, flat, batch, device, corrupt_on, work, env, out["bare_images_per_s"])
    return out


def with_defaults(n: int, flat: list[tuple[str, int]], batch: int, device: str, corrupt_on: str, work: Path,
                  env: dict[str, str], bare_rate: float) -> dict[str, float]:
    """The same run with stability and threat on (the defaults): its wall against the time its forward passes
    (the images every model scored, as the run's own timings count them) take at the bare loop's rate."""
    from domainbench.store import open_store

    run_id = f"bench-defaults-{n}"
    args = [a for a in run_args(work / "domain.toml", work / f"photos_{n}", ckpt_path(work, safetensors=True), batch, device, corrupt_on,
                                run_id) if a not in ("--no-stability", "--no-threat")]
    wall, rss, _ = timed([sys.executable, "-c", CLI, *args], env)
    store = open_store(None, work / "home")
    timings = store.get_run(run_id).timings  # type: ignore[union-attr]
    store.close()
    forwards = sum(row.get("images", 0) for owner, row in timings.items() if owner != "run")
    floor = forwards / bare_rate
    print(f"domainbench run with stability and threat, {n} images x {len(flat)} cells: {wall:.1f} s, peak RSS {rss:.0f} MB; "
          f"{forwards:,.0f} forward passes take {floor:.1f} s at the bare rate: ratio {wall / floor:.2f} (target <= 1.25)",
          flush=True)
    return {"defaults_run_s": wall, "defaults_forward_passes": forwards, "defaults_wall_over_forward_time": wall / floor}


def run_args(domain: Path, folder: Path, ckpt: Path, batch: int, device: str, corrupt_on: str, run_id: str) -> list[str]:
    return ["--quiet", "run", str(domain), "--dataset", str(folder), "--models", f"open_clip:ViT-B-32/{ckpt}",
            "--no-stability", "--no-threat", "--batch-size", str(batch), "--device", device, "--corrupt-on", corrupt_on,
            "--run-id", run_id]


def memory(n: int, batch: int, device: str, corrupt_on: str, work: Path) -> dict[str, float]:
    """Peak RSS of ``domainbench run`` (clean + brightness 1) at n and 2n images, stage by stage
    (``run_memory.py``): what holds the memory, and whether anything grows with the dataset."""
    env = {**os.environ, "DOMAINBENCH_HOME": str(work / "home"), "PYTHONUNBUFFERED": "1"}
    ckpt = ckpt_path(work)
    if not ckpt.exists():
        make_checkpoint(ckpt)
    domain_toml(work / "memory.toml", [("brightness", [1])])
    out: dict[str, float] = {}
    for size in (n, 2 * n):
        folder = work / f"photos_{size}"
        if not folder.exists():
            make_photos(folder, size)
        report = work / f"memory_{size}.json"
        timed([sys.executable, str(HERE / "run_memory.py"), str(report),
               *run_args(work / "memory.toml", folder, ckpt, batch, device, corrupt_on, f"memory-{size}")], env)
        m = json.loads(report.read_text())
        out[f"peak_rss_mb_{size}"] = m["peak_rss_mb"]
        out[f"peak_rss_with_workers_mb_{size}"] = m["peak_rss_with_workers_mb"]
        print(f"memory at {size} images x 2 cells: peak RSS {m['peak_rss_mb']:.0f} MB "
              f"({m['peak_rss_with_workers_mb']:.0f} MB with the worker processes)", flush=True)
        for stage, v in m["stages"].items():
            print(f"  {stage:<18} RSS {v['start_mb']:6.0f} MB at start, peak {max(v['peak_mb'], v['start_mb']):6.0f} MB")
        print(f"  model weights (parameters) {m['model_weights_mb']:.0f} MB; Python + numpy allocations while scoring "
              f"peak at {m['traced_peak_while_scoring_mb']:.0f} MB (batches, corrupted copies, units in flight)")
    out["peak_rss_ratio_2n_over_n"] = out[f"peak_rss_mb_{2 * n}"] / out[f"peak_rss_mb_{n}"]
    return out


#: the cells whose stored bytes are measured: the clean pass (it also stores the labels), a cell whose
#: corruption draws nothing per image, and one that draws the most (shadow's polygons)
STORE_CELLS = [("clean", 0), ("gaussian_noise", 3), ("shadow", 5)]


def bytes_per_unit() -> dict[str, float]:
    """Bytes per (model, cell) at 1,000 images x 1,000 classes, as the engine's ``write_unit`` stores the unit,
    in SQLite (the JSON document) and as BSON (the document plus any split parts), for each of ``STORE_CELLS``.

    A unit is one (model, cell, shard); here one shard holds the cell's 1,000 images, so a unit is the whole
    (model, cell). What a corruption draws per image is not stored (0 B per cell; ``query.drawn_of`` makes it
    again): for shadow at 224 px, the time that takes per image and what storing the draws packed in each
    unit, as before, would add (``draws_*``).
    """
    import sqlite3
    from types import SimpleNamespace

    import bson
    import mongomock

    from domainbench import corruptions
    from domainbench.records.drawn_params import pack_params
    from domainbench.engine.jobs import CLEAN, Corrupted
    from domainbench.engine.shards import write_unit
    from domainbench.engine.tasks import Cell
    from domainbench.store.indexes import PARTS
    from domainbench.store.mongo_store import MongoStore
    from domainbench.store.sqlite_store import SQLiteStore

    sys.path.insert(0, str(HERE))
    from report_scale import CLASSES, units

    made = units(1, 1000)
    clean, corrupted = made[0], made[5]  # the first model's clean pass and a severity-5 cell
    assert len(CLASSES) == 1000 and clean.n == 1000 and clean.corruption == CLEAN
    # shadow's draws for 1,000 224-px images: what drawn_of computes again (on the dataset's images) and
    # what units stored before (packed)
    t0, drawn = time.perf_counter(), {}
    for start in range(0, 1000, 100):
        _, part = corruptions.corrupt_batch(np.zeros((100, 224, 224, 3), np.uint8), "shadow", severity=5,
                                            seeds=list(range(start, start + 100)), return_drawn=True)
        for k, v in part.items():
            drawn.setdefault(k, []).extend(v)
    out = {"draws_shadow_remake_ms_per_image": (time.perf_counter() - t0) * 1e3 / 1000,
           "draws_shadow_packed_bytes_if_stored": len(json.dumps(pack_params({"drawn": drawn})["drawn"]))}
    batch = SimpleNamespace(labels=np.asarray(clean.labels), indices=np.asarray(clean.indices), unreadable=[])
    for name, severity in STORE_CELLS:
        ref = clean if name == CLEAN else corrupted
        cell = Cell(name, severity, None, {} if name == CLEAN else corruptions.resolve_params(name, severity=severity))
        images = Corrupted(np.zeros((0,)), drawn if name == "shadow" else {})
        with tempfile.TemporaryDirectory() as d:
            client = mongomock.MongoClient()
            for store in (SQLiteStore(Path(d) / "u.sqlite"), MongoStore("mongodb://localhost/u", client=client)):
                ctx = SimpleNamespace(run_id=ref.run_id, cfg=SimpleNamespace(seed=0), store=store,
                                      dataset=SimpleNamespace(classes=CLASSES))
                write_unit(ctx, SimpleNamespace(name=ref.model), cell, 0, batch, np.asarray(ref.preds),
                           None if name == CLEAN else np.asarray(clean.preds), images, 0.0,
                           confidence=np.asarray(ref.confidence))
            (doc,) = sqlite3.connect(Path(d) / "u.sqlite").execute("SELECT doc FROM units").fetchone()
        docs = list(client["u"]["units"].find()) + list(client["u"][PARTS].find())
        out[f"unit_bytes_sqlite_{name}"] = len(doc.encode())
        out[f"unit_bytes_bson_{name}"] = sum(len(bson.encode(x)) for x in docs)
    return out


def text_embeddings(n_classes: int, device: str, work: Path) -> dict[str, float]:
    """Seconds to embed ``n_classes`` ImageNet classes × CLIP's 80 templates: the run's batched, cached path
    against one forward per class (see the module docstring)."""
    import torch

    from domainbench.engine.text_cache import cached_classifier
    from domainbench.models import create_model
    from domainbench.records.label_sets import imagenet1k, resolve_templates
    from domainbench.store import open_store

    ckpt = ckpt_path(work)
    if not ckpt.exists():
        make_checkpoint(ckpt)
    model = create_model(f"open_clip:ViT-B-32/{ckpt}", device)
    classes, templates = imagenet1k()[:n_classes], resolve_templates(["openai80"])
    store = open_store(None, work / "text-home")
    t0 = time.perf_counter()
    batched = cached_classifier(store, model, classes, templates)
    batched_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    with torch.inference_mode():
        rows = [torch.nn.functional.normalize(model.encode_text([t.format(c) for t in templates]).float(), dim=-1).mean(0)
                for c in classes]
    per_class = torch.nn.functional.normalize(torch.stack(rows), dim=-1)
    per_class_s = time.perf_counter() - t0
    torch.testing.assert_close(batched.float().cpu(), per_class.cpu(), atol=1e-4, rtol=0)  # the same classifier
    t0 = time.perf_counter()
    cached_classifier(store, model, classes, templates)
    hit_s = time.perf_counter() - t0
    store.close()
    prompts = len(classes) * len(templates)
    return {"text_prompts": prompts, "text_batched_s": batched_s, "text_per_class_s": per_class_s,
            "text_cache_hit_s": hit_s, "text_batched_over_per_class": per_class_s / batched_s}


#: issue 43's whole-process targets on a CPU: (N, ratio), largest N first
WHOLE_PROCESS_TARGETS = ((1000, 0.9), (150, 0.85))


def whole_process_target(n: int) -> tuple[int, float]:
    """(the N it was set at, the ratio) of the target a run of ``n`` images is held to: the one set at the largest
    N not above ``n`` (below 150, e.g. --quick, the N = 150 one). Keyed by the size measured, not by which option
    gave it: ``--n 1000`` alone is held to N = 1,000's target."""
    return next(((at, r) for at, r in WHOLE_PROCESS_TARGETS if n >= at), WHOLE_PROCESS_TARGETS[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="N = 32, 2 cheap cells, report build on SQLite only")
    ap.add_argument("--n", type=int, default=None, help="images of the run-vs-bare comparison (default 150; --quick 32)")
    ap.add_argument("--n-large", type=int, default=None,
                    help="run the comparison again at this many images (issue 43: 1000; ~7x as long as --n on a CPU)")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--corrupt-on", default="cpu")
    ap.add_argument("--memory-n", type=int, default=None, help="images at N for the memory runs (default 600; --quick: 32)")
    ap.add_argument("--only", choices=["speed", "memory", "store", "text"], default=None,
                    help="run one part of the benchmark")
    ap.add_argument("--text-classes", type=int, default=None,
                    help="ImageNet classes (x 80 templates) to embed (default: 1000 on a GPU, 25 on a CPU; --quick: 4)")
    ap.add_argument("--defaults", action="store_true",
                    help="also time the run with stability and threat on against its forward passes at the bare rate")
    args = ap.parse_args()
    n = args.n or (32 if args.quick else 150)
    mem_n = args.memory_n or (32 if args.quick else 600)
    cells = [("brightness", [1]), ("contrast", [1])] if args.quick else CHEAP
    import platform

    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; device {args.device}")
    res: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as d:
        if args.only in (None, "speed"):
            res |= run_vs_bare(n, cells, args.batch_size, args.device, args.corrupt_on, Path(d), args.defaults)
            if args.n_large:
                large = run_vs_bare(args.n_large, cells, args.batch_size, args.device, args.corrupt_on, Path(d))
                res |= {f"{k}_at_{args.n_large}": v for k, v in large.items()}
        if args.only in (None, "memory"):
            res |= memory(mem_n, args.batch_size, args.device, args.corrupt_on, Path(d))
        if args.only in (None, "text"):
            on_gpu = args.device.startswith("cuda")
            res |= text_embeddings(args.text_classes or (4 if args.quick else 1000 if on_gpu else 25), args.device, Path(d))
    rep: dict[str, float] = {}
    if args.only in (None, "store"):
        res |= bytes_per_unit()
        sys.path.insert(0, str(HERE))
        from report_scale import measure

        rep = measure(mongo=not args.quick)
        res |= {k: v for k, v in rep.items() if k.endswith("_s") or k == "units"}
    print(json.dumps(res, indent=1))
    if "ratio_run_over_bare" in res:
        sizes = [(n, "")] + ([(args.n_large, f"_at_{args.n_large}")] if args.n_large else [])
        for size, key in sizes:
            at, target = whole_process_target(size)
            print(f"N = {size}: whole process (launch to exit) run {res['run_images_per_s' + key]:.1f} img/s vs bare "
                  f"{res['bare_images_per_s' + key]:.1f} img/s: ratio {res['ratio_run_over_bare' + key]:.2f} "
                  f"(target >= {target:g} on a CPU, set at N = {at:,}); stage timing (each less its "
                  f"start-up: run {res['run_startup_s' + key]:.1f} s, bare {res['bare_startup_s' + key]:.1f} s): ratio "
                  f"{res['ratio_stages_run_over_bare' + key]:.2f}")
    if "peak_rss_ratio_2n_over_n" in res:
        print(f"peak RSS {res[f'peak_rss_mb_{mem_n}']:.0f} MB at N={mem_n}, {res[f'peak_rss_mb_{2 * mem_n}']:.0f} MB at "
              f"2N={2 * mem_n}: ratio {res['peak_rss_ratio_2n_over_n']:.2f} (target <= 1.15)")
    if "text_prompts" in res:
        print(f"class prompts: {res['text_prompts']:,} embedded in {res['text_batched_s']:.1f} s by the run's batched path "
              f"({res['text_prompts'] / res['text_batched_s']:.0f} prompts/s) vs {res['text_per_class_s']:.1f} s one "
              f"forward per class: {res['text_batched_over_per_class']:.2f}x; again from the store's cache: "
              f"{res['text_cache_hit_s']:.2f} s")
    if rep:
        print("bytes per (model, cell) at 1,000 images x 1,000 classes (one unit: the cell's images in one shard; "
              "target <= 32 KB, all shards together):")
        for name, severity in STORE_CELLS:
            print(f"  {name} {severity}: {res[f'unit_bytes_sqlite_{name}'] / 1024:.1f} KB SQLite, "
                  f"{res[f'unit_bytes_bson_{name}'] / 1024:.1f} KB BSON")
        print(f"draw bytes per cell: 0 (not stored; query.drawn_of makes them again: shadow at 224 px took "
              f"{res['draws_shadow_remake_ms_per_image']:.1f} ms/image here; stored packed in every model's unit, "
              f"as before, they added {res['draws_shadow_packed_bytes_if_stored'] / 1024:.1f} KB per (model, cell))")
        print(f"report of {rep['units']} units: {rep['sqlite_report_s']:.2f} s wall, {rep['sqlite_report_cpu_s']:.2f} s CPU "
              "on SQLite (target < 2 s)" + (f"; mongomock {rep['mongomock_report_s']:.2f} s" if "mongomock_report_s" in rep else ""))


if __name__ == "__main__":
    main()

"""FMR: the offline acceptance run, and the greedy against the gradient search at equal budget.

1. ``domainbench fmr``'s runner on the bundled sample: one tested model
   (embedded:fmnist-plain), the oracle = both embedded models plus a third registered model
   that needs no download (a tiny open_clip model built from a config and saved as a
   ``local:`` folder; its weights are random, so it only breaks ties between the other two).
   Prints the wall time and SA / PA / FMR / validation rate / steps.
2. Greedy (the domain's corruption catalogue) and gradient (differentiable torch corruptions)
   search on the same images, the same oracle and the same budget: images per second of each,
   and the PA each reaches. A second oracle, the augmented embedded model alone, leaves the
   searches room to flip the tested model (with the tested model inside the oracle, a flip of
   its prediction can only pass where the other members outvote it).

    python benchmarks/fmr.py [--quick] [--limit 200] [--budget 10] [--compare-limit 100]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("NO_ALBUMENTATIONS_UPDATE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
import torch

from domainbench.records.config import CorruptionChoice, DomainConfig, FmrSettings, RunConfig
from domainbench.data import open_dataset
from domainbench.fmr.differentiable import gradient_search
from domainbench.fmr.generator import SearchConfig, greedy_search
from domainbench.fmr.oracle import Oracle, load_oracle
from domainbench.api import run_plan
from domainbench.fmr.units import family_of
from domainbench.fmr.tested import load_tested
from domainbench.metrics.fmr import model_report
from domainbench.store.sqlite_store import SQLiteStore

PLAIN, AUGMENTED = "embedded:fmnist-plain", "embedded:fmnist-augmented"
DOMAIN = DomainConfig(
    domain="FMR benchmark: phone photos in a dim warehouse",
    corruptions=[CorruptionChoice(name=n) for n in ("gaussian_noise", "defocus_blur", "contrast", "brightness", "jpeg_compression")],
)
TINY_OPEN_CLIP = {
    "embed_dim": 64,
    "vision_cfg": {"image_size": 32, "layers": 2, "width": 64, "patch_size": 8, "head_width": 32},
    "text_cfg": {"context_length": 32, "vocab_size": 49408, "width": 64, "heads": 2, "layers": 2},
}


def make_tiny_open_clip(folder: Path) -> str:
    """A tiny open_clip model folder (random weights, seeded): a third offline oracle member."""
    import open_clip
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tiny.json").write_text(json.dumps(TINY_OPEN_CLIP))
    open_clip.add_model_config(folder / "tiny.json")
    torch.manual_seed(0)
    model = open_clip.create_model("tiny")
    (folder / "open_clip_config.json").write_text(json.dumps({"model_cfg": TINY_OPEN_CLIP, "preprocess_cfg": {}}))
    save_file(model.state_dict(), str(folder / "open_clip_model.safetensors"))
    return f"local:{folder}"


def acceptance_run(limit: int, budget: int, third: str, home: Path) -> None:
    store = SQLiteStore(home / "fmr.sqlite")
    cfg = RunConfig(models=[PLAIN], limit=limit, device="cpu", stability=False, threat=False)
    settings = FmrSettings(oracle=[PLAIN, AUGMENTED, third], budget=budget)
    t0 = time.perf_counter()
    run_id = run_plan(store, lambda engine: engine.start(DOMAIN, cfg, fmr=settings)).id  # the Python API's run-start path
    wall = time.perf_counter() - t0
    report = store.get_report(run_id)
    assert report is not None and report.fmr is not None
    f = report.fmr
    print(f"acceptance run: {limit} images, greedy, budget {budget}, {settings.candidates} candidates, step {settings.step_size}; "
          f"torch threads {torch.get_num_threads()}; wall {wall:.1f} s (limit 600 s)")
    for m in f.models:
        print(f"  {m.model}: SA {100 * m.sa:.1f}%  PA {100 * m.pa:.1f}%  FMR {m.fmr:.1f}  VR {100 * m.validation_rate:.1f}%  "
              f"mean steps {m.mean_steps:.2f}")
    print(f"  oracle majority agrees with labels on {100 * f.oracle.clean_agreement:.1f}% of clean images; members "
          + ", ".join(f"{k.split('/')[-1]} {100 * v:.1f}%" for k, v in f.oracle.member_accuracy.items()))


def compare(limit: int, budget: int, oracle: Oracle, label: str) -> None:
    ds = open_dataset("sample").subset(limit)
    batch = ds.load(np.arange(len(ds)))
    assert batch.labels is not None
    tested = load_tested(PLAIN, ds.classes, "cpu", 128, None, batch.images)
    votes = oracle.votes(batch.images)
    family, _ = family_of(DOMAIN)
    cfg = SearchConfig(seed=0, budget=budget, candidates=4, step_size=0.2)
    clean = tested.logits(batch.images).argmax(1).numpy()
    rows = {}
    for kind in ("greedy", "gradient"):
        t0 = time.perf_counter()
        if kind == "greedy":
            res = greedy_search(batch.images, batch.labels, batch.indices, tested, oracle, votes, family, cfg)
        else:
            res = gradient_search(batch.images, batch.labels, batch.indices, tested, oracle, votes, cfg, family)
        dt = time.perf_counter() - t0
        final = tested.logits(res.images).argmax(1).numpy()
        rows[kind] = (model_report(kind, batch.labels, clean, final, res.steps, res.validated), len(batch.images) / dt)
    print(f"greedy vs gradient, oracle {label}, {limit} images, budget {budget}, step 0.2:")
    for kind, (r, ips) in rows.items():
        print(f"  {kind:8s} {ips:7.2f} images/s   SA {100 * r.sa:.1f}%  PA {100 * r.pa:.1f}%  FMR {r.fmr:.1f}  "
              f"VR {100 * r.validation_rate:.1f}%  steps {r.mean_steps:.2f}")
    g, d = rows["greedy"][0], rows["gradient"][0]
    print(f"  gradient PA is {100 * (g.pa - d.pa):+.1f} points below greedy's "
          f"(speed ratio gradient/greedy {rows['gradient'][1] / rows['greedy'][1]:.2f})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=200)
    ap.add_argument("--budget", type=int, default=10)
    ap.add_argument("--compare-limit", type=int, default=100)
    ap.add_argument("--skip-acceptance", action="store_true")
    ap.add_argument("--quick", action="store_true", help="20 images, budget 3 (make bench)")
    args = ap.parse_args()
    if args.quick:
        args.limit, args.compare_limit, args.budget = 20, 20, 3
    with tempfile.TemporaryDirectory() as tmp:
        third = make_tiny_open_clip(Path(tmp) / "tiny-open-clip")
        if not args.skip_acceptance:
            acceptance_run(args.limit, args.budget, third, Path(tmp))
        classes = open_dataset("sample").classes
        zoo = load_oracle([PLAIN, AUGMENTED, third], classes, "cpu", 128, None)
        compare(args.compare_limit, args.budget, zoo, f"{PLAIN} + {AUGMENTED} + tiny open_clip")
        compare(args.compare_limit, args.budget, Oracle([zoo.members[1]], len(classes)), f"{AUGMENTED} alone")


if __name__ == "__main__":
    main()

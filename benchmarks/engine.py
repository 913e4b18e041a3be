"""End-to-end engine throughput against the bare forward pass, for 1 and for 3 models.

For the same images and cells, measures in one run:
- bare: ``preprocess + encode_image`` of every image once per cell and model, nothing else;
- end to end: ``Engine.start`` (loading, corruption, scoring, storing units);
and prints images per second of both, their ratio, the cost of 3 models relative to three
1-model runs (corruption is shared, so it should be well under 1), and the number of
corruption calls per image and cell, which must not grow with the number of models.

    python benchmarks/engine.py --quick
    python benchmarks/engine.py --models open_clip:ViT-B-32/openai --device cuda --limit 2000
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

os.environ.setdefault("NO_ALBUMENTATIONS_UPDATE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
import torch

from domainbench.config import CorruptionChoice, DomainConfig, RunConfig
from domainbench.data import open_dataset
from domainbench.engine.runner import Engine
from domainbench.engine.scoring import ModelState, encode
from domainbench.models import build_classifier, create_model, register_model, resolve_device
from domainbench.store.sqlite_store import SQLiteStore

DOMAIN = DomainConfig(
    domain="benchmark",
    corruptions=[CorruptionChoice(name=n, severities=[1, 3, 5]) for n in ("gaussian_noise", "motion_blur", "contrast", "jpeg_compression")],
)


@register_model("bench", known=["1", "2", "3"])
def _bench(name: str, device: torch.device):  # noqa: ANN202
    # three copies of one model: a fair 3-model run when only one real model is at hand
    m = create_model(os.environ.get("BENCH_BASE_MODEL", "embedded:fmnist-plain"), device)
    m.name = f"bench:{name}"
    return m


def bare_forward(models: list[str], cfg: RunConfig, cells: int) -> float:
    ds = open_dataset(cfg.dataset, image_size=cfg.image_size).subset(cfg.limit)
    images = ds.load(np.arange(len(ds))).images
    device = resolve_device(cfg.device)
    states = [ModelState(n, m := create_model(n, device), build_classifier(m, ds.classes).to(device), cfg.batch_size) for n in models]
    encode(states[0], images[: cfg.batch_size])  # warm-up
    if device.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for ms in states:
        for _ in range(cells):
            (encode(ms, images) @ ms.classifier.T).argmax(1)
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - t0


def end_to_end(models: list[str], cfg: RunConfig) -> tuple[float, Engine]:
    with tempfile.TemporaryDirectory() as d:
        engine = Engine(SQLiteStore(os.path.join(d, "b.sqlite")))  # type: ignore[arg-type]
        t0 = time.perf_counter()
        engine.start(DOMAIN, cfg.model_copy(update={"models": models, "baseline": models[0]}))
        return time.perf_counter() - t0, engine


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--models", default=None, help="comma-separated; default: 3 copies of BENCH_BASE_MODEL")
    ap.add_argument("--dataset", default="sample")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--workers", type=int, default=None)
    args = ap.parse_args()
    limit = args.limit or (300 if args.quick else 1000)
    three = args.models.split(",") if args.models else ["bench:1", "bench:2", "bench:3"]
    cfg = RunConfig(dataset=args.dataset, limit=limit, device=args.device, batch_size=args.batch_size,
                    workers=args.workers, stability=False, threat=False, models=three[:1])
    cells = 1 + sum(len(c.severities) for c in DOMAIN.corruptions)
    print(f"device={resolve_device(args.device)} images={limit} cells={cells} (clean + corrupted) models={three}")
    rows = []
    for models in (three[:1], three):
        n_img = limit * cells * len(models)
        bare = bare_forward(models, cfg, cells)
        e2e, engine = end_to_end(models, cfg)
        calls = engine.stats.corruption_calls / (limit * (cells - 1))
        rows.append((len(models), n_img / bare, n_img / e2e, e2e, calls))
    print(f"{'models':>6} {'bare img/s':>12} {'end-to-end img/s':>17} {'e2e/bare':>9} {'run s':>8} {'corruption calls/img/cell':>26}")
    for m, b, e, s, c in rows:
        print(f"{m:>6} {b:>12,.0f} {e:>17,.0f} {e / b:>9.2f} {s:>8.1f} {c:>26.2f}")
    one_s, three_s = rows[0][3], rows[1][3]
    print(f"3-model run / three 1-model runs = {three_s / (3 * one_s):.2f}  (< 1: corruption is shared)")


if __name__ == "__main__":
    main()

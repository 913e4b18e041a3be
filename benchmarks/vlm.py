"""Shared-prefix log-likelihood scoring vs the naive per-(image, class) forward, at 100 classes.

Both compute the same contract (docs/generative-vlms.md): the naive path runs the processor and
the whole model on image + prompt + class name once per (image, class); the shared path runs
the image + prompt prefix once per image and scores every class name from its cached
keys/values in padded batches. Prints seconds per image for each, their ratio (target >= 5x)
and the largest score difference (target <= 1e-4).

    python benchmarks/vlm.py --quick                 # tiny random LLaVA built here, CPU
    python benchmarks/vlm.py --model hf-vlm:ID_OR_DIR --device cuda   # a real model (GPU)
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import argparse  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the tiny-model builder lives with the tests

from domainbench.models import create_model  # noqa: E402
from domainbench.models.generative import VLMOptions  # noqa: E402
from domainbench.models.vlm_scoring import hwc_images, score_naive  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="2 images (default 6)")
    ap.add_argument("--model", help="hf-vlm:NAME_OR_DIR (default: a tiny random LLaVA built in a temp folder)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--classes", type=int, default=100)
    ap.add_argument("--batch-size", type=int, default=64, help="images per prefix forward and classes per chunk")
    args = ap.parse_args()
    n_images = 2 if args.quick else 6
    tmp = tempfile.TemporaryDirectory()
    name = args.model
    if name is None:
        from tests.models.tiny_vlms import save_tiny_llava

        name = f"hf-vlm:{save_tiny_llava(Path(tmp.name) / 'llava')}"
    model = create_model(name, args.device)
    classes = [f"class number {i}" if i % 3 else f"object {i}" for i in range(args.classes)]
    model.configure(classes, VLMOptions(dtype="float32"))
    images = np.random.default_rng(0).integers(0, 256, (n_images, 32, 32, 3), dtype=np.uint8)

    model.classify(images[:1], args.batch_size)  # warm-up (allocations, lazy imports)
    t0 = time.perf_counter()
    shared = model.classify(images, args.batch_size).scores
    t_shared = time.perf_counter() - t0
    t0 = time.perf_counter()
    naive = np.stack([score_naive(model.model, model.processor, im, model.prompts[0], classes, device=model.device)
                      for im in hwc_images(images, name)])
    t_naive = time.perf_counter() - t0
    diff = float(np.abs(shared - naive).max())
    ratio = t_naive / t_shared
    where = torch.cuda.get_device_name(model.device) if model.device.type == "cuda" else f"CPU ({os.cpu_count()} cores)"
    print(f"{name} on {where}: {n_images} images x {len(classes)} classes")
    print(f"  naive per-(image, class) forward: {t_naive / n_images:8.3f} s/image")
    print(f"  shared prefix + cached K/V:       {t_shared / n_images:8.3f} s/image")
    print(f"  speed-up {ratio:.1f}x (target >= 5x); max |score difference| {diff:.2e} (target <= 1e-4)")
    ok = ratio >= 5 and diff <= 1e-4
    print("PASS" if ok else "FAIL")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

"""The paths CI cannot exercise (it has no GPU), checked on a real CUDA device.

1. **Peak GPU memory.** ``domainbench.run`` on CUDA stores each model's ``peak_gpu_bytes`` (``engine/resources.py``).
   Checked against an independent measurement: the same checkpoint loaded by open_clip itself, one batch of the
   same size through ``encode_image`` with ``torch.cuda.max_memory_allocated`` around it, plus its weights.
2. **fp16 fine-tuning.** ``domainbench.finetune(precision="fp16")`` (autocast + GradScaler, refused on CPU) and
   ``precision="bf16"`` train on CUDA with finite losses, and the fp16 tower's weights differ from the base's.

The model is open_clip ViT-B-32 at random weights (no download), on 224-px photos cut from scikit-learn's samples.

    python benchmarks/cuda_checks.py [--images 128] [--batch-size 64]
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from engine import make_checkpoint, make_photos  # noqa: E402  (the engine benchmark's fixtures)


def peak_memory(work: Path, ckpt: Path, photos: Path, batch: int) -> bool:
    import numpy as np
    import open_clip
    import torch
    from PIL import Image

    import domainbench
    from domainbench.records.config import CorruptionChoice, DomainConfig
    from domainbench.store import open_store

    name = f"open_clip:ViT-B-32/{ckpt}"
    store = open_store(None, work / "home")
    try:
        run = domainbench.run(DomainConfig(domain="cuda check", corruptions=[CorruptionChoice(name="brightness", severities=[1])]),
                              models=[name], dataset=photos, device="cuda", batch_size=batch, stability=False, threat=False,
                              store=store)
        row = store.get_run(run.id).timings[name]
    finally:
        store.close()
    torch.cuda.empty_cache()

    model, _, preprocess = open_clip.create_model_and_transforms("ViT-B-32")
    model.load_state_dict(torch.load(ckpt, map_location="cpu"))
    model = model.to("cuda").eval()
    weights = sum(t.numel() * t.element_size() for t in [*model.parameters(), *model.buffers()])
    files = sorted(photos.rglob("*.jpg"))[:batch]
    x = torch.stack([preprocess(Image.open(f).convert("RGB")) for f in files]).to("cuda")
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    with torch.no_grad():
        model.encode_image(x)
    torch.cuda.synchronize()
    independent = weights + torch.cuda.max_memory_allocated() - before
    stored = row.get("peak_gpu_bytes")
    ratio = stored / independent if stored else float("nan")
    print(f"peak GPU memory, batch {batch}: stored {stored / 2**20 if stored else float('nan'):.1f} MiB, independent "
          f"{independent / 2**20:.1f} MiB (weights {weights / 2**20:.1f}), ratio {ratio:.3f}; parameters stored "
          f"{row.get('parameters')} vs {sum(p.numel() for p in [*model.parameters(), *model.buffers()])}")
    del model, x
    torch.cuda.empty_cache()
    ok = stored is not None and 0.8 <= ratio <= 1.25 and "peak_host_bytes" not in row and np.isfinite(ratio)
    print("  ok" if ok else "  MISMATCH")
    return ok


def finetune(work: Path, ckpt: Path, photos: Path, batch: int) -> bool:
    import torch
    from safetensors.torch import load_file

    import domainbench
    from domainbench.records.config import CorruptionChoice, DomainConfig

    plan = DomainConfig(domain="cuda finetune", corruptions=[CorruptionChoice(name="gaussian_noise", severities=[3]),
                                                              CorruptionChoice(name="brightness", severities=[2])])
    base = {k: v for k, v in torch.load(ckpt, map_location="cpu").items() if k.startswith("visual.")}
    ok = True
    for precision in ("fp16", "bf16"):
        losses: list[float] = []
        t = time.perf_counter()
        res = domainbench.finetune(f"open_clip:ViT-B-32/{ckpt}", plan, photos, work / f"ft-{precision}", epochs=1,
                                   batch_size=batch, device="cuda", precision=precision, lr=1e-5,
                                   on_step=lambda e, s, n, l1, l2: losses.append(l1 + l2))
        wall = time.perf_counter() - t
        files = sorted((work / f"ft-{precision}").rglob("*.safetensors"))
        tuned = load_file(str(files[0])) if files else {}
        changed = sum(1 for k, v in tuned.items() if ("visual." + k in base and not torch.equal(base["visual." + k], v))
                      or (k in base and not torch.equal(base[k], v)))
        finite = bool(losses) and all(math.isfinite(v) for v in losses)
        print(f"finetune {precision}: {len(losses)} steps in {wall:.1f} s, loss {losses[0]:.4f} -> {losses[-1]:.4f}, "
              f"finite {finite}, {changed} of {len(tuned)} saved tensors differ from the base ({res.model})")
        ok &= finite and changed > 0
    print("  ok" if ok else "  FAILED")
    return ok


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=128)
    ap.add_argument("--batch-size", type=int, default=64)
    args = ap.parse_args()
    import torch

    if not torch.cuda.is_available():
        sys.exit("error: no CUDA device: these checks are for a GPU machine")
    print(f"device: {torch.cuda.get_device_name(0)}, torch {torch.__version__}")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        ckpt = work / "vit-b-32-random.pt"
        make_checkpoint(ckpt)
        make_photos(work / "photos", args.images)
        results = [peak_memory(work, ckpt, work / "photos", args.batch_size),
                   finetune(work, ckpt, work / "photos", args.batch_size)]
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()

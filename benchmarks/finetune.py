"""Robustness fine-tuning speed: ``domainbench.tuning`` against a bare PyTorch loop on the same batches.

Both train ``embedded:fmnist-plain``'s image tower with L1 + λ·L2 on the bundled sample under a
noise-and-blur plan: the same split, image order, corruption draws (``corrupt_step``, the engine's
kernels), preprocessing and Adam. The bare loop has none of the product's checks (finite loss,
gradients and weights each step), progress callback or per-epoch checkpoints. Prints training
images per second of each and their ratio (domainbench / bare; the issue's bar is ≥ 0.9 on CPU), and
checks the two end with bit-identical weights (the same computation).

    python benchmarks/finetune.py [--quick] [--epochs 2] [--batch-size 64]

Timings on a shared machine are noisy: run it twice, and compare ratios measured in the same run.
"""

from __future__ import annotations

import argparse
import copy
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("NO_ALBUMENTATIONS_UPDATE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import load_file

from domainbench.records.config import CorruptionChoice, DomainConfig
from domainbench.data import open_dataset
from domainbench.tuning import train
from domainbench.tuning.train import _as_rgb, _rng, _split, corrupt_step, plan_cells
from domainbench.models import create_model

BASE = "embedded:fmnist-plain"


def bare_loop(plan: DomainConfig, epochs: int, batch_size: int, lr: float, lam: float, seed: int) -> tuple[dict[str, torch.Tensor], int]:
    base = create_model(BASE, "cpu")
    tower = copy.deepcopy(base.tower).eval().requires_grad_(True)
    frozen = copy.deepcopy(base.tower).eval().requires_grad_(False)
    opt = torch.optim.Adam(tower.parameters(), lr=lr)
    ds = open_dataset("sample", image_size=28)
    train_idx, _ = _split(len(ds), 0.8, seed)
    cells = plan_cells(plan)
    steps = len(train_idx) // batch_size
    for epoch in range(1, epochs + 1):
        order = train_idx[_rng(seed, 0x0DE5, epoch).permutation(len(train_idx))]
        for step in range(steps):
            idx = np.sort(order[step * batch_size:(step + 1) * batch_size])
            clean = _as_rgb(ds.load(idx).images)
            corrupted = corrupt_step(clean, idx, cells, seed, epoch, step)
            x, xc = base.preprocess(clean), base.preprocess(corrupted)
            with torch.no_grad():
                z0 = F.normalize(frozen(x), dim=-1)
            z, zc = F.normalize(tower(x), dim=-1), F.normalize(tower(xc), dim=-1)
            loss = -(z * zc).sum(-1).mean() + lam * -(z0 * z).sum(-1).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    return {f"image_tower.{k}": v for k, v in tower.state_dict().items()}, steps * batch_size * epochs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one epoch")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=64)
    args = ap.parse_args()
    epochs = 1 if args.quick else args.epochs
    plan = DomainConfig(domain="noise and blur", corruptions=[CorruptionChoice(name="gaussian_noise", severities=[3, 4, 5]),
                                                              CorruptionChoice(name="gaussian_blur", severities=[3, 4, 5])])
    opts = {"epochs": epochs, "batch_size": args.batch_size, "lr": 1e-3, "lam": 1.0, "seed": 0}
    create_model(BASE, "cpu")  # imports and weights paid before either clock starts
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        bare, n = bare_loop(plan, **opts)
        t_bare = time.perf_counter() - t0
        t0 = time.perf_counter()
        train(BASE, plan, "sample", Path(tmp) / "ft", image_size=28, **opts)
        t_ours = time.perf_counter() - t0
        ours = load_file(str(Path(tmp) / "ft" / "model.safetensors"))
    same = all(torch.equal(bare[k], ours[k]) for k in bare)
    print(f"images trained: {n} ({epochs} epoch(s), batch {args.batch_size}, CPU, {torch.get_num_threads()} threads)")
    print(f"bare PyTorch loop : {n / t_bare:8.1f} images/s ({t_bare:.1f} s)")
    print(f"domainbench       : {n / t_ours:8.1f} images/s ({t_ours:.1f} s)")
    print(f"ratio domainbench / bare: {t_bare / t_ours:.2f}  (bar ≥ 0.9)")
    print(f"final weights bit-identical: {same}")


if __name__ == "__main__":
    main()

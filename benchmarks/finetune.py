"""Robustness fine-tuning speed: ``domainbench.tuning`` against a bare PyTorch loop on the same batches.

Both train the same image tower with L1 + λ·L2 under a noise-and-blur plan: the same split, image
order, corruption draws (``corrupt_step``, the engine's kernels), preprocessing, autocast and Adam.
The bare loop has none of the product's checks (finite loss, gradients and weights each step),
progress callback or per-epoch checkpoints. Prints training images per second of each and their
ratio (domainbench / bare; the issue's bar is ≥ 0.9), twice: over the whole call (start-up and
checkpoints included) and over the steps after the first (the steady state a long fine-tune sees);
the share of the bare loop's time spent corrupting on the host; and how far apart the two final
weights are (bit-identical on CPU; GPU kernels need not be deterministic).

    python benchmarks/finetune.py [--quick]                                # CPU: embedded:fmnist-plain on the sample
    python benchmarks/finetune.py --device cuda [--quick] [--arch A]       # GPU: open_clip ViT-B-32 at random weights,
                                                                           # 224 px, batch 128, bf16, synthetic JPEGs

Nothing is downloaded: the ViT-B-32 is built at random weights and saved to a temporary checkpoint
that ``open_clip:ViT-B-32/<ckpt>`` loads; the images are generated. Timings on a shared machine are
noisy: compare ratios measured in the same run.
"""

from __future__ import annotations

import argparse
import copy
import os
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("NO_ALBUMENTATIONS_UPDATE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np
import torch
import torch.nn.functional as F

from domainbench.records.config import CorruptionChoice, DomainConfig
from domainbench.data import open_dataset
from domainbench.models import create_model
from domainbench.tuning import train
from domainbench.tuning.towers import tower_of
from domainbench.tuning.train import CHECKPOINT_FILE, _as_rgb, _autocast, _rng, _split, corrupt_step, plan_cells


def synthetic_images(folder: Path, n: int, size: int, seed: int = 0) -> Path:
    """``n`` smooth random RGB JPEGs (``size`` px) in two class folders: decodable, compressible, not constant."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    for i in range(n):
        small = rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)
        img = Image.fromarray(small).resize((size, size), Image.BILINEAR)
        d = folder / f"c{i % 2}"
        d.mkdir(parents=True, exist_ok=True)
        img.save(d / f"{i:05d}.jpg", quality=95)
    return folder


def random_open_clip(folder: Path, arch: str) -> str:
    import open_clip

    torch.manual_seed(0)
    ckpt = folder / f"{arch}-random.pt"
    torch.save(open_clip.create_model(arch).state_dict(), ckpt)
    return f"open_clip:{arch}/{ckpt}"


class Clock:
    """Step timestamps (after each step's loss reached the host: a CUDA sync)."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.steps: list[float] = []

    def step(self, *_: Any) -> None:
        self.steps.append(time.perf_counter())

    def steady(self, batch: int) -> float:
        """Images per second over the steps after the first (start-up, warm-up and the epoch-0 checkpoint excluded)."""
        if len(self.steps) < 2:
            return float("nan")
        return batch * (len(self.steps) - 1) / (self.steps[-1] - self.steps[0])


def bare_loop(model: str, dataset: str, plan: DomainConfig, *, epochs: int, batch_size: int, lr: float, lam: float,
              seed: int, image_size: int, device: str, precision: str, train_split: float,
              clock: Clock) -> tuple[dict[str, torch.Tensor], int, float, float]:
    dev = torch.device(device)
    base = create_model(model, dev)
    frozen = tower_of(base).module.eval().requires_grad_(False)
    tower = copy.deepcopy(frozen).eval().requires_grad_(True)
    opt = torch.optim.Adam(tower.parameters(), lr=lr)
    ds = open_dataset(dataset, image_size=image_size)
    train_idx, _ = _split(len(ds), train_split, seed)
    cells = plan_cells(plan)
    steps = len(train_idx) // batch_size
    corrupting = 0.0

    def pixels(images: np.ndarray) -> torch.Tensor:
        if dev.type == "cpu" or not base.device_preprocess:
            return base.preprocess(images).to(dev)
        return base.preprocess_tensor(torch.from_numpy(images).to(dev, non_blocking=True))

    def train_step(x: torch.Tensor, xc: torch.Tensor) -> None:
        with torch.no_grad(), _autocast(dev, precision):
            f0 = frozen(x)
        with _autocast(dev, precision):
            f, fc = tower(x), tower(xc)
        z0, z, zc = (F.normalize(v.float(), dim=-1) for v in (f0, f, fc))
        loss = -(z * zc).sum(-1).mean() + lam * -(z0 * z).sum(-1).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        loss.item()  # what the product's loop reads each step (a sync on CUDA)

    clock.t0 = time.perf_counter()
    for epoch in range(1, epochs + 1):
        order = train_idx[_rng(seed, 0x0DE5, epoch).permutation(len(train_idx))]
        for step in range(steps):
            idx = np.sort(order[step * batch_size:(step + 1) * batch_size])
            t = time.perf_counter()
            clean = _as_rgb(ds.load(idx).images)
            corrupted = corrupt_step(clean, idx, cells, seed, epoch, step)
            corrupting += time.perf_counter() - t
            x, xc = pixels(clean), pixels(corrupted)
            train_step(x, xc)
            clock.step()
    weights = {k: v.detach().to('cpu', copy=True) for k, v in tower.state_dict().items()}  # before the repeats below move them
    # the ceiling without the host: the same step repeated on one batch already on the device
    model_only = float("nan")
    if steps:
        reps = 5
        for i in range(reps + 1):
            if i == 1:
                if dev.type == "cuda":
                    torch.cuda.synchronize()
                t = time.perf_counter()
            train_step(x, xc)
        model_only = reps * batch_size / (time.perf_counter() - t)
    return weights, steps * batch_size * epochs, corrupting, model_only


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one epoch on fewer images (GPU: < 2 min)")
    ap.add_argument("--device", default="cpu", help="cpu (embedded model, the sample) or cuda (open_clip ViT-B-32, 224 px)")
    ap.add_argument("--model", choices=["embedded", "open_clip"], default=None, help="default: embedded on CPU, open_clip on CUDA")
    ap.add_argument("--arch", default="ViT-B-32", help="the open_clip architecture (random weights; default ViT-B-32)")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=None, help="default 64 on CPU, 128 on CUDA")
    ap.add_argument("--images", type=int, default=None, help="CUDA: synthetic images to generate (default 1536, --quick 1024)")
    ap.add_argument("--precision", default=None, help="fp32, bf16 or fp16 (default fp32 on CPU, bf16 on CUDA)")
    args = ap.parse_args()
    cuda = args.device.startswith("cuda")
    epochs = 1 if args.quick else args.epochs
    batch = args.batch_size or (128 if cuda else 64)
    precision = args.precision or ("bf16" if cuda else "fp32")
    plan = DomainConfig(domain="noise and blur", corruptions=[CorruptionChoice(name="gaussian_noise", severities=[3, 4, 5]),
                                                              CorruptionChoice(name="gaussian_blur", severities=[3, 4, 5])])
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        t = time.perf_counter()
        if (args.model or ("open_clip" if cuda else "embedded")) == "open_clip":
            n = args.images or (1024 if args.quick else 1536)
            dataset = str(synthetic_images(root / "images", n, 256))
            model, image_size, split = random_open_clip(root, args.arch), 224, 0.9
            lr = 1e-5  # the paper's
        else:
            dataset, model, image_size, split, lr = "sample", "embedded:fmnist-plain", 28, 0.8, 1e-3
        create_model(model, args.device)  # imports and weights paid before either clock starts
        print(f"set-up (images, model, imports): {time.perf_counter() - t:.1f} s", flush=True)
        opts = {"epochs": epochs, "batch_size": batch, "lr": lr, "lam": 1.0, "seed": 0}
        bare_clock, ours_clock = Clock(), Clock()
        t0 = time.perf_counter()
        bare, n_trained, corrupting, model_only = bare_loop(model, dataset, plan, image_size=image_size, device=args.device, precision=precision,
                                                train_split=split, clock=bare_clock, **opts)
        # the whole call, start-up included, up to its last training step (not the model-only repeats after it)
        t_bare = (bare_clock.steps[-1] if bare_clock.steps else time.perf_counter()) - t0
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        train(model, plan, dataset, root / "ft", image_size=image_size, device=args.device, precision=precision,
              train_split=split, on_step=ours_clock.step, **opts)
        t_ours = time.perf_counter() - t0
        ours = torch.load(root / "ft" / CHECKPOINT_FILE, map_location="cpu", weights_only=True)["tower"]
    diff = max(float((bare[k].float() - ours[k].float()).abs().max()) for k in bare)
    where = torch.cuda.get_device_name() if cuda else f"CPU, {torch.get_num_threads()} threads"
    print(f"{model.split('/')[0] if model.startswith('open_clip:') else model} (random weights if open_clip): {n_trained} images trained ({epochs} epoch(s), batch {batch}, "
          f"{image_size} px, {precision}, {where})")
    print(f"bare PyTorch loop : {n_trained / t_bare:8.1f} images/s whole call ({t_bare:.1f} s), "
          f"{bare_clock.steady(batch):8.1f} images/s steady")
    print(f"domainbench       : {n_trained / t_ours:8.1f} images/s whole call ({t_ours:.1f} s), "
          f"{ours_clock.steady(batch):8.1f} images/s steady")
    print(f"ratio domainbench / bare: {t_bare / t_ours:.2f} whole call, {ours_clock.steady(batch) / bare_clock.steady(batch):.2f} "
          "steady  (bar ≥ 0.9)")
    print(f"host decoding + corruption: {corrupting / t_bare:.0%} of the bare loop's time; the model step alone "
          f"(one batch on the device, repeated): {model_only:.1f} images/s")
    print(f"final weights: max |bare − domainbench| = {diff:.3g}" + ("  (bit-identical)" if diff == 0 else ""))


if __name__ == "__main__":
    main()

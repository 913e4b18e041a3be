"""The fine-tuning loop: L1 + λ·L2 on unlabelled images, corruptions drawn from the plan, seeded.

L1 = −mean cos(f′(x), f′(P(x, k))) pulls each corrupted image's embedding onto its clean one;
L2 = −mean cos(f(x), f′(x)) keeps f′ next to the frozen original f (utility). Each step draws, per
image, one cell of the plan (a corruption at one of its severities, or a composition) and corrupts
with the engine's own job code (``engine.jobs.run_job``), so training sees exactly the kernels, ladders
and per-image seeding an evaluation does. All randomness is a function of (seed, epoch, step): the
epoch's image order, the cells drawn and the kernels' seeds, so a resumed run replays the same batches
and, with the optimizer state restored, ends bit-identical to an uninterrupted one.

Only the image tower trains (``towers.py``: embedded, open_clip and hf towers); the text tower is not
touched. Batch-norm layers keep the base model's running statistics (eval mode), so f′ = f at step 0
exactly and small batches of corrupted images do not shift them. ``--trainable lora`` trains peft
adapters only (``lora.py``); ``--precision`` autocasts the forward passes (the weights and the loss stay
float32); ``--grad-accum K`` splits each step's batch into K micro-batches whose gradients add up to
the whole batch's, so the step, its images and its corruptions are those of K = 1.
"""

from __future__ import annotations

import copy
import json
import math
import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from domainbench.records.config import DomainConfig
from domainbench.errors import UserInputError

#: the files of a fine-tuned model folder (``local:OUT`` reads the first two)
STATE_FILE = "finetune.json"
CHECKPOINT_FILE = "checkpoint.pt"
PLAN_FILE = "plan.toml"
CARD_FILE = "MODEL_CARD.md"
ADAPTER_FILE = "lora_adapter.safetensors"

StepCallback = Callable[[int, int, int, float, float], None]  # (epoch, step, steps, l1, l2)


class FinetuneDiverged(UserInputError):
    """The loss or the weights stopped being finite; the last good checkpoint is kept."""


class FinetuneOptions(BaseModel):
    """The hyperparameters; stored in the output folder and its model card."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    epochs: int = Field(default=5, ge=1, le=100_000)
    lr: float = Field(default=1e-4, gt=0, allow_inf_nan=False)
    lam: float = Field(default=1.0, ge=0, allow_inf_nan=False)
    batch_size: int = Field(default=32, ge=1, le=65_536)
    train_split: float = Field(default=0.8, gt=0, lt=1, allow_inf_nan=False)
    trainable: str = "all"
    seed: int = Field(default=0, ge=0)
    device: str = "cpu"
    image_size: int = Field(default=224, ge=16, le=4096)
    precision: str = "fp32"
    grad_accum: int = Field(default=1, ge=1, le=65_536)
    lora_rank: int = Field(default=8, ge=1, le=4096)
    lora_alpha: float = Field(default=16.0, gt=0, allow_inf_nan=False)
    lora_targets: str = "linear"

    @field_validator("trainable")
    @classmethod
    def _trainable(cls, v: str) -> str:
        if v not in ("all", "lora") and not re.fullmatch(r"last-[1-9][0-9]*", v):
            raise ValueError(f"trainable must be all, lora or last-N (N ≥ 1 layers), got {v!r}")
        return v

    @field_validator("precision")
    @classmethod
    def _precision(cls, v: str) -> str:
        if v not in ("fp32", "bf16", "fp16"):
            raise ValueError(f"precision must be fp32, bf16 or fp16, got {v!r}")
        return v


_OPTION_FLAGS = {"lam": "--lambda", "train_split": "--train-split", "batch_size": "--batch-size", "image_size": "--image-size",
                 "grad_accum": "--grad-accum"}


def check_options(**given: Any) -> FinetuneOptions:
    """``FinetuneOptions`` from keywords, a bad value as one ``UserInputError`` naming its flag."""
    try:
        FinetuneOptions(**{k: v for k, v in given.items() if v is not None})
    except ValidationError as e:
        err = e.errors()[0]
        name = str(err["loc"][0]) if err["loc"] else "option"
        flag = _OPTION_FLAGS.get(name, "--" + name.replace("_", "-"))
        raise UserInputError(f"{flag} {err.get('input')!r}: {err['msg']}") from None
    opts = FinetuneOptions(**{k: v for k, v in given.items() if v is not None})
    if opts.batch_size % opts.grad_accum:
        raise UserInputError(f"--grad-accum {opts.grad_accum} does not divide --batch-size {opts.batch_size}: the step's batch "
                             "is split into that many equal micro-batches; choose a divisor")
    if opts.precision == "fp16" and not opts.device.startswith("cuda"):
        raise UserInputError(f"--precision fp16 needs a CUDA device (--device {opts.device}): on CPU use bf16 or fp32")
    return opts


class FinetuneState(BaseModel):
    """What the output folder records: everything ``resume`` and the model card need."""

    model_config = ConfigDict(extra="forbid")

    base: str
    dataset: str
    fingerprint: dict[str, Any]
    n_images: int
    train_indices: list[int]
    heldout_indices: list[int]
    options: FinetuneOptions
    epochs_done: int = 0
    #: per finished epoch: mean L1, mean L2 and mean loss over its steps
    history: list[dict[str, float]] = Field(default_factory=list)


@dataclass
class FinetuneResult:
    out: Path
    state: FinetuneState

    @property
    def model(self) -> str:
        """The name that evaluates the fine-tuned model: ``local:OUT``."""
        return f"local:{self.out}"


# --------------------------------------------------------------------------- inputs


def _check_plan(plan: DomainConfig | str | Path) -> DomainConfig:
    if not isinstance(plan, DomainConfig):
        from domainbench.records.config import load_domain

        path = Path(plan)
        if not path.is_file():
            raise UserInputError(f"--plan {str(path)!r} is not a file; give a domain config TOML (`domainbench plan ... -o plan.toml`)")
        plan = load_domain(path)
    if not plan.corruptions and not plan.compositions:
        raise UserInputError("--plan lists no corruption: fine-tuning needs at least one corruption or composition to train against")
    return plan


def _check_out(out: Path, overwrite: bool) -> None:
    if out.exists():
        if not overwrite:
            raise UserInputError(f"-o {str(out)!r} already exists; choose a new folder, or add --overwrite to replace it")
        if not out.is_dir() or (any(out.iterdir()) and not (out / STATE_FILE).is_file()):
            raise UserInputError(f"-o {str(out)!r} exists and is not a fine-tuned model folder; --overwrite only replaces "
                                 "one written by `domainbench finetune`: choose a new folder")


def _split(n: int, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Train and held-out dataset indices (sorted), a seeded permutation cut at ``fraction``: by file."""
    perm = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(0x5B117,))).permutation(n)
    k = int(round(fraction * n))
    return np.sort(perm[:k]), np.sort(perm[k:])


def _as_rgb(images: np.ndarray) -> np.ndarray:
    # grey images are trained as the held-out evaluation decodes them (PNG to RGB), so both see the same kernels
    return np.repeat(images[..., None], 3, axis=-1) if images.ndim == 3 else images


# --------------------------------------------------------------------------- randomness


def _rng(seed: int, *key: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=key))


def _epoch_seed(seed: int, epoch: int) -> int:
    """The run seed the engine's per-image seeding gets in ``epoch``: a new draw of every kernel each epoch."""
    return int(np.random.SeedSequence(seed, spawn_key=(0xE90C, epoch)).generate_state(1, np.uint32)[0])


def corrupt_step(images: np.ndarray, indices: np.ndarray, cells: list[Any], seed: int, epoch: int, step: int) -> np.ndarray:
    """The step's corrupted batch: each image gets one cell drawn from ``cells``, corrupted by the engine's job code."""
    from domainbench.engine.jobs import run_job

    pick = _rng(seed, 0xCE11, epoch, step).integers(len(cells), size=len(images))
    out = np.empty_like(images)
    for c in np.unique(pick):
        sel = np.flatnonzero(pick == c)
        out[sel] = run_job(cells[c].job(0), images[sel], indices[sel], _epoch_seed(seed, epoch)).images
    return out


def plan_cells(plan: DomainConfig) -> list[Any]:
    from domainbench.engine.runner import cells_of

    return [c for c in cells_of(plan) if c.corruption != "clean"]


# --------------------------------------------------------------------------- the model


def _trainable_params(tower: Any, trainable: str) -> list[Any]:
    leaves = [m for m in tower.modules() if not list(m.children()) and list(m.parameters(recurse=False))]
    if trainable == "all":
        chosen = leaves
    else:
        n = int(trainable.removeprefix("last-"))
        if n > len(leaves):
            raise UserInputError(f"--trainable {trainable}: the image tower has {len(leaves)} layers with weights; use last-1 .. "
                                 f"last-{len(leaves)} or all")
        chosen = leaves[-n:]
    tower.requires_grad_(False)
    for m in chosen:
        m.requires_grad_(True)
    return [p for m in chosen for p in m.parameters()]


def _autocast(device: Any, precision: str) -> Any:
    import contextlib

    import torch

    if precision == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16 if precision == "bf16" else torch.float16)


def _losses(tower: Any, frozen: Any, clean: Any, corrupted: Any, cast: Callable[[], Any] | None = None) -> tuple[Any, Any]:
    import contextlib

    import torch
    import torch.nn.functional as F

    cast = cast or contextlib.nullcontext
    with torch.no_grad(), cast():
        f0 = frozen(clean)
    with cast():
        f, fc = tower(clean), tower(corrupted)
    # the cosines in float32 whatever the forward's precision: the loss is a difference of numbers near −1
    z0, z, zc = (F.normalize(t.float(), dim=-1) for t in (f0, f, fc))
    l1 = -(z * zc).sum(-1).mean()
    l2 = -(z0 * z).sum(-1).mean()
    return l1, l2


def accumulate(tower: Any, frozen: Any, clean: Any, corrupted: Any, lam: float, micro: int,
               cast: Callable[[], Any] | None = None, scale: Callable[[Any], Any] | None = None) -> tuple[Any, Any]:
    """Backward L1 + λ·L2 of the whole batch in ``micro`` equal micro-batches; returns the batch's (L1, L2).

    Each micro-batch's mean loss is weighted by its share of the batch, so the gradients add up to those
    of the batch's mean (equal to float rounding); with one micro-batch the weight is exactly 1."""
    n = clean.shape[0]
    size = n // micro
    l1_sum = l2_sum = 0.0
    for k in range(micro):
        sl = slice(k * size, (k + 1) * size)
        l1, l2 = _losses(tower, frozen, clean[sl], corrupted[sl], cast)
        share = size / n
        part = (l1 + lam * l2) * share
        (scale(part) if scale is not None else part).backward()
        l1_sum = l1_sum + l1.detach() * share
        l2_sum = l2_sum + l2.detach() * share
    return l1_sum, l2_sum


# --------------------------------------------------------------------------- output folder


def _atomic(path: Path, write: Callable[[Path], None]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    write(tmp)
    os.replace(tmp, path)


def _tower_weights(tower: Any, lora: bool) -> dict[str, Any]:
    from domainbench.tuning.lora import merged_state

    return merged_state(tower) if lora else tower.state_dict()


def _save(out: Path, state: FinetuneState, spec: Any, tower: Any, optimizer: Any, scaler: Any) -> None:
    """One epoch's checkpoint: optimizer + weights (resume), the model files (``local:``), the state and card.

    Each file is replaced atomically and the checkpoint, which resume reads, goes first; a kill between
    files leaves a folder that resumes from the checkpoint."""
    import torch

    lora = state.options.trainable == "lora"
    _atomic(out / CHECKPOINT_FILE, lambda p: torch.save(
        {"epochs_done": state.epochs_done, "history": state.history, "tower": tower.state_dict(),
         "optimizer": optimizer.state_dict(), "scaler": scaler.state_dict() if scaler is not None else None}, p))
    meta = {"base": state.base, "epochs_done": state.epochs_done, "lambda": state.options.lam, "trainable": state.options.trainable}
    spec.write(out, _tower_weights(tower, lora), meta, _atomic)
    if lora:
        from safetensors.torch import save_file

        from domainbench.tuning.lora import adapter_state

        _atomic(out / ADAPTER_FILE, lambda p: save_file(adapter_state(tower), str(p)))
    _atomic(out / STATE_FILE, lambda p: p.write_text(state.model_dump_json(indent=1)))
    from domainbench.tuning.card import write_card

    _atomic(out / CARD_FILE, lambda p: write_card(p, state, out, PLAN_FILE))


# --------------------------------------------------------------------------- training


def _load_base(model: str, device: str) -> tuple[Any, Any]:
    """The base model on the training device and its trainable tower (refused in one line if it has none)."""
    from domainbench.models import create_model
    from domainbench.tuning.towers import tower_of

    base = create_model(model, device=device)
    return base, tower_of(base)


def train(model: str, plan: DomainConfig | str | Path, dataset: str | Path, out: str | Path, *,
          overwrite: bool = False, on_step: StepCallback | None = None, **options: Any) -> FinetuneResult:
    """Fine-tune ``model``'s image tower under ``plan`` on ``dataset`` (labels unread) into the folder ``out``.

    ``options``: the fields of :class:`FinetuneOptions` (``epochs``, ``lr``, ``lam``, ``batch_size``,
    ``train_split``, ``trainable``, ``seed``, ``device``, ``image_size``, ``precision``, ``grad_accum``,
    ``lora_rank``, ``lora_alpha``, ``lora_targets``). Every input is checked before anything is written."""
    from domainbench.data import open_dataset
    from domainbench.data.fingerprint import dataset_fingerprint
    from domainbench.tuning.towers import check_name

    opts = check_options(**options)
    check_name(model)
    domain = _check_plan(plan)
    out = Path(out)
    _check_out(out, overwrite)
    ds = open_dataset(str(dataset), image_size=opts.image_size)
    train_idx, held_idx = _split(len(ds), opts.train_split, opts.seed)
    if len(train_idx) < 2 * opts.batch_size:
        raise UserInputError(f"--dataset {str(dataset)!r}: {len(train_idx)} training images (of {len(ds)}, --train-split "
                             f"{opts.train_split}) is fewer than two batches of {opts.batch_size}; add images or lower --batch-size")
    if len(held_idx) == 0:
        raise UserInputError(f"--train-split {opts.train_split} leaves no held-out image of {len(ds)}; lower it")
    loaded = _load_base(model, opts.device)
    state = FinetuneState(base=model, dataset=str(dataset), fingerprint=dataset_fingerprint(ds).model_dump(mode="json"),
                          n_images=len(ds), train_indices=train_idx.tolist(), heldout_indices=held_idx.tolist(), options=opts)
    tower = _prepare(loaded[1], opts)  # a bad --lora-targets is refused here, before the folder is touched
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    from domainbench.records.config import save

    save(domain, out / PLAN_FILE)
    return _loop(out, state, domain, ds, on_step, checkpoint=None, loaded=loaded, tower=tower)


def resume(out: str | Path, *, epochs: int | None = None, on_step: StepCallback | None = None) -> FinetuneResult:
    """Continue the fine-tuning in ``out`` from its last checkpoint, up to ``epochs`` (default: the stored number)."""
    import torch

    from domainbench.records.config import load_domain
    from domainbench.data import open_dataset
    from domainbench.data.fingerprint import dataset_fingerprint

    out = Path(out)
    if not (out / STATE_FILE).is_file() or not (out / CHECKPOINT_FILE).is_file():
        raise UserInputError(f"--resume {str(out)!r} is not a fine-tuned model folder (no {STATE_FILE} / {CHECKPOINT_FILE}); "
                             "give the -o folder of an earlier `domainbench finetune`")
    state = FinetuneState.model_validate_json((out / STATE_FILE).read_text())
    if epochs is not None:
        state.options = check_options(**{**state.options.model_dump(), "epochs": epochs})
    checkpoint = torch.load(out / CHECKPOINT_FILE, map_location="cpu", weights_only=True)
    state.epochs_done, state.history = int(checkpoint["epochs_done"]), list(checkpoint["history"])
    ds = open_dataset(state.dataset, image_size=state.options.image_size)
    now = dataset_fingerprint(ds).model_dump(mode="json")
    if now != state.fingerprint:
        raise UserInputError(f"--resume {str(out)!r}: the dataset {state.dataset!r} changed since training began; resuming "
                             "would train on other images: start a new fine-tuning")
    loaded = _load_base(state.base, state.options.device)
    return _loop(out, state, load_domain(out / PLAN_FILE), ds, on_step, checkpoint=checkpoint, loaded=loaded,
                 tower=_prepare(loaded[1], state.options))


def _prepare(spec: Any, opts: FinetuneOptions) -> Any:
    """The tower being trained: a copy of the base's (f′ = f), wrapped with LoRA adapters for ``--trainable lora``."""
    import torch

    tower = copy.deepcopy(spec.module).eval()
    if opts.trainable == "lora":
        from domainbench.tuning.lora import wrap

        # peft draws the adapters' A matrices from torch's global generator: seeded here, so a fine-tune
        # (and a resumed one, which restores them from its checkpoint) is a function of --seed alone
        with torch.random.fork_rng():
            torch.manual_seed(_epoch_seed(opts.seed, 0))
            tower = wrap(tower, opts.lora_rank, opts.lora_alpha, opts.lora_targets).eval()
    return tower


def _loop(out: Path, state: FinetuneState, domain: DomainConfig, ds: Any, on_step: StepCallback | None,
          checkpoint: dict[str, Any] | None, loaded: tuple[Any, Any], tower: Any) -> FinetuneResult:
    import torch

    opts = state.options
    device = torch.device(opts.device)
    base, spec = loaded
    frozen = spec.module.eval().requires_grad_(False)  # the base's own tower is f: never trained, never copied again
    if opts.trainable == "lora":
        params = [p for p in tower.parameters() if p.requires_grad]
    else:
        params = _trainable_params(tower, opts.trainable)
    optimizer = torch.optim.Adam(params, lr=opts.lr)
    # fp16 needs loss scaling (its gradients underflow); bf16 has float32's range and needs none
    scaler = torch.amp.GradScaler(device.type) if opts.precision == "fp16" else None
    if checkpoint is not None:
        tower.load_state_dict(checkpoint["tower"])
        optimizer.load_state_dict(checkpoint["optimizer"])
        if scaler is not None and checkpoint.get("scaler"):
            scaler.load_state_dict(checkpoint["scaler"])
    else:
        _save(out, state, spec, tower, optimizer, scaler)  # epoch 0 (f′ = f): the good checkpoint a divergence falls back to
    cells = plan_cells(domain)
    train_idx = np.asarray(state.train_indices, dtype=np.int64)
    steps = len(train_idx) // opts.batch_size  # whole batches only: every step's loss has the same weight

    def pixels(images: np.ndarray) -> Any:
        if device.type == "cpu" or not base.device_preprocess:
            return base.preprocess(images).to(device)
        return base.preprocess_tensor(torch.from_numpy(images).to(device, non_blocking=True))

    def cast() -> Any:
        return _autocast(device, opts.precision)

    for epoch in range(state.epochs_done + 1, opts.epochs + 1):
        order = train_idx[_rng(opts.seed, 0x0DE5, epoch).permutation(len(train_idx))]
        sums = np.zeros(2)
        for step in range(steps):
            idx = np.sort(order[step * opts.batch_size:(step + 1) * opts.batch_size])
            batch = ds.load(idx)
            if len(batch.indices) != len(idx):
                bad = batch.unreadable[0]
                raise UserInputError(f"image {bad[1]} does not decode ({bad[2]}); remove it from the dataset and start again")
            clean = _as_rgb(batch.images)
            corrupted = corrupt_step(clean, idx, cells, opts.seed, epoch, step)
            optimizer.zero_grad(set_to_none=True)
            l1, l2 = accumulate(tower, frozen, pixels(clean), pixels(corrupted), opts.lam, opts.grad_accum, cast,
                                scaler.scale if scaler is not None else None)
            loss = l1 + opts.lam * l2
            if scaler is not None:
                # the scaler skips a step whose scaled gradients overflowed and lowers its scale: not a divergence
                scaler.unscale_(optimizer)
                checked = torch.stack([l1, l2, loss])
            else:
                # one norm over all gradients is non-finite iff one of them is: one reduction, one sync per step
                grads = [p.grad for p in params if p.grad is not None]
                checked = torch.stack([l1, l2, loss, _total_norm(grads).to(loss.device)])
            values = checked.tolist()
            if not all(math.isfinite(v) for v in values):
                raise _diverged(out, state, epoch, step, values[2])
            if scaler is not None:
                scaler.step(optimizer)
                scaler.update()
            else:
                optimizer.step()
            if not math.isfinite(float(_total_norm([p.detach() for p in params]))):
                raise _diverged(out, state, epoch, step, float("nan"))
            v1, v2 = values[0], values[1]
            sums += (v1, v2)
            if on_step is not None:
                on_step(epoch, step + 1, steps, v1, v2)
        m1, m2 = sums / steps
        state.epochs_done = epoch
        state.history.append({"epoch": epoch, "l1": float(m1), "l2": float(m2), "loss": float(m1 + opts.lam * m2)})
        _save(out, state, spec, tower, optimizer, scaler)
    return FinetuneResult(out, state)


def _total_norm(tensors: list[Any]) -> Any:
    import torch

    return torch.nn.utils.get_total_norm(tensors) if tensors else torch.zeros(())


def _diverged(out: Path, state: FinetuneState, epoch: int, step: int, loss: float) -> FinetuneDiverged:
    return FinetuneDiverged(f"the loss or the weights became non-finite (loss {loss}) at epoch {epoch} step {step + 1}; "
                            f"stopped, and {out} keeps the last good checkpoint (epoch {state.epochs_done}): lower --lr")

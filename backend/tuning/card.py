"""The model card of a fine-tuned model folder: lineage, data, hyperparameters, loss curve."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def card_text(state: Any, out: Path, plan_file: str) -> str:
    from domainbench.records.config import load_domain

    o = state.options
    plan = load_domain(out / plan_file)
    cells = [f"{c.name} (severities {', '.join(map(str, c.severities))})" for c in plan.corruptions]
    cells += [f"{c.cell_name} ({' then '.join(f'{n}@{s}' for n, s in c.pairs)})" for c in plan.compositions]
    fp = state.fingerprint
    lines = [
        f"# Robustness fine-tune of {state.base}",
        "",
        f"Evaluate it as `--models local:{out}` (beside `{state.base}`, the base it was trained from).",
        "",
        "Objective (embedding-stability paper §6.1): minimise L1 + λ·L2 with L1 = −mean cos(f′(x), f′(P(x, k))) and "
        "L2 = −mean cos(f(x), f′(x)) against the frozen base f; unlabelled images; the text tower is the base's, frozen.",
        "",
        "## Lineage",
        f"- base model: `{state.base}`",
        f"- plan: domain {plan.domain!r} ({plan_file} in this folder); each step draws per image one of: {'; '.join(cells)}",
        "",
        "## Data",
        f"- dataset: `{state.dataset}` ({state.n_images} images; fingerprint kind {fp.get('kind')}, "
        f"listing {str(fp.get('listing_sha256') or fp.get('version'))[:16]})",
        f"- split by file, seed {o.seed}: {len(state.train_indices)} training images, {len(state.heldout_indices)} held out "
        f"(`heldout_indices` in finetune.json); evaluate only on the held-out images",
        "",
        "## Hyperparameters",
        f"- epochs {o.epochs} (done {state.epochs_done}), lr {o.lr:g} (Adam), λ {o.lam:g}, batch size {o.batch_size}, "
        f"trainable {o.trainable}, train split {o.train_split:g}, seed {o.seed}, device {o.device}, image size {o.image_size}, "
        f"precision {o.precision}, gradient accumulation {o.grad_accum}",
        *([f"- LoRA (peft): rank {o.lora_rank}, alpha {o.lora_alpha:g}, targets {o.lora_targets}; the adapters are merged into "
           "the saved weights (the adapters alone: lora_adapter.safetensors)"] if o.trainable == "lora" else []),
        "",
        "## Loss curve (means over each epoch's steps)",
        "",
        "| epoch | L1 | L2 | L1 + λ·L2 |",
        "| ---: | ---: | ---: | ---: |",
        *(f"| {h['epoch']} | {h['l1']:.6f} | {h['l2']:.6f} | {h['loss']:.6f} |" for h in state.history),
        "",
    ]
    return "\n".join(lines)


def write_card(path: Path, state: Any, out: Path, plan_file: str) -> None:
    path.write_text(card_text(state, out, plan_file), encoding="utf-8")

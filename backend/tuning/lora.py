"""LoRA on an image tower through ``peft``: only the low-rank adapters train; the saved model has them merged.

The default targets are the tower's ``nn.Linear`` layers, except the output projection inside an
``nn.MultiheadAttention`` (open_clip's ViT): that module reads ``out_proj.weight`` directly, so an
adapter wrapped around it would never run. ``--lora-targets`` takes peft's own ``target_modules``
list instead (module names, matched as name suffixes).
"""

from __future__ import annotations

from typing import Any

from torch import nn

from domainbench.errors import UserInputError


def linear_targets(tower: nn.Module) -> list[str]:
    inside_mha = {f"{name}.{child}" if name else child for name, m in tower.named_modules()
                  if isinstance(m, nn.MultiheadAttention) for child, _ in m.named_children()}
    return [name for name, m in tower.named_modules() if isinstance(m, nn.Linear) and name not in inside_mha]


def wrap(tower: nn.Module, rank: int, alpha: float, targets: str) -> nn.Module:
    """``tower`` with LoRA adapters (a peft model); every weight but the adapters' is frozen."""
    from peft import LoraConfig, get_peft_model

    if targets == "linear":
        names = linear_targets(tower)
        if not names:
            raise UserInputError("--trainable lora: the image tower has no nn.Linear layer to adapt; name layers with --lora-targets")
    else:
        names = [t.strip() for t in targets.split(",") if t.strip()]
        known = [n for n, _ in tower.named_modules() if n]
        missing = [t for t in names if not any(n == t or n.endswith("." + t) for n in known)]
        if missing:
            raise UserInputError(f"--lora-targets {targets!r}: {', '.join(missing)} names no layer of the image tower; "
                                 f"its linear layers are e.g. {', '.join(linear_targets(tower)[:6]) or '(none)'}")
    config = LoraConfig(r=rank, lora_alpha=alpha, target_modules=names, lora_dropout=0.0, bias="none")
    try:
        model = get_peft_model(tower, config)
    except ValueError as e:  # peft refuses a layer type it cannot adapt
        raise UserInputError(f"--lora-targets {targets!r}: peft cannot adapt these layers ({str(e).splitlines()[0][:200]})") from None
    for name, p in model.named_parameters():
        p.requires_grad_("lora_" in name)
    return model


def merged_state(model: Any) -> dict[str, Any]:
    """The plain tower's weights with the adapters merged in (keys as the unwrapped tower's)."""
    import copy

    return copy.deepcopy(model).merge_and_unload().state_dict()


def adapter_state(model: Any) -> dict[str, Any]:
    from peft import get_peft_model_state_dict

    return {k: v.detach().cpu().contiguous() for k, v in get_peft_model_state_dict(model).items()}

"""The trainable image tower of each backend, and how a model with a trained tower is written back.

Training needs one ``nn.Module`` from preprocessed pixels to the image features (before the unit
normalisation every backend's ``encode_image`` applies); writing needs the backend's own folder
format, so that ``local:OUT`` loads the result with the same code as its base:

* embedded (``embedded:``, or ``local:`` of an earlier fine-tune): ``model.tower``, written as
  ``model.safetensors`` in the embedded weights format plus ``domainbench_model.json``;
* open_clip (``open_clip:ARCH/TAG``, ``open_clip:ARCH/ckpt``, open_clip folders): ``model.visual``
  (``CLIP.encode_image`` is ``visual(x)``), written as an open_clip model folder
  (``open_clip_config.json`` + ``open_clip_model.safetensors``: the whole model, text tower unchanged);
* hf (CLIP, SigLIP, ALIGN ``save_pretrained`` folders or cached repos): the vision model and, for
  CLIP, its projection (``get_image_features``), written with ``save_pretrained`` beside the
  tokenizer and image processor.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import torch
from torch import nn

from domainbench.errors import UserInputError

#: model name prefixes whose image tower may be trainable (the loaded model decides: see ``tower_of``)
TRAINABLE_PREFIXES = ("embedded:", "open_clip:", "hf:", "local:")


class HFImageTower(nn.Module):
    """``get_image_features`` of a transformers CLIP / SigLIP / ALIGN model as a module of its own
    (the vision model and CLIP's projection; the text tower is left out of training and of the copy)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.vision_model = model.vision_model
        self.visual_projection = getattr(model, "visual_projection", None)

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        pooled = self.vision_model(pixel_values=pixels, return_dict=True).pooler_output
        return pooled if self.visual_projection is None else self.visual_projection(pooled)


class Tower:
    """A loaded base model's image tower (``module``: pixels -> features) and its folder writer."""

    kind: str
    module: nn.Module

    def __init__(self, base: Any) -> None:
        self.base = base

    def model_files(self) -> tuple[str, ...]:
        raise NotImplementedError

    def write(self, out: Path, weights: dict[str, torch.Tensor], meta: dict[str, Any], atomic: Any) -> None:
        """Write the model folder's files with the tower's trained ``weights`` (keys of ``module.state_dict()``)."""
        raise NotImplementedError


class EmbeddedTower(Tower):
    kind = "embedded"

    def __init__(self, base: Any) -> None:
        super().__init__(base)
        self.module = base.tower

    def model_files(self) -> tuple[str, ...]:
        return ("model.safetensors", "domainbench_model.json")

    def write(self, out: Path, weights: dict[str, torch.Tensor], meta: dict[str, Any], atomic: Any) -> None:
        from safetensors.torch import save_file

        tensors = {f"image_tower.{k}": v.detach().cpu().contiguous() for k, v in weights.items()}
        tensors["logit_scale"] = torch.tensor(math.log(self.base.logit_scale))
        info = {**self.base.metadata, "config": self.base.config.model_dump(mode="json"), "finetune": meta}
        atomic(out / "model.safetensors", lambda p: save_file(tensors, str(p), metadata={"domainbench": json.dumps(info)}))
        atomic(out / "domainbench_model.json", lambda p: p.write_text(json.dumps(
            {"format": "embedded", "weights": "model.safetensors", "base": meta["base"]})))


def _full_state(model: nn.Module, prefix: str, weights: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The whole model's state dict with the tower's keys (under ``prefix``) replaced by ``weights``."""
    state = {k: v.detach().cpu().clone().contiguous() for k, v in model.state_dict().items()}
    for k, v in weights.items():
        key = prefix + k
        if key not in state:
            raise KeyError(f"{key} is not a weight of the base model")  # a tower that does not mirror its model: a bug
        state[key] = v.detach().cpu().to(state[key].dtype).contiguous()
    return state


def open_clip_model_cfg(name: str) -> dict[str, Any]:
    """The open_clip architecture config of the model called ``name`` (what ``open_clip_config.json`` records)."""
    import open_clip

    from domainbench.models.open_clip_backend import _split_spec

    spec = name.split(":", 1)[1]
    folder = Path(spec).expanduser()
    if folder.is_dir():
        return dict(json.loads((folder / "open_clip_config.json").read_text())["model_cfg"])
    arch, tag = _split_spec(spec)
    cfg = dict(open_clip.get_model_config(arch) or {})
    if not Path(tag).expanduser().is_file() and (open_clip.get_pretrained_cfg(arch, tag) or {}).get("quick_gelu"):
        cfg["quick_gelu"] = True  # what force_quick_gelu did when the tag was loaded
    return cfg


class OpenClipTower(Tower):
    kind = "open_clip"

    def __init__(self, base: Any) -> None:
        super().__init__(base)
        self.module = base.model.visual
        self.model_cfg = open_clip_model_cfg(base.name)

    def model_files(self) -> tuple[str, ...]:
        return ("open_clip_model.safetensors", "open_clip_config.json")

    def write(self, out: Path, weights: dict[str, torch.Tensor], meta: dict[str, Any], atomic: Any) -> None:
        from safetensors.torch import save_file

        state = _full_state(self.base.model, "visual.", weights)
        pp = {k: v for k, v in self.base.preprocess_cfg.items() if k != "size"}
        config = {"model_cfg": self.model_cfg, "preprocess_cfg": pp, "domainbench_finetune": meta}
        atomic(out / "open_clip_model.safetensors", lambda p: save_file(state, str(p)))
        atomic(out / "open_clip_config.json", lambda p: p.write_text(json.dumps(config, indent=1, default=list)))


class HFTower(Tower):
    kind = "hf"

    def __init__(self, base: Any) -> None:
        super().__init__(base)
        self.module = HFImageTower(base.model)

    def model_files(self) -> tuple[str, ...]:
        return ("model.safetensors", "config.json")

    def write(self, out: Path, weights: dict[str, torch.Tensor], meta: dict[str, Any], atomic: Any) -> None:
        state = _full_state(self.base.model, "", weights)
        # save_pretrained writes several files; a kill between them leaves the checkpoint, which resume reads
        self.base.model.save_pretrained(out, state_dict=state)
        self.base.tokenizer.save_pretrained(out)
        self.base.image_processor.save_pretrained(out)


def tower_of(base: Any) -> Tower:
    """The trainable tower of a loaded model, or one ``UserInputError`` for a model without one."""
    from domainbench.models.embedded import EmbeddedModel

    if isinstance(base, EmbeddedModel):
        return EmbeddedTower(base)
    from domainbench.models.hf_backend import HFDualEncoder
    from domainbench.models.open_clip_backend import OpenClipModel

    if isinstance(base, OpenClipModel):
        return OpenClipTower(base)
    if isinstance(base, HFDualEncoder):
        return HFTower(base)
    raise UserInputError(f"{base.name!r} has no image tower domainbench can train (fine-tuning trains embedded, open_clip "
                         "and hf CLIP/SigLIP/ALIGN image towers); a remote or generative model cannot be fine-tuned here")


def check_name(model: str) -> None:
    if not model.startswith(TRAINABLE_PREFIXES):
        raise UserInputError(f"{model!r}: fine-tuning trains the image tower of a contrastive model "
                             f"({', '.join(p + '...' for p in TRAINABLE_PREFIXES)}); a remote or generative model has none "
                             "to train: give e.g. embedded:fmnist-plain or open_clip:ViT-B-32/openai")

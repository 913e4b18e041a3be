"""``local:PATH`` - a model saved on disk, loaded by the same code as its hub counterpart.

PATH is a folder in one of two formats, told apart by the file that describes it:

* ``open_clip_config.json`` -> an open_clip model folder: ``{"model_cfg": {...},
  "preprocess_cfg": {...}}`` plus one weights file (``open_clip_model.safetensors``,
  ``open_clip_pytorch_model.bin``, ``model.safetensors``, ...) and, for text towers with an
  ``hf_tokenizer_name``, the tokenizer files. This is what open_clip's ``push_to_hf_hub``
  writes and what open_clip repositories on the hub contain; loaded by
  :func:`domainbench.models.open_clip_backend.load_open_clip_dir`.
* ``config.json`` -> a transformers ``save_pretrained`` folder (model + tokenizer + image
  processor) of a CLIP, SigLIP or ALIGN model; loaded by
  :func:`domainbench.models.hf_backend.load_hf_model`.

* ``domainbench_model.json`` -> an embedded model whose image tower ``domainbench finetune`` trained:
  ``model.safetensors`` in the embedded weights format (the text tower is the embedded MiniLM);
  loaded by :func:`domainbench.models.embedded.load_embedded_dir`.

A bare open_clip checkpoint file has no architecture in it: use ``open_clip:ARCH/PATH``.
"""

from __future__ import annotations

from pathlib import Path

import torch

from domainbench.errors import UserInputError
from domainbench.models.base import VisionLanguageModel


def load_local(spec: str, device: torch.device) -> VisionLanguageModel:
    name = f"local:{spec}"
    path = Path(spec).expanduser()
    if not path.exists():
        raise UserInputError(f"{name}: path {str(path)!r} does not exist; give a saved model folder")
    if path.is_file():
        raise UserInputError(
            f"{name}: {str(path)!r} is a file; a checkpoint file needs its architecture, use "
            f"open_clip:ARCH/{path} (e.g. open_clip:ViT-B-32/{path}), or give a model folder"
        )
    if (path / "domainbench_model.json").is_file():  # an embedded model's image tower fine-tuned (domainbench.tuning)
        from domainbench.models.embedded import load_embedded_dir

        return load_embedded_dir(path, device, name)
    if (path / "open_clip_config.json").is_file():
        from domainbench.models.open_clip_backend import load_open_clip_dir

        return load_open_clip_dir(path, device, name)
    if (path / "config.json").is_file():
        from domainbench.models.hf_backend import load_hf_model

        return load_hf_model(path, device, name)
    raise UserInputError(
        f"{name}: folder {str(path)!r} has neither open_clip_config.json (an open_clip model "
        "folder) nor config.json (a transformers save_pretrained folder); see "
        "backend/models/local_backend.py for both formats"
    )


def create_local(spec: str, device: torch.device) -> VisionLanguageModel:
    return load_local(spec, device)


__all__ = ["load_local"]

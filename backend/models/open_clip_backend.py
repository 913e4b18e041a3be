"""``open_clip:ARCH/TAG`` - models built by open_clip's own factory.

Accepted forms (ARCH is an open_clip model config name, e.g. ``ViT-B-32``)::

    open_clip:ViT-B-32/openai            # a pretrained tag open_clip knows
    open_clip:ViT-B-32/ckpt.pt           # ARCH + a checkpoint file (state_dict, .pt/.bin/.safetensors);
                                         # an absolute path after the slash: ViT-B-32//abs/ckpt.pt
    open_clip:/path/to/dir               # an open_clip model folder, same as local:/path/to/dir

Weights are looked up in the local caches only (the HF hub cache for tags open_clip serves
from the hub, ``~/.cache/clip`` for tags it serves by URL); a tag whose weights are missing
raises :class:`~domainbench.errors.ModelUnavailableError` naming the repository to download.
The tag decides activation (QuickGELU for the OpenAI weights) and preprocessing (mean/std,
interpolation, resize mode), exactly as open_clip's pretrained table says.

An open_clip model folder (the format open_clip's ``push_to_hf_hub`` writes and hub repos
hold) contains ``open_clip_config.json`` = ``{"model_cfg": {embed_dim, vision_cfg, text_cfg,
...}, "preprocess_cfg": {mean, std, interpolation, resize_mode}}`` and one weights file
(``open_clip_model.safetensors``, ``open_clip_pytorch_model.bin``, ...); a text tower with
``hf_tokenizer_name`` needs the tokenizer files in the same folder.

Preprocessing is reimplemented on uint8 batches with torch (antialiased resize calls for the
whole batch, :class:`BatchPreprocess`, shared with the hf: backend) instead of open_clip's
per-image PIL pipeline; it reproduces PIL's resize to within one grey level before
normalisation (tests/models/test_hub_backends.py).
"""

from __future__ import annotations

import difflib
import functools
import importlib.metadata
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torchvision.transforms.v2.functional as TF
from torchvision.transforms import InterpolationMode

from domainbench.errors import ModelUnavailableError, UserInputError
from domainbench.models.base import VisionLanguageModel
from domainbench.models.hub_common import as_uint8_nchw, autocast_for, cached_hf_file, offline, unavailable, unit_rows

# ViT-L-14/openai and ViT-L-14-quickgelu/openai are the same model here: a tag's QuickGELU
# flag is always applied (open_clip itself would only warn about the mismatch)
KNOWN_MODELS: list[str] = [
    "RN50/openai",
    "RN101/openai",
    "RN50x4/openai",
    "ViT-B-32/openai",
    "ViT-B-16/openai",
    "ViT-L-14/openai",
    "ViT-L-14-336/openai",
    "ViT-L-14-quickgelu/openai",
    "ViT-L-14-quickgelu/metaclip_fullcc",
    "ViT-L-14-quickgelu/dfn2b",
    "ViT-B-32/laion2b_s34b_b79k",
    "ViT-B-16/laion2b_s34b_b88k",
    "ViT-L-14/laion2b_s32b_b82k",
    "ViT-H-14/laion2b_s32b_b79k",
    "ViT-B-32/datacomp_xl_s13b_b90k",
]

#: where open_clip's URL downloads land when no cache_dir is given (open_clip.pretrained)
URL_CACHE_DIR = Path("~/.cache/clip").expanduser()
_HF_WEIGHT_FILES = ("open_clip_model.safetensors", "open_clip_pytorch_model.bin")
_PREPROCESS_KEYS = ("mean", "std", "interpolation", "resize_mode")


# ----------------------------------------------------------------------------- preprocessing


def _resize_crop_sizes(
    h: int, w: int, size: tuple[int, int], resize_mode: str
) -> tuple[tuple[int, int], tuple[int, int] | None]:
    """(resized h, w) and the final (h, w) crop-or-pad, as open_clip.transform.image_transform."""
    th, tw = size
    if resize_mode == "squash":
        return (th, tw), None
    if resize_mode == "shortest" and th == tw:
        # torchvision Resize(int): short side -> size, long side truncated (not rounded)
        if h <= w:
            return (th, int(th * w / h)), size
        return (int(th * h / w), th), size
    # ResizeKeepRatio (timm): the ratio of the shorter (or longer) side, sides rounded
    longest = 1.0 if resize_mode == "longest" else 0.0
    rh, rw = h / th, w / tw
    ratio = max(rh, rw) * longest + min(rh, rw) * (1.0 - longest)
    return (round(h / ratio), round(w / ratio)), size


def _center_crop_or_pad(x: torch.Tensor, size: tuple[int, int], fill: int, floor_offsets: bool = False) -> torch.Tensor:
    """Centre crop to ``size``, padding with ``fill`` where the batch is smaller.

    Offsets as torchvision's CenterCrop and open_clip's center_crop_or_pad (the smaller half of
    the padding first, crop offsets rounded), or with ``floor_offsets`` as transformers'
    ``center_crop`` (the larger half first, offsets rounded down).
    """
    th, tw = size
    h, w = x.shape[-2:]
    if th > h or tw > w:
        dh, dw = max(th - h, 0), max(tw - w, 0)
        pad_t, pad_l = ((dh + 1) // 2, (dw + 1) // 2) if floor_offsets else (dh // 2, dw // 2)
        x = torch.nn.functional.pad(x, (pad_l, dw - pad_l, pad_t, dh - pad_t), value=fill)
        h, w = x.shape[-2:]
    if floor_offsets:
        top, left = (h - th) // 2, (w - tw) // 2
    else:
        top, left = int(round((h - th) / 2.0)), int(round((w - tw) / 2.0))
    return x[..., top : top + th, left : left + tw]


@functools.cache
def _pil_vertical_first_rule() -> bool:
    """Whether the installed Pillow (13 on, python-pillow/Pillow#9549) may resize vertically first."""
    try:
        return int(importlib.metadata.version("pillow").split(".")[0]) >= 13
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return True


def resize_passes(h: int, w: int, size: tuple[int, int]) -> list[tuple[int, int]]:
    """The (h, w) after each of PIL's two resize passes, in PIL's order.

    PIL resizes width then height, rounding to uint8 in between; Pillow 13 runs the height
    first when it shrinks by more than twice what the width does (``h - th > 2 * (w - tw)``,
    measured on Pillow 13.0). The order changes results by up to ~8 grey levels.
    """
    th, tw = size
    if _pil_vertical_first_rule() and h > th and h - th > 2 * (w - tw):
        return [(th, w), (th, tw)]
    return [(h, tw), (th, tw)]


def resize_uint8(x: torch.Tensor, size: tuple[int, int], interpolation: InterpolationMode) -> torch.Tensor:
    """Antialiased resize of a uint8 (N, C, H, W) batch as PIL does it, on the batch's device.

    torchvision's native uint8 kernel (the CPU only) rounds between its passes but always runs
    the width first; a height-first resize is then two one-axis calls. Elsewhere torchvision would
    resize in float in one go (no rounding between the passes: up to ~15 grey levels from PIL),
    so other devices run :func:`resize_uint8_in_float`.
    """
    if x.device.type != "cpu":
        return resize_uint8_in_float(x, size, interpolation)
    first = resize_passes(*x.shape[-2:], size)[0]
    if first[0] != x.shape[-2]:  # height first
        x = TF.resize(x, list(first), interpolation=interpolation, antialias=True)
    return TF.resize(x, list(size), interpolation=interpolation, antialias=True)


def resize_uint8_in_float(x: torch.Tensor, size: tuple[int, int], interpolation: InterpolationMode) -> torch.Tensor:
    """The separable resize in float with uint8 rounding and clamping after each pass, in PIL's order."""
    y = x.to(torch.float32)
    for step in resize_passes(*y.shape[-2:], size):
        if step != tuple(y.shape[-2:]):
            y = torch.nn.functional.interpolate(y, size=step, mode=interpolation.value, antialias=True, align_corners=False)
            y = y.add_(0.5).floor_().clamp_(0, 255)  # half up, as the fixed-point kernels round
    return y.to(torch.uint8)


class BatchPreprocess:
    """A model's inference transform on a uint8 batch: resize, crop/pad, then ``x * scale - shift``.

    The resize runs on uint8 with PIL's rounding between the passes and PIL's pass order
    (:func:`resize_uint8`); resizing float images instead differs from PIL by up to ~15 grey
    levels on high-frequency content. Subclasses say what to resize and crop to (:meth:`plan`).
    """

    interpolation: InterpolationMode = InterpolationMode.BICUBIC
    fill: int = 0
    #: transformers' centre crop offsets rather than torchvision's (see _center_crop_or_pad)
    floor_offsets: bool = False

    def __init__(self, name: str, scale: torch.Tensor, shift: torch.Tensor) -> None:
        self.name = name
        # one fused multiply-subtract over the float batch, per channel
        self._affine = {torch.device("cpu"): (scale.float().view(1, 3, 1, 1), shift.float().view(1, 3, 1, 1))}

    def plan(self, h: int, w: int) -> tuple[tuple[int, int], tuple[int, int] | None]:
        """(resized h, w) and the final (h, w) crop-or-pad (None: none) of an h x w batch."""
        raise NotImplementedError

    def affine(self, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """(scale, shift) on ``device``, copied there once rather than with every batch."""
        if device not in self._affine:
            scale, shift = self._affine[torch.device("cpu")]
            self._affine[device] = (scale.to(device), shift.to(device))
        return self._affine[device]

    def __call__(self, images: np.ndarray | torch.Tensor) -> torch.Tensor:
        x = as_uint8_nchw(images, self.name)
        h, w = x.shape[-2:]
        resized, crop = self.plan(h, w)
        if resized != (h, w):
            x = resize_uint8(x, resized, self.interpolation)
        if crop is not None and crop != tuple(x.shape[-2:]):
            x = _center_crop_or_pad(x, crop, self.fill, self.floor_offsets)
        out = torch.empty(x.shape, dtype=torch.float32, device=x.device)  # contiguous NCHW
        out.copy_(x)
        scale, shift = self.affine(x.device)
        return out.mul_(scale).sub_(shift)

    def float_pixels(self, x: torch.Tensor) -> torch.Tensor:
        """The same transform on float (N, H, W, C) in [0, 1], differentiable (the gradient search).

        No rounding between the resize passes (it would cut the gradient): within a few grey
        levels of ``__call__`` on high-frequency content, equal where no resize is needed.
        """
        x = x.permute(0, 3, 1, 2)
        x = x.expand(-1, 3, -1, -1) if x.shape[1] == 1 else x[:, :3]  # grey as RGB, alpha dropped (as_uint8_nchw)
        h, w = x.shape[-2:]
        resized, crop = self.plan(h, w)
        if resized != (h, w):
            x = torch.nn.functional.interpolate(x * 255.0, size=resized, mode=self.interpolation.value, antialias=True,
                                                align_corners=False).clamp(0.0, 255.0)
        else:
            x = x * 255.0
        if crop is not None and crop != tuple(x.shape[-2:]):
            x = _center_crop_or_pad(x, crop, self.fill, self.floor_offsets)
        scale, shift = self.affine(x.device)
        return x * scale - shift


class TorchImagePreprocess(BatchPreprocess):
    """open_clip's inference transform (its preprocess config) as a :class:`BatchPreprocess`."""

    def __init__(self, cfg: dict[str, Any], name: str = "model") -> None:
        size = cfg.get("size", 224)
        self.size: tuple[int, int] = (size, size) if isinstance(size, int) else (int(size[0]), int(size[-1]))
        self.resize_mode = cfg.get("resize_mode", "shortest")
        if self.resize_mode not in ("shortest", "longest", "squash"):
            raise UserInputError(f"{name}: unknown resize_mode {self.resize_mode!r}; use shortest, longest or squash")
        interp = cfg.get("interpolation", "bicubic")
        self.interpolation = InterpolationMode.BILINEAR if interp == "bilinear" else InterpolationMode.BICUBIC
        self.fill = int(cfg.get("fill_color", 0))
        mean = torch.tensor(_triple(cfg.get("mean", (0.48145466, 0.4578275, 0.40821073))), dtype=torch.float32)
        std = torch.tensor(_triple(cfg.get("std", (0.26862954, 0.26130258, 0.27577711))), dtype=torch.float32)
        # (x / 255 - mean) / std == x * scale - shift
        super().__init__(name, 1.0 / (255.0 * std), mean / std)

    def plan(self, h: int, w: int) -> tuple[tuple[int, int], tuple[int, int] | None]:
        return _resize_crop_sizes(h, w, self.size, self.resize_mode)


def _triple(v: Any) -> tuple[float, float, float]:
    if isinstance(v, (int, float)):
        return (float(v),) * 3
    return tuple(float(a) for a in v)  # type: ignore[return-value]


# ----------------------------------------------------------------------------- the wrapper


class OpenClipModel(VisionLanguageModel):
    """An open_clip CLIP/CustomTextCLIP with its tokenizer and preprocessing config."""

    def __init__(self, name: str, model: torch.nn.Module, tokenizer: Any, device: torch.device) -> None:
        self.name = name
        self.device = device
        self.model = model.eval()
        self.tokenizer = tokenizer
        pp = dict(getattr(model.visual, "preprocess_cfg", {}) or {})
        pp.setdefault("size", getattr(model.visual, "image_size", 224))
        self.preprocess_cfg = pp
        self._preprocess = TorchImagePreprocess(pp, name)
        with torch.no_grad():
            self.logit_scale = float(model.logit_scale.exp().item())
            bias = getattr(model, "logit_bias", None)
            #: SigLIP-style sigmoid bias (None for softmax CLIP models)
            self.logit_bias = None if bias is None else float(bias.item())

    device_preprocess = True

    def preprocess(self, images: np.ndarray) -> torch.Tensor:
        return self._preprocess(images)

    def preprocess_tensor(self, images: torch.Tensor) -> torch.Tensor:
        return self._preprocess(images)

    def encode_image(self, pixels: torch.Tensor) -> torch.Tensor:
        with torch.no_grad(), autocast_for(self.device):
            feats = self.model.encode_image(pixels)
        return unit_rows(feats)

    def tokenize(self, texts: Sequence[str]) -> torch.Tensor:
        return self.tokenizer(list(texts))

    def encode_text(self, texts: Sequence[str]) -> torch.Tensor:
        tokens = self.tokenize(texts).to(self.device, non_blocking=True)
        with torch.no_grad(), autocast_for(self.device):
            feats = self.model.encode_text(tokens)
        return unit_rows(feats)


# ----------------------------------------------------------------------------- loading


def _find_url_weights(url: str) -> str | None:
    if not url:
        return None
    path = URL_CACHE_DIR / os.path.basename(url)
    return str(path) if path.is_file() else None


def _cached_tag_weights(pcfg: dict[str, Any]) -> tuple[str | None, str | None]:
    """(cached checkpoint path or None, hub repo id to download from or None).

    Mirrors open_clip.pretrained.download_pretrained: ``hf_hub`` is ``org/repo/`` (default
    file names) or ``org/repo/file``, and a .safetensors twin is preferred when cached.
    """
    if "file" in pcfg:
        return pcfg["file"], None
    repo_id = None
    if pcfg.get("hf_hub"):
        repo_id, filename = os.path.split(pcfg["hf_hub"])
        names = [filename] if filename else list(_HF_WEIGHT_FILES)
        if filename.endswith((".bin", ".pth")):
            names.insert(0, filename[:-4] + ".safetensors")
        hit = cached_hf_file(repo_id, names)
        if hit:
            return hit, repo_id
    return _find_url_weights(pcfg.get("url", "")), repo_id


def _split_spec(spec: str) -> tuple[str, str]:
    arch, sep, tag = spec.partition("/")
    if not arch or not sep or not tag:
        raise UserInputError(
            f"open_clip model {spec!r} must be ARCH/TAG, e.g. open_clip:ViT-B-32/openai "
            "(or ARCH/PATH to a checkpoint file, or a model folder via local:PATH)"
        )
    return arch, tag


def _unknown_arch(arch: str) -> UserInputError:
    import open_clip

    close = difflib.get_close_matches(arch, open_clip.list_models(), n=3)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    return UserInputError(
        f"open_clip has no architecture {arch!r} (see open_clip.list_models()).{hint}"
    )


def _unknown_tag(arch: str, tag: str) -> UserInputError:
    import open_clip

    tags = open_clip.list_pretrained_tags_by_model(arch)
    close = difflib.get_close_matches(tag, tags, n=3)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    return UserInputError(
        f"{tag!r} is neither a pretrained tag of open_clip {arch} (tags: {', '.join(tags) or 'none'}) "
        f"nor an existing checkpoint file.{hint}"
    )


def _tokenizer_kwargs(model_cfg: dict[str, Any]) -> dict[str, Any]:
    # HF tokenizers are read from the cache only; open_clip's own BPE is bundled
    return {"local_files_only": True} if model_cfg.get("text_cfg", {}).get("hf_tokenizer_name") else {}


def _build(
    name: str, model_name: str, device: torch.device, *, repo_id: str | None = None, **kwargs: Any
) -> OpenClipModel:
    import open_clip

    model_cfg = open_clip.get_model_config(model_name) or {}
    try:
        with offline():
            model = open_clip.create_model(model_name, device=device, **kwargs)
            tokenizer = open_clip.get_tokenizer(model_name, **_tokenizer_kwargs(model_cfg))
    except OSError as e:
        # what a hub request refused by offline() or a missing tokenizer/config file raises
        raise unavailable(name, repo_id, extra=f"open_clip said: {str(e).splitlines()[0][:300]}") from e
    return OpenClipModel(name, model, tokenizer, device)


def load_open_clip_dir(path: Path, device: torch.device, name: str) -> OpenClipModel:
    """An open_clip model folder (``open_clip_config.json`` + weights), see the module doc."""
    import open_clip.factory as ocf

    if ocf._find_checkpoint_in_dir(path) is None:
        raise ModelUnavailableError(
            f"model folder {str(path)!r} for {name!r} has open_clip_config.json but no weights file "
            "(open_clip_model.safetensors, open_clip_pytorch_model.bin, model.safetensors, ...)"
        )
    return _build(name, f"local-dir:{path}", device, require_pretrained=True)


def load_open_clip(spec: str, device: torch.device) -> OpenClipModel:
    import open_clip

    name = f"open_clip:{spec}"
    if Path(spec).is_dir():
        return load_open_clip_dir(Path(spec), device, name)
    arch, tag = _split_spec(spec)
    if open_clip.get_model_config(arch) is None:
        raise _unknown_arch(arch)
    ckpt_file = Path(tag).expanduser()
    if ckpt_file.is_file():
        return _build(name, arch, device, pretrained=str(ckpt_file), require_pretrained=True)
    pcfg = open_clip.get_pretrained_cfg(arch, tag)
    if not pcfg:
        raise _unknown_tag(arch, tag)
    ckpt, repo_id = _cached_tag_weights(pcfg)
    if ckpt is None:
        notes = [f"{os.path.basename(pcfg['url'])} is not in {URL_CACHE_DIR} either"] if pcfg.get("url") else []
        notes.append(
            f"open_clip fetches them when run with internet: python -c \"import open_clip; "
            f"open_clip.create_model('{arch}', pretrained='{tag}')\""
        )
        raise unavailable(name, repo_id, extra="; ".join(notes))
    # the tag's training setup, which open_clip would only warn about if ARCH disagreed
    pp = {k: pcfg[k] for k in _PREPROCESS_KEYS if k in pcfg}
    return _build(
        name,
        arch,
        device,
        repo_id=repo_id,
        pretrained=ckpt,
        require_pretrained=True,
        force_quick_gelu=bool(pcfg.get("quick_gelu", False)),
        force_preprocess_cfg=pp,
    )


def import_library() -> None:
    """Import open_clip (seconds, cold): the engine calls this before loading, so a run's start-up
    timings count it as imports rather than as loading the model."""
    import open_clip  # noqa: F401


def create_open_clip(spec: str, device: torch.device) -> VisionLanguageModel:
    return load_open_clip(spec, device)


__all__ = ["KNOWN_MODELS", "BatchPreprocess", "OpenClipModel", "TorchImagePreprocess", "load_open_clip", "load_open_clip_dir"]

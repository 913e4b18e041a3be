"""Pieces shared by the hub-backed model wrappers (open_clip, transformers, local dirs).

* :func:`offline` - model loading never touches the network: weights come from the local
  cache or a local path, otherwise :class:`~domainbench.errors.ModelUnavailableError` says how
  to get them.  A silent multi-gigabyte download (or a hang on a machine without internet)
  in the middle of a benchmark run is worse than a clear error before it starts.
* :func:`as_uint8_nchw` - the one place that validates the images callers hand to
  ``preprocess`` and turns them into a uint8 (N, 3, H, W) tensor without copying RGB data.
* :func:`autocast_for` / :func:`unit_rows` - mixed precision on CUDA, float32 unit vectors out.
"""

from __future__ import annotations

import contextlib
import functools
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch

from domainbench.errors import ModelUnavailableError, UserInputError


@contextlib.contextmanager
def offline() -> Iterator[None]:
    """Make every huggingface_hub request (transformers, open_clip's hub code) fail at once.

    ``HF_HUB_OFFLINE`` is read by huggingface_hub when it is imported, so setting the
    environment variable here would be too late; the module constant is what its HTTP layer
    consults on every request.
    """
    from huggingface_hub import constants

    before = constants.HF_HUB_OFFLINE
    constants.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        constants.HF_HUB_OFFLINE = before


def hf_cache_dir() -> Path:
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE)


def cached_hf_file(repo_id: str, filenames: list[str]) -> str | None:
    """Path of the first of ``filenames`` present in the local HF cache for ``repo_id``."""
    from huggingface_hub import try_to_load_from_cache

    for filename in filenames:
        try:
            hit = try_to_load_from_cache(repo_id, filename, cache_dir=str(hf_cache_dir()))
        except ValueError:  # a malformed repo id: not cached by definition
            return None
        if isinstance(hit, str):
            return hit
    return None


def unavailable(name: str, repo_id: str | None, extra: str = "") -> ModelUnavailableError:
    """The error for weights that are not on this machine, with the ways to get them."""
    msg = f"weights for model {name!r} are not available offline"
    if repo_id:
        msg += f": repository {repo_id!r} is not in the local Hugging Face cache ({hf_cache_dir()})"
    if extra:
        msg += f"; {extra}"
    how = ["save the model to a folder and use `local:PATH` (see backend/models/local_backend.py)"]
    if repo_id:
        how.insert(
            0,
            f"run once on a machine with internet `hf download {repo_id}` (older clients: "
            f"`huggingface-cli download {repo_id}`) and copy the cache here, or point HF_HOME / "
            "HF_HUB_CACHE at a cache that holds it",
        )
    return ModelUnavailableError(msg + ". To get them, " + "; or ".join(how) + ".")


def cached_repo(name: str, repo_id: str, example: str) -> str:
    """``repo_id`` when it is a hub id (ORG/NAME) whose config is in the local cache; otherwise the error
    that says what it is not, or how to download it (``example`` shows a valid model name)."""
    if repo_id.count("/") != 1 or repo_id.startswith(("/", ".", "~")):
        raise UserInputError(f"{name}: {repo_id!r} is neither an existing folder nor a hub id like ORG/NAME "
                             f"(e.g. {example})")
    if cached_hf_file(repo_id, ["config.json"]) is None:
        raise unavailable(name, repo_id)
    return repo_id


def as_tensor(images: np.ndarray | torch.Tensor) -> torch.Tensor:
    """A tensor sharing the array's memory (a tensor is returned as it is)."""
    if isinstance(images, torch.Tensor):
        return images
    with warnings.catch_warnings():  # read-only input (e.g. a memmap) is fine: never written
        warnings.simplefilter("ignore", UserWarning)
        return torch.from_numpy(np.ascontiguousarray(images))


def as_uint8_nchw(images: np.ndarray | torch.Tensor, name: str) -> torch.Tensor:
    """uint8 images (N, H, W, 3), (N, H, W, 1), (N, H, W) or RGBA -> uint8 (N, 3, H, W).

    Grayscale is replicated to three channels and alpha dropped, as PIL's ``convert("RGB")``
    does. The result is a channels-last view where possible (no copy for RGB input), which is
    also the layout torchvision's fast uint8 resize kernels want.
    """
    t = as_tensor(images)
    if t.dtype != torch.uint8:
        raise UserInputError(
            f"{name}.preprocess expects uint8 images (0-255), got dtype {t.dtype}; "
            "convert with np.clip(x, 0, 255).astype(np.uint8)"
        )
    if t.ndim == 3:
        t = t.unsqueeze(-1)
    if t.ndim != 4 or t.shape[-1] not in (1, 3, 4) or t.shape[0] == 0 or 0 in t.shape[1:3]:
        raise UserInputError(
            f"{name}.preprocess expects a non-empty batch shaped (N, H, W, 3) or (N, H, W), "
            f"got shape {tuple(t.shape)}"
        )
    if t.shape[-1] == 1:
        t = t.expand(-1, -1, -1, 3)
    elif t.shape[-1] == 4:
        t = t[..., :3]
    return t.permute(0, 3, 1, 2).contiguous(memory_format=torch.channels_last)


@functools.lru_cache(maxsize=8)
def cuda_autocast_dtype(device: torch.device) -> torch.dtype:
    """bf16 where the GPU computes it natively (compute capability 8.0, Ampere, on), else fp16.

    bf16 has float32's exponent range, so activations cannot overflow to inf/NaN as they can in
    fp16 (the failure ``scoring.encode`` guards against); fp16 keeps 3 more mantissa bits, but
    older GPUs only emulate bf16, slowly.
    """
    major, _ = torch.cuda.get_device_capability(device)
    return torch.bfloat16 if major >= 8 else torch.float16


def autocast_for(device: torch.device) -> contextlib.AbstractContextManager[object]:
    """Mixed precision on CUDA (see ``cuda_autocast_dtype``); full float32 elsewhere."""
    if device.type == "cuda":
        return torch.autocast(device_type="cuda", dtype=cuda_autocast_dtype(device))
    return contextlib.nullcontext()


def unit_rows(x: torch.Tensor) -> torch.Tensor:
    """Float32 rows scaled to unit L2 norm (computed in float32 even after fp16 autocast)."""
    return torch.nn.functional.normalize(x.float(), dim=-1)

"""The model under test: anything that turns uint8 images into logits over the dataset's classes.

Three kinds, told apart by the name's prefix:

* a registry vision-language model (``embedded:fmnist-plain``, ``open_clip:…``): zero-shot
  logits, ``logit_scale`` × cosine similarity to the class prompts;
* ``torchvision:CONFIG.json``: a torchvision classifier built from a config
  ``{"arch": "resnet18", "classes": [...], "weights": "state_dict.pt", "mean": [...], "std": [...]}``
  (``weights`` optional: relative to the config's folder);
* ``py:MODULE:ATTR``: a Python callable ``f(images uint8 (N,H,W[,C])) -> logits (N, C)``; a
  ``classes`` attribute, when present, must equal the dataset's classes, and an optional
  ``torch_logits`` attribute (float images (N,H,W,C) in [0, 1] -> logits) enables the
  gradient search.

``torch_logits`` is the differentiable path the gradient search needs; ``None`` where the
model has none.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import torch

from domainbench.engine.scoring import ModelState, classify, encode
from domainbench.engine.text_cache import cached_classifier
from domainbench.errors import UserInputError
from domainbench.models import create_model, resolve_device
from domainbench.models.generative import VLMOptions, is_generative

if TYPE_CHECKING:
    from domainbench.store import Store


class TestedModel(Protocol):
    name: str

    def logits(self, images: np.ndarray) -> torch.Tensor:
        """uint8 images -> float32 (N, C) logits on the CPU, without gradients."""
        ...

    @property
    def torch_logits(self) -> Callable[[torch.Tensor], torch.Tensor] | None:
        """Differentiable float (N, H, W, C) in [0, 1] -> (N, C), or None."""
        ...


@dataclass
class ZeroShotTested:
    """A registry vision-language model classifying zero-shot."""

    state: ModelState

    @property
    def name(self) -> str:
        return self.state.name

    def logits(self, images: np.ndarray) -> torch.Tensor:
        emb = encode(self.state, images)
        with torch.inference_mode():
            return (self.state.model.logit_scale * emb @ self.state.classifier.T.to(emb.dtype)).float().cpu()

    @property
    def torch_logits(self) -> Callable[[torch.Tensor], torch.Tensor] | None:
        from domainbench.fmr.pixels import differentiable_embedding, differentiable_pixels

        model = self.state.model
        if differentiable_pixels(model, None) is None:
            return None
        # the classifier was built under inference_mode: autograd needs a normal tensor
        classifier = self.state.classifier.clone().float()

        def fn(x: torch.Tensor) -> torch.Tensor:
            pix = differentiable_pixels(model, x.to(model.device))
            emb = differentiable_embedding(model, pix)
            return (model.logit_scale * emb @ classifier.T).cpu()

        return fn


@dataclass
class CallableTested:
    """A Python callable (or a torch module wrapped by ``torchvision:``) returning logits."""

    name: str
    fn: Callable[[np.ndarray], Any]
    grad_fn: Callable[[torch.Tensor], torch.Tensor] | None = None

    def logits(self, images: np.ndarray) -> torch.Tensor:
        with torch.inference_mode():
            out = self.fn(images)
        return torch.as_tensor(np.asarray(out.detach().cpu() if isinstance(out, torch.Tensor) else out), dtype=torch.float32)

    @property
    def torch_logits(self) -> Callable[[torch.Tensor], torch.Tensor] | None:
        return self.grad_fn


def _float_nchw(x: torch.Tensor, mean: Sequence[float], std: Sequence[float]) -> torch.Tensor:
    """float (N,H,W[,C]) in [0, 1] -> normalised (N, 3, H, W): grey images are replicated to RGB."""
    if x.ndim == 3:
        x = x[..., None]
    x = x.permute(0, 3, 1, 2)
    if x.shape[1] == 1:
        x = x.expand(-1, 3, -1, -1)
    m = torch.tensor(mean, dtype=x.dtype, device=x.device).view(1, -1, 1, 1)
    s = torch.tensor(std, dtype=x.dtype, device=x.device).view(1, -1, 1, 1)
    return (x - m) / s


def load_torchvision(spec: str, device: torch.device) -> tuple[CallableTested, list[str] | None]:
    import torchvision

    path = Path(spec).expanduser()
    if not path.is_file():
        raise UserInputError(f"torchvision:{spec}: config file {str(path)!r} does not exist; give a JSON config "
                             '{"arch": "resnet18", "classes": [...], "weights": "state_dict.pt"}')
    try:
        cfg = json.loads(path.read_text())
        arch, classes = cfg["arch"], list(cfg["classes"])
    except (ValueError, KeyError, TypeError) as e:
        raise UserInputError(f"torchvision:{spec}: the config needs \"arch\" and \"classes\" ({e})") from e
    try:
        net = torchvision.models.get_model(arch, weights=None, num_classes=len(classes))
    except ValueError as e:
        raise UserInputError(f"torchvision:{spec}: unknown architecture {arch!r} ({e})") from e
    if cfg.get("weights"):
        wpath = (path.parent / cfg["weights"]).expanduser()
        if not wpath.is_file():
            raise UserInputError(f"torchvision:{spec}: weights file {str(wpath)!r} does not exist")
        net.load_state_dict(torch.load(wpath, map_location="cpu", weights_only=True))
    net.eval().requires_grad_(False).to(device)
    mean = cfg.get("mean", [0.485, 0.456, 0.406])
    std = cfg.get("std", [0.229, 0.224, 0.225])

    def grad_fn(x: torch.Tensor) -> torch.Tensor:
        return net(_float_nchw(x.to(device), mean, std)).float().cpu()

    def fn(images: np.ndarray) -> torch.Tensor:
        return grad_fn(torch.from_numpy(np.ascontiguousarray(images)).float() / 255.0)

    return CallableTested(f"torchvision:{spec}", fn, grad_fn), classes


def load_callable(spec: str) -> tuple[CallableTested, list[str] | None]:
    module, _, attr = spec.partition(":")
    if not module or not attr:
        raise UserInputError(f"py:{spec}: name a callable as py:MODULE:ATTR (e.g. py:mypkg.models:classify)")
    try:
        fn = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as e:
        raise UserInputError(f"py:{spec}: cannot import it ({e}); check the module name and PYTHONPATH") from e
    if not callable(fn):
        raise UserInputError(f"py:{spec} is a {type(fn).__name__}, not a callable returning logits")
    classes = getattr(fn, "classes", None)
    return CallableTested(f"py:{spec}", fn, getattr(fn, "torch_logits", None)), None if classes is None else list(classes)


@dataclass
class GenerativeTested:
    """A generative VLM (hf-vlm:, openai-vlm:): its logits are the class log-likelihood scores
    (docs/generative-vlms.md). No gradient path: the search runs without gradients."""

    state: ModelState

    @property
    def name(self) -> str:
        return self.state.name

    def logits(self, images: np.ndarray) -> torch.Tensor:
        scores = classify(self.state, images).vlm
        if scores is None or scores.scores is None:
            raise UserInputError(f"tested model {self.name!r} gives no class scores (a free-answer endpoint); FMR "
                                 "needs them: test a local hf-vlm: model, or an endpoint with logprobs")
        return torch.from_numpy(scores.scores).float()

    @property
    def torch_logits(self) -> Callable[[torch.Tensor], torch.Tensor] | None:
        return None


def load_tested(name: str, classes: list[str], device: str, batch_size: int,
                templates: Sequence[str] | None, probe: np.ndarray, *, cache: Store | None = None) -> TestedModel:
    """Build the tested model and check that it classifies over exactly the dataset's classes
    (a zero-shot model's classifier from ``cache``'s text embeddings when there).

    ``probe`` (a few of the dataset's images) is scored once, so a callable with the wrong
    number of logits is refused before the run is created.
    """
    dev = resolve_device(device)
    prefix, _, rest = name.partition(":")
    declared: list[str] | None = None
    tested: TestedModel
    if prefix == "torchvision":
        tested, declared = load_torchvision(rest, dev)
    elif prefix == "py":
        tested, declared = load_callable(rest)
    else:
        model = create_model(name, dev)
        if is_generative(model):
            model.configure(classes, VLMOptions())
            tested = GenerativeTested(ModelState(name, model, torch.zeros((len(classes), 0)), batch_size))
        else:
            tested = ZeroShotTested(ModelState(name, model, cached_classifier(cache, model, classes, templates).to(dev), batch_size))
    if declared is not None and declared != list(classes):
        raise UserInputError(
            f"tested model {name!r} classifies over {declared} but the dataset's classes are {list(classes)}; "
            "FMR needs the same classes in the same order"
        )
    out = tested.logits(probe[:2])
    if out.ndim != 2 or out.shape[1] != len(classes):
        raise UserInputError(
            f"tested model {name!r} returns logits of shape {tuple(out.shape)} for {len(probe[:2])} images; "
            f"expected (N, {len(classes)}): one logit per dataset class {list(classes)}"
        )
    return tested

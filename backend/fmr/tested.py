"""The model under test: anything that turns uint8 images into logits over the dataset's classes.

Every tested model is loaded by the one model loader (``engine.scoring.load_model``) and wrapped by
its backend's kind (``domainbench.records.model_backends``):

* a contrastive model (``embedded:fmnist-plain``, ``open_clip:…``): zero-shot logits,
  ``logit_scale`` × cosine similarity to the class prompts;
* a generative model (``hf-vlm:``, ``openai-vlm:``): its class scores;
* a plain classifier (``torchvision:CONFIG.json``, ``py:MODULE:ATTR``; ``domainbench.models.classifier``):
  its logits; a ``torch_logits`` attribute enables the gradient search.

``torch_logits`` is the differentiable path the gradient search needs; ``None`` where the
model has none.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import torch

from domainbench.engine.scoring import ClassMismatchError, ModelState, classify, encode, is_classifier, load_model
from domainbench.errors import UserInputError
from domainbench.models.classifier import ClassifierModel
from domainbench.models.generative import is_generative

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


class CallableTested(ClassifierModel):
    """A Python callable returning logits, as a tested model: a plain classifier's (``torchvision:``, ``py:``), or a
    ready-made one (its logits and gradient path are the classifier backend's)."""

    def __init__(self, name: str, fn: Callable[[np.ndarray], Any],
                 grad_fn: Callable[[torch.Tensor], torch.Tensor] | None = None) -> None:
        super().__init__(name, fn, torch.device("cpu"), grad_fn=grad_fn)


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
                templates: Sequence[str] | None, probe: np.ndarray, *, cache: Store | None = None,
                options: Mapping[str, Any] | None = None) -> TestedModel:
    """Build the tested model with its per-model ``options`` and check that it classifies over exactly the
    dataset's classes (a zero-shot model's classifier from ``cache``'s text embeddings when there).

    ``probe`` (a few of the dataset's images) is scored once, so a callable with the wrong
    number of logits is refused before the run is created.
    """
    try:
        state = load_model(name, classes, device, batch_size, templates, options, cache=cache)
    except ClassMismatchError as e:
        raise UserInputError(
            f"tested model {name!r} classifies over {e.declared} but the dataset's classes are {list(classes)}; "
            "FMR needs the same classes in the same order"
        ) from None
    tested: TestedModel
    if is_classifier(state.model):
        tested = CallableTested(name, state.model.logits, state.model.torch_logits)
    elif is_generative(state.model):
        tested = GenerativeTested(state)
    else:
        tested = ZeroShotTested(state)
    out = tested.logits(probe[:2])
    if out.ndim != 2 or out.shape[1] != len(classes):
        raise UserInputError(
            f"tested model {name!r} returns logits of shape {tuple(out.shape)} for {len(probe[:2])} images; "
            f"expected (N, {len(classes)}): one logit per dataset class {list(classes)}"
        )
    return tested

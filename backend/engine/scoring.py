"""Scoring images with the run's models: load them, encode in batches, predict zero-shot.

Shared by the runner and the per-run tasks; it knows nothing about units or the store.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from domainbench import host_memory
from domainbench.confusion import SparseConfusion
from domainbench.models import VisionLanguageModel, create_model, resolve_device
from domainbench.models.generative import UNPARSED, VLMOptions, VLMResult, is_generative, softmax_confidence
from domainbench.models.hub_common import as_tensor, autocast_for

if TYPE_CHECKING:
    from domainbench.engine.timings import StageTimes
    from domainbench.store import Store


class ModelOutputError(RuntimeError):
    """A model produced NaN or infinite embeddings: its numbers would be meaningless."""


@dataclass
class ModelState:
    """A loaded model with its zero-shot classifier and its current (OOM-adapted) batch size."""

    name: str
    model: VisionLanguageModel
    classifier: torch.Tensor
    batch_size: int
    #: the run's stage timer (``engine/timings.py``); None: not timed (FMR, Ray actors, tests)
    timer: StageTimes | None = None


def load_models(names: Sequence[str], classes: list[str], device: str, batch_size: int,
                templates: Sequence[str] | None, say: Callable[[str], None] | None = None,
                vlm: VLMOptions | None = None, cache: Store | None = None,
                timer: StageTimes | None = None) -> list[ModelState]:
    """The models with their zero-shot classifiers (read from ``cache``'s text embeddings when there).

    ``timer`` gets the start-up stages (``engine.timings.STARTUP``): the backends' imports, model
    load and text embeddings, each summed over the models."""
    from domainbench.engine.text_cache import cached_classifier
    from domainbench.engine.timings import STARTUP, StageTimes

    timer = timer or StageTimes()
    dev = resolve_device(device)
    states = []
    for name in names:
        if say is not None:
            say(f"loading {name} on {dev}")
        with timer.stage(STARTUP, "imports"):
            _import_backend(name)
        with timer.stage(STARTUP, "model load"):
            model = create_model(name, dev)
        with timer.stage(STARTUP, "text embeddings"):
            if is_generative(model):  # it classifies itself: no text classifier (an empty one keeps shapes)
                model.configure(classes, vlm or VLMOptions())
                if hasattr(model, "preflight"):  # an endpoint nobody listens at: refused before the run stores anything
                    model.preflight()
                classifier = torch.zeros((len(classes), 0), device=dev)
            else:
                classifier = cached_classifier(cache, model, classes, templates).to(dev)
        states.append(ModelState(name, model, classifier, batch_size))
    host_memory.release_freed()  # what loading freed is not needed again (see the function)
    return states


def _import_backend(name: str) -> None:
    """Import the model backends (open_clip, transformers: seconds) before the model is built, so a
    run's start-up says which of its seconds were imports; an unknown prefix is left to ``create_model``,
    whose error names the known ones."""
    from domainbench.models import MODEL_BACKENDS

    prefix, sep, _ = name.partition(":")
    if sep and prefix in MODEL_BACKENDS:
        # a backend module that imports its library on first use says how (``import_library``)
        module = sys.modules.get(getattr(MODEL_BACKENDS.get(prefix).create, "__module__", ""))
        imports = getattr(module, "import_library", None)
        if callable(imports):
            imports()


@dataclass
class Scored:
    """A batch's predictions, its embeddings where they were computed, and a generative model's extras."""

    preds: np.ndarray
    #: softmax probability of the predicted class over the label set (None: a free answer has none)
    confidence: np.ndarray | None = None
    embeddings: torch.Tensor | None = None
    vlm: VLMResult | None = None
    #: (N, classes) float32 logits at the model's logit scale, or a generative model's class scores (None: none)
    logits: np.ndarray | None = None


def classify(ms: ModelState, images: np.ndarray | torch.Tensor, embeddings: bool = False) -> Scored:
    """Predictions of a batch: embeddings + classifier for a dual encoder, the model itself for a
    generative one (its embeddings, from the vision tower, only when asked for and available)."""
    if not is_generative(ms.model):
        emb = encode(ms, images)
        preds, conf, logits = predict_with_confidence(ms, emb, logits=True)
        return Scored(preds, conf, emb, logits=logits)
    while True:
        try:
            res = ms.model.classify(as_host(images), ms.batch_size)
        except torch.OutOfMemoryError as e:
            halve_batch(ms, e)
            continue
        emb = encode(ms, images) if embeddings and not getattr(ms.model, "remote", False) else None
        conf = None if res.scores is None else softmax_confidence(res.scores).astype(np.float32)
        return Scored(res.preds, conf, emb, res, logits=res.scores)


def halve_batch(ms: ModelState, error: torch.OutOfMemoryError) -> None:
    """After a CUDA out-of-memory error: half the batch from now on (the caller retries the chunk);
    at one image there is nothing left to halve, so the error stands."""
    if ms.batch_size == 1:
        raise error
    ms.batch_size //= 2
    torch.cuda.empty_cache()


def encode(ms: ModelState, images: np.ndarray | torch.Tensor) -> torch.Tensor:
    """L2-normalised float32 embeddings, in batches, halving the batch on CUDA out-of-memory.

    ``images`` are uint8, a host array or a tensor on the model's device (corrupted there).
    """
    model = ms.model
    out: list[torch.Tensor] = []
    i = 0
    while i < len(images):
        chunk = images[i : i + ms.batch_size]
        try:
            with torch.inference_mode(), autocast_for(model.device):
                t0 = time.perf_counter()
                pix = pixels(model, chunk)
                t1 = time.perf_counter()
                emb = model.encode_image(pix).float()
                t2 = time.perf_counter()
        except torch.OutOfMemoryError as e:
            halve_batch(ms, e)
            continue
        out.append(emb)
        i += len(chunk)
        if ms.timer is not None:
            ms.timer.add(ms.name, "preprocess", t1 - t0)
            ms.timer.add(ms.name, "forward", t2 - t1)
            ms.timer.add(ms.name, "images", len(chunk))
    emb = torch.cat(out) if out else torch.zeros((0, ms.classifier.shape[1]), device=model.device)
    if not torch.isfinite(emb).all():
        bad = int((~torch.isfinite(emb)).any(dim=1).sum())
        raise ModelOutputError(
            f"model {ms.name} returned NaN/inf embeddings for {bad} of {len(emb)} images; "
            "check its weights and preprocessing (and half-precision overflow on GPU: try --device cpu)"
        )
    return emb


def pixels(model: VisionLanguageModel, images: np.ndarray | torch.Tensor) -> torch.Tensor:
    """Preprocessed pixels on the model's device.

    A model that preprocesses on its device gets every batch there as uint8, host arrays as
    well as tensors, so where a batch was corrupted never changes how it is preprocessed.
    """
    if getattr(model, "device_preprocess", False):  # duck-typed models may lack the attribute
        return model.preprocess_tensor(to_device(as_tensor(images), model.device))
    return to_device(model.preprocess(as_host(images)), model.device)


def to_device(x: torch.Tensor, device: torch.device) -> torch.Tensor:
    """Copy to ``device`` without blocking the host (through pinned memory on CUDA)."""
    if device.type == "cuda" and x.device.type == "cpu":
        x = x.pin_memory()
    return x.to(device, non_blocking=True)


def as_host(images: np.ndarray | torch.Tensor) -> np.ndarray:
    """Images as a host array (one copy for a tensor on a device), for the numpy consumers."""
    return images.cpu().numpy() if isinstance(images, torch.Tensor) else images


def predict(ms: ModelState, emb: torch.Tensor) -> np.ndarray:
    return predict_with_confidence(ms, emb)[0]


def predict_with_confidence(ms: ModelState, emb: torch.Tensor, logits: bool = False) -> tuple[np.ndarray, ...]:
    """Top-1 class indices (int64) and their softmax probability over the label set (float32);
    with ``logits``, also the (N, classes) float32 logits the probabilities come from.

    The class is the argmax of the cosine similarities themselves, so scaling can never
    reorder near ties; the probability is the softmax of the logits the model scores with
    (its logit scale times the similarities).
    """
    t0 = time.perf_counter()
    with torch.inference_mode():
        sims = emb @ ms.classifier.T.to(emb.dtype)
        preds = sims.argmax(dim=1)
        scale = float(getattr(ms.model, "logit_scale", 100.0))
        z = sims.float() * scale
        conf = torch.softmax(z, dim=1).gather(1, preds[:, None])[:, 0]
        out = (preds.cpu().numpy().astype(np.int64), conf.cpu().numpy().astype(np.float32))
        if logits:
            out = (*out, z.cpu().numpy())
    if ms.timer is not None:
        ms.timer.add(ms.name, "scoring", time.perf_counter() - t0)
    return out


def confusion(labels: np.ndarray | None, preds: np.ndarray, n_classes: int) -> SparseConfusion | None:
    """The nonzero cells of the (true, predicted) confusion; None for unlabelled images."""
    if labels is None:
        return None
    if (preds == UNPARSED).any():
        # an unparsed answer is wrong whatever the label: counted off the diagonal of its true class's row
        preds = np.where(preds == UNPARSED, (labels + 1) % n_classes, preds)
    return SparseConfusion.from_pairs(labels, preds, n_classes)

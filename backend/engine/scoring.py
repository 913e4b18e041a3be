"""Scoring images with the run's models: load them, encode in batches, predict zero-shot.

Shared by the runner and the per-run tasks; it knows nothing about units or the store.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from domainbench.runtime import host_memory
from domainbench.records.confusion import SparseConfusion
from domainbench.engine.resources import PeakMemory, measured
from domainbench.errors import UserInputError
from domainbench.models import ModelBackend, VisionLanguageModel, backend_of, create_model, resolve_device
from domainbench.records.model_backends import validate_options
from domainbench.models.generative import UNPARSED, VLMOptions, VLMResult, is_generative, softmax_confidence
from domainbench.models.hub_common import as_tensor, autocast_for

if TYPE_CHECKING:
    from domainbench.engine.timings import StageTimes
    from domainbench.store import Store


class ModelOutputError(RuntimeError):
    """A model produced NaN or infinite embeddings: its numbers would be meaningless."""


class ClassMismatchError(UserInputError):
    """A plain classifier whose own classes are not the dataset's (``declared``: its classes)."""

    def __init__(self, message: str, declared: list[str]) -> None:
        super().__init__(message)
        self.declared = declared


@dataclass
class ModelState:
    """A loaded model with its zero-shot classifier and its current (OOM-adapted) batch size."""

    name: str
    model: VisionLanguageModel
    classifier: torch.Tensor
    batch_size: int
    #: the run's stage timer (``engine/timings.py``); None: not timed (FMR, Ray actors, tests)
    timer: StageTimes | None = None
    #: the run's peak-memory meter (``engine/resources.py``); None: not measured, as ``timer``
    meter: PeakMemory | None = None


def load_model(name: str, classes: list[str], device: str | torch.device, batch_size: int,
               templates: Sequence[str] | None, options: Mapping[str, Any] | None = None, *,
               cache: Store | None = None, timer: StageTimes | None = None) -> ModelState:
    """The one model loader (corruption runs, the FMR oracle and FMR's tested models): the model called
    ``name`` with its per-model ``options`` (checked against its backend's schema) under the run-wide
    settings (device, batch size, prompt templates), ready to classify ``classes``.

    What it builds follows the backend's capabilities (``domainbench.records.model_backends``): a contrastive
    model gets its zero-shot classifier (from ``cache``'s text embeddings when there); a generative one is
    configured with its options (questions, mode, ...); a plain classifier must classify over exactly
    ``classes``. ``timer`` gets the start-up stages (``engine.timings.STARTUP``)."""
    from domainbench.engine.text_cache import cached_classifier
    from domainbench.engine.timings import STARTUP, StageTimes

    timer = timer or StageTimes()
    backend = backend_of(name)
    caps = backend.capabilities
    checked = validate_options(name, options or {})
    dev = resolve_device(device)
    if dev.type not in caps.devices:  # an endpoint: nothing of it runs on the GPU asked for
        dev = resolve_device(caps.devices[0])
    with timer.stage(STARTUP, "imports"):
        _import_backend(backend)
    with timer.stage(STARTUP, "model load"):
        # a generative backend's options say how it is asked (configure, below); others' go to the factory
        model = create_model(name, dev, None if caps.kind == "generative" else options)
    with timer.stage(STARTUP, "text embeddings"):
        if caps.kind == "contrastive" and not is_generative(model):
            classifier = cached_classifier(cache, model, classes, templates).to(dev)
        else:  # it classifies itself: no text classifier (an empty one keeps shapes)
            classifier = torch.zeros((len(classes), 0), device=dev)
        if is_generative(model):
            model.configure(classes, VLMOptions.from_options(checked))
            if hasattr(model, "preflight"):  # an endpoint nobody listens at: refused before the run stores anything
                model.preflight()
        elif caps.kind == "classifier":
            declared = getattr(model, "classes", None)
            if declared is not None and list(declared) != list(classes):
                raise ClassMismatchError(f"model {name!r} classifies over {list(declared)} but the dataset's classes are "
                                         f"{list(classes)}; a plain classifier needs the same classes in the same order",
                                         list(declared))
    return ModelState(name, model, classifier, batch_size)


def load_models(names: Sequence[str], classes: list[str], device: str, batch_size: int,
                templates: Sequence[str] | None, say: Callable[[str], None] | None = None,
                options: Mapping[str, Mapping[str, Any]] | None = None, cache: Store | None = None,
                timer: StageTimes | None = None) -> list[ModelState]:
    """The models, each by :func:`load_model` with its options from ``options`` (the run config's ``model_args``)."""
    states = []
    for name in names:
        if say is not None:
            say(f"loading {name} on {resolve_device(device)}")
        states.append(load_model(name, classes, device, batch_size, templates, (options or {}).get(name),
                                 cache=cache, timer=timer))
    host_memory.release_freed()  # what loading freed is not needed again (see the function)
    return states


def _import_backend(backend: ModelBackend) -> None:
    """Import the model backend's module (open_clip, transformers: seconds) before the model is built, so a
    run's start-up says which of its seconds were imports."""
    # a backend module that imports its library on first use says how (``import_library``)
    module = sys.modules.get(getattr(backend.factory, "__module__", ""))
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
    if is_classifier(ms.model):
        logits = classifier_logits(ms, images)
        preds = logits.argmax(axis=1).astype(np.int64)
        return Scored(preds, softmax_confidence(logits).astype(np.float32), logits=logits)
    if not is_generative(ms.model):
        emb = encode(ms, images)
        preds, conf, logits = predict_with_confidence(ms, emb, logits=True)
        return Scored(preds, conf, emb, logits=logits)
    while True:
        try:
            # an endpoint's memory is the server's: nothing of it is measured here
            with measured(None if getattr(ms.model, "remote", False) else ms.meter, ms.name,
                          getattr(ms.model, "device", "cpu")):
                res = ms.model.classify(as_host(images), ms.batch_size)
        except torch.OutOfMemoryError as e:
            halve_batch(ms, e)
            continue
        emb = encode(ms, images) if embeddings and not getattr(ms.model, "remote", False) else None
        conf = None if res.scores is None else softmax_confidence(res.scores).astype(np.float32)
        return Scored(res.preds, conf, emb, res, logits=res.scores)


def is_classifier(model: object) -> bool:
    """A plain classifier (``torchvision:``, ``py:``): logits over its own classes, no embeddings."""
    return getattr(model, "kind", None) == "classifier"


def classifier_logits(ms: ModelState, images: np.ndarray | torch.Tensor) -> np.ndarray:
    """A plain classifier's float32 (N, C) logits, in batches, halving the batch on CUDA out-of-memory."""
    host = as_host(images)
    out: list[np.ndarray] = []
    i = 0
    while i < len(host):
        chunk = host[i : i + ms.batch_size]
        t0 = time.perf_counter()
        try:
            with measured(ms.meter, ms.name, getattr(ms.model, "device", "cpu")):
                chunk_logits = ms.model.logits(chunk).numpy()
        except torch.OutOfMemoryError as e:
            halve_batch(ms, e)
            continue
        if chunk_logits.shape != (len(chunk), ms.classifier.shape[0]):
            raise UserInputError(f"model {ms.name!r} returns logits of shape {chunk_logits.shape} for {len(chunk)} images; "
                                 f"expected ({len(chunk)}, {ms.classifier.shape[0]}): one logit per dataset class")
        out.append(chunk_logits)
        i += len(chunk)
        if ms.timer is not None:
            ms.timer.add(ms.name, "forward", time.perf_counter() - t0)
            ms.timer.add(ms.name, "images", len(chunk))
    logits = np.concatenate(out) if out else np.zeros((0, ms.classifier.shape[0]), dtype=np.float32)
    if not np.isfinite(logits).all():
        bad = int((~np.isfinite(logits)).any(axis=1).sum())
        raise ModelOutputError(f"model {ms.name} returned NaN/inf logits for {bad} of {len(logits)} images; "
                               "check its weights and preprocessing")
    return logits.astype(np.float32, copy=False)


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
            with torch.inference_mode(), autocast_for(model.device), measured(ms.meter, ms.name, model.device):
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

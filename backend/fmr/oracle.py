"""The oracle zoo: registry models voting zero-shot; the majority label, or a rejection on a tie."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from domainbench.engine.scoring import ModelState, classify
from domainbench.engine.text_cache import cached_classifier
from domainbench.errors import UserInputError
from domainbench.metrics.fmr import majority
from domainbench.models import create_model, resolve_device
from domainbench.models.generative import VLMOptions, is_generative

if TYPE_CHECKING:
    from domainbench.store import Store

#: prefixes of tested-model kinds that are plain classifiers: they cannot vote zero-shot
CLASSIFIER_PREFIXES = ("torchvision", "py")


@dataclass
class Oracle:
    """Zero-shot members; ``votes`` scores images with each, ``agrees`` applies the majority rule."""

    members: list[ModelState]
    n_classes: int

    @property
    def names(self) -> list[str]:
        return [m.name for m in self.members]

    def votes(self, images: np.ndarray) -> np.ndarray:
        if len(images) == 0:
            return np.zeros((0, len(self.members)), dtype=np.int64)
        return np.stack([classify(ms, images).preds for ms in self.members], axis=1)

    def agrees(self, votes: np.ndarray, labels: np.ndarray) -> np.ndarray:
        return majority(votes, self.n_classes) == np.asarray(labels, dtype=np.int64)


def check_oracle_names(names: Sequence[str], min_members: int = 2) -> None:
    """Refuse, before anything is loaded or stored, an oracle that cannot vote or cannot outvote."""
    if len(names) < min_members:
        raise UserInputError(
            f"the oracle needs at least {min_members} zero-shot models to take a majority vote, got {list(names) or 'none'}; "
            "add models with --oracle, e.g. --oracle embedded:fmnist-plain,embedded:fmnist-augmented,MODEL"
        )
    for name in names:
        if name.partition(":")[0] in CLASSIFIER_PREFIXES:
            raise UserInputError(
                f"oracle model {name!r} is a plain classifier, not zero-shot capable; the oracle takes "
                "vision-language models from the registry (see `domainbench models`)"
            )


def load_oracle(names: Sequence[str], classes: list[str], device: str, batch_size: int,
                templates: Sequence[str] | None, min_members: int = 2, *, cache: Store | None = None) -> Oracle:
    """The zoo loaded on ``device``; each member's classifier from ``cache``'s text embeddings when there."""
    check_oracle_names(names, min_members)
    dev = resolve_device(device)
    members = []
    for name in names:
        model = create_model(name, dev)
        if is_generative(model):  # it classifies itself, by the class names' log-likelihood
            model.configure(classes, VLMOptions())
            members.append(ModelState(name, model, torch.zeros((len(classes), 0)), batch_size))
            continue
        # a duck-typed registry model must still have a text tower to classify zero-shot
        if not callable(getattr(model, "encode_text", None)):
            raise UserInputError(f"oracle model {name!r} has no text encoder: it is not zero-shot capable")
        classifier = cached_classifier(cache, model, classes, templates).to(dev)
        members.append(ModelState(name, model, classifier, batch_size))
    return Oracle(members, len(classes))

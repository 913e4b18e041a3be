"""The oracle zoo: registry models voting zero-shot; the majority label, or a rejection on a tie."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from domainbench.engine.scoring import ModelState, classify, load_model
from domainbench.errors import UserInputError
from domainbench.metrics.fmr import majority
from domainbench.models import capabilities_of
from domainbench.models.generative import is_generative

if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from domainbench.store import Store


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
        if not capabilities_of(name).zero_shot:
            raise UserInputError(
                f"oracle model {name!r} is a plain classifier, not zero-shot capable; the oracle takes "
                "vision-language models from the registry (see `domainbench models`)"
            )


def load_oracle(names: Sequence[str], classes: list[str], device: str, batch_size: int,
                templates: Sequence[str] | None, min_members: int = 2, *, cache: Store | None = None,
                options: Mapping[str, Mapping[str, Any]] | None = None) -> Oracle:
    """The zoo loaded on ``device`` by the one model loader, each member with its options from ``options``
    (the run config's ``model_args``); a contrastive member's classifier from ``cache``'s text embeddings when there."""
    check_oracle_names(names, min_members)
    members = []
    for name in names:
        state = load_model(name, classes, device, batch_size, templates, (options or {}).get(name), cache=cache)
        # a duck-typed registry model must still have a text tower to classify zero-shot
        if not is_generative(state.model) and not callable(getattr(state.model, "encode_text", None)):
            raise UserInputError(f"oracle model {name!r} has no text encoder: it is not zero-shot capable")
        members.append(state)
    return Oracle(members, len(classes))

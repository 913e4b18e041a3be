"""Generative vision-language models as tested models: the options, the interface, answer parsing.

A generative VLM (LLaVA, Qwen2-VL, SmolVLM, a chat endpoint) has no text tower to build a
zero-shot classifier from, so it classifies itself: :meth:`GenerativeVLM.classify` turns a
batch of uint8 images into class indices, class scores and (in generate mode) raw answers.
The engine asks ``is_generative(model)`` and calls it instead of encode + classifier; see
docs/generative-vlms.md for the scoring contract.

Modes (``--vlm-mode``):

* ``loglik`` (default, local models): every class name is scored as the continuation of the
  prompt; the prediction is the best-scoring class.
* ``generate``: greedy decoding of at most 16 new tokens, parsed to a class by
  :func:`parse_answer`; an answer that names no class is *unparsed* (prediction ``UNPARSED``).
* ``choice`` (remote endpoints with logprobs): the classes as lettered options, each scored by
  its letter's log-probability.
"""

from __future__ import annotations

import re
import string
import unicodedata
from abc import abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

if TYPE_CHECKING:  # the interface and the parsing are plain Python: `show` reads them without torch
    import torch

from domainbench.models.base import VisionLanguageModel

DEFAULT_QUESTION = "What is shown in this image? Answer with the name of the object."
#: the prediction stored for an answer that names no class: wrong against every label, and a flip
#: against a clean answer that parsed
UNPARSED = -1
#: greedy decoding stops after this many new tokens in generate mode
MAX_NEW_TOKENS = 16
#: raw answers are stored up to this many characters
ANSWER_CHARS = 200

VLMMode = Literal["loglik", "generate", "choice"]
VLMScore = Literal["sum", "mean"]
VLMDtype = Literal["auto", "float32", "float16", "bfloat16"]


@dataclass(frozen=True)
class VLMOptions:
    """How generative models are asked: the run config's ``vlm_*`` fields, in one place."""

    questions: tuple[str, ...] = (DEFAULT_QUESTION,)
    mode: VLMMode = "loglik"
    score: VLMScore = "sum"
    dtype: VLMDtype = "auto"
    concurrency: int = 8
    max_requests: int | None = None
    api_key_env: str = "OPENAI_API_KEY"
    request_timeout: float = 60.0
    #: seconds one request may keep retrying a throttling or failing endpoint before the run stops resumably
    retry_budget: float = 1800.0

    @classmethod
    def from_options(cls, options: Any) -> VLMOptions:
        """A generative backend's per-model options (``domainbench.records.model_backends``) as the model reads them;
        a key its schema lacks keeps its default here."""
        given = {f: getattr(options, f) for f in cls.__dataclass_fields__ if getattr(options, f, None) is not None}
        given["questions"] = tuple(given.get("questions") or (DEFAULT_QUESTION,))
        return cls(**given)


@dataclass
class VLMResult:
    """What a generative model says about a batch of N images over C classes."""

    preds: np.ndarray  # (N,) int64 class indices, UNPARSED where an answer named no class
    #: (N, C) float64 class scores (log-likelihoods, mean over questions) or None (generate mode)
    scores: np.ndarray | None = None
    #: raw answers, first ANSWER_CHARS characters (generate mode; the first question's)
    answers: list[str] | None = None
    #: (Q, N) predictions per question, for the prompt-sensitivity spread (None with one question)
    per_question: np.ndarray | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def unparsed(self) -> int:
        return int((self.preds == UNPARSED).sum())


class GenerativeVLM(VisionLanguageModel):
    """A model that answers questions about images instead of embedding texts."""

    generative = True
    #: a remote endpoint: no image embeddings, so stability and the PD threat do not apply
    remote = False
    #: "generative" in listings and the UI, beside "contrastive" for dual encoders
    kind = "generative"

    def configure(self, classes: Sequence[str], options: VLMOptions) -> None:
        """Fix the class names and the way of asking before any image is classified."""
        if not classes:
            raise ValueError("no class names given: a generative classifier needs at least one class")
        self.classes = list(classes)
        self.options = options

    @abstractmethod
    def classify(self, images: np.ndarray | torch.Tensor, batch_size: int) -> VLMResult:
        """uint8 images (N, H, W[, C]) -> predictions over the configured classes."""

    def encode_text(self, texts: Sequence[str]) -> torch.Tensor:
        raise TypeError(f"{self.name} is a generative model: it has no text tower; use classify()")


def is_generative(model: object) -> bool:
    return bool(getattr(model, "generative", False))


def model_kind(model: object) -> str:
    return "generative" if is_generative(model) else "contrastive"


_PUNCT = str.maketrans({c: " " for c in string.punctuation})


def normalise(text: str) -> str:
    """Lower case, accents folded, punctuation as spaces, runs of whitespace as one space."""
    text = unicodedata.normalize("NFKD", text)
    text = "".join(ch for ch in text if not unicodedata.combining(ch))
    return " ".join(text.lower().translate(_PUNCT).split())


def parse_answer(answer: str, classes: Sequence[str]) -> int:
    """The class an answer names, or UNPARSED.

    1. exact match after normalisation (case, punctuation, whitespace);
    2. else the class whose normalised name appears in the answer as whole words; when several
       do, the longest name wins ("ankle boot" over "boot"), then the earliest mention;
    3. else UNPARSED.
    """
    norm = normalise(answer)
    names = [normalise(c) for c in classes]
    for i, n in enumerate(names):
        if n and norm == n:
            return i
    best: tuple[int, int, int] | None = None  # (-len(name), position, index)
    for i, n in enumerate(names):
        if not n:
            continue
        m = re.search(rf"(?<!\S){re.escape(n)}(?!\S)", norm)
        if m is not None:
            key = (-len(n), m.start(), i)
            best = key if best is None or key < best else best
    return UNPARSED if best is None else best[2]


def softmax_confidence(scores: np.ndarray) -> np.ndarray:
    """Softmax of each row of class scores, taken at its best class (the export's confidence)."""
    s = np.asarray(scores, dtype=np.float64)
    z = s - s.max(axis=1, keepdims=True)
    p = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    return p[np.arange(len(p)), s.argmax(axis=1)]


__all__ = [
    "ANSWER_CHARS",
    "DEFAULT_QUESTION",
    "GenerativeVLM",
    "MAX_NEW_TOKENS",
    "UNPARSED",
    "VLMOptions",
    "VLMResult",
    "is_generative",
    "model_kind",
    "normalise",
    "parse_answer",
    "softmax_confidence",
]

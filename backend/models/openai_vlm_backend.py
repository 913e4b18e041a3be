"""``openai-vlm:MODEL@URL`` - a generative VLM behind an OpenAI-compatible chat-completions endpoint.

Ollama (``openai-vlm:llava:7b@http://localhost:11434/v1``), vLLM, LM Studio and llama.cpp's
server all speak it. Each image goes as a base64 PNG ``image_url`` data URL beside the question.

* ``--vlm-mode generate`` (also what ``loglik``, the default, means for an endpoint: a chat API
  cannot score arbitrary continuations): greedy (temperature 0) answers of at most 16 tokens,
  parsed to a class as for local models.
* ``--vlm-mode choice``: the classes as lettered options (A, B, ...; at most 20, the most top
  log-probabilities an OpenAI-compatible server returns), one token asked with ``logprobs``; each
  class is scored by its letter's log-probability. A server that returns no logprobs is refused.

Transport: the ``openai`` client retries timeouts, connection errors, 429 and 5xx with
exponential back-off (honouring Retry-After), each attempt bounded by ``--request-timeout``;
``--concurrency`` requests are in flight at once. ``--max-requests`` counts requests actually
sent; when reached the run stops with a one-line error and ``domainbench run --resume RUN``
continues it. Every answer is cached on disk per (model, endpoint, image hash, prompt), so a
resumed run sends nothing twice. The API key is read from ``OPENAI_API_KEY`` (or the variable
``--api-key-env`` names) when the request is made; it is never stored, logged or shown.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import sqlite3
import string
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import torch

from domainbench.errors import UserInputError
from domainbench.models import register_model
from domainbench.models.generative import (
    ANSWER_CHARS,
    MAX_NEW_TOKENS,
    UNPARSED,
    GenerativeVLM,
    VLMOptions,
    VLMResult,
    parse_answer,
)
from domainbench.models.hub_common import as_uint8_nchw

#: examples for `domainbench models 'openai-vlm:*'`: any MODEL@URL works
KNOWN_MODELS = ["llava:7b@http://localhost:11434/v1", "Qwen/Qwen2-VL-7B-Instruct@http://localhost:8000/v1"]
#: OpenAI-compatible servers return at most this many top log-probabilities per token
MAX_CHOICES = 20
LETTERS = string.ascii_uppercase[:MAX_CHOICES]
#: attempts after the first on 429 / 5xx / timeouts / connection errors (the client backs off exponentially)
MAX_RETRIES = 4


class EndpointError(UserInputError):
    """The endpoint failed after its retries, or answered something unusable: the message says what to do."""


class RequestBudgetExhausted(UserInputError):
    """--max-requests was reached: the run stops here and resumes later without resending anything."""


def parse_spec(spec: str) -> tuple[str, str]:
    model, sep, url = spec.rpartition("@")
    if not sep or not model or not url.startswith(("http://", "https://")):
        raise UserInputError(
            f"openai-vlm:{spec}: give MODEL@URL with the server's OpenAI-compatible base URL, e.g. "
            "openai-vlm:llava:7b@http://localhost:11434/v1 (Ollama) or openai-vlm:MODEL@http://localhost:8000/v1 (vLLM)"
        )
    return model, url.rstrip("/")


def png_data_url(image: np.ndarray) -> tuple[str, str]:
    """(data URL, sha256 of the PNG) of one (H, W, 3) uint8 image."""
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(image).save(buf, format="PNG")
    data = buf.getvalue()
    return "data:image/png;base64," + base64.b64encode(data).decode(), hashlib.sha256(data).hexdigest()


def choice_prompt(question: str, classes: Sequence[str]) -> str:
    options = "\n".join(f"{LETTERS[i]}. {c}" for i, c in enumerate(classes))
    return f"{question}\n{options}\nAnswer with the letter of the correct option only."


def letter_scores(top: list[dict[str, Any]], n_classes: int) -> np.ndarray:
    """Per class, the best log-probability of a token that reads as its letter ("B", " B", "B."); -inf if absent."""
    scores = np.full(n_classes, -np.inf)
    for entry in top:
        token = str(entry.get("token", "")).strip().strip(".):").upper()
        if len(token) == 1 and token in LETTERS[:n_classes]:
            k = LETTERS.index(token)
            scores[k] = max(scores[k], float(entry["logprob"]))
    return scores


class AnswerCache:
    """Answers on disk, keyed by (model, endpoint, image hash, request): a resumed run sends nothing twice."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        self._lock = threading.Lock()

    @staticmethod
    def key(*parts: str) -> str:
        return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()

    def get(self, key: str) -> Any:
        with self._lock:
            row = self._db.execute("SELECT value FROM answers WHERE key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])

    def put(self, key: str, value: Any) -> None:
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO answers VALUES (?, ?)", (key, json.dumps(value)))


def default_cache_path() -> Path:
    from domainbench.settings import Settings

    return Settings.from_env().home / "vlm-answers.sqlite"


class OpenAIVLM(GenerativeVLM):
    remote = True

    def __init__(self, spec: str, device: torch.device, cache: AnswerCache | None = None) -> None:
        self.model_id, self.base_url = parse_spec(spec)
        self.name = f"openai-vlm:{spec}"
        self.device = torch.device("cpu")  # nothing runs locally but the PNG encoding
        self._cache = cache
        self._lock = threading.Lock()
        self.requests_sent = 0
        self.configure(["?"], VLMOptions())

    def __repr__(self) -> str:
        return f"OpenAIVLM({self.name!r})"

    def configure(self, classes: Sequence[str], options: VLMOptions) -> None:
        super().configure(classes, options)
        if options.mode == "choice" and len(self.classes) > MAX_CHOICES:
            raise UserInputError(
                f"{self.name}: --vlm-mode choice offers the classes as letters A-{LETTERS[-1]}, at most {MAX_CHOICES} "
                f"(the top log-probabilities a server returns); this run has {len(self.classes)}: use --vlm-mode generate"
            )
        self.mode = "choice" if options.mode == "choice" else "generate"
        self._client: Any = None

    # -- what a remote model cannot do ----------------------------------------------------------
    def preprocess(self, images: np.ndarray) -> torch.Tensor:
        return as_uint8_nchw(images, self.name)

    def encode_image(self, pixels: torch.Tensor) -> torch.Tensor:
        raise TypeError(f"{self.name} is a remote model: it has no image embeddings (stability and PD threat are n/a)")

    # -- transport ----------------------------------------------------------------------------------
    def client(self) -> Any:
        if self._client is None:
            import openai

            key = os.environ.get(self.options.api_key_env) or "none"  # local servers take any key
            self._client = openai.OpenAI(api_key=key, base_url=self.base_url, timeout=self.options.request_timeout,
                                         max_retries=MAX_RETRIES)
        return self._client

    def cache(self) -> AnswerCache:
        if self._cache is None:
            self._cache = AnswerCache(default_cache_path())
        return self._cache

    def _spend(self) -> None:
        with self._lock:
            limit = self.options.max_requests
            if limit is not None and self.requests_sent >= limit:
                raise RequestBudgetExhausted(
                    f"{self.name}: stopped after {self.requests_sent} requests (--max-requests {limit}); the answers so far "
                    "are cached: continue with `domainbench run --resume RUN_ID` (add --max-requests to raise the guard)"
                )
            self.requests_sent += 1

    def _request(self, body: dict[str, Any]) -> dict[str, Any]:
        import openai

        from domainbench.settings import redact_key as redact

        self._spend()
        where = f"{self.name}"
        secret = os.environ.get(self.options.api_key_env)
        try:
            resp = self.client().chat.completions.create(**body)
        except openai.APITimeoutError as e:
            raise EndpointError(f"{where} did not answer within {self.options.request_timeout:g} s after "
                                f"{MAX_RETRIES + 1} attempts; raise --request-timeout or check the server") from e
        except openai.AuthenticationError as e:
            raise EndpointError(f"{where} refused the API key (HTTP 401); set {self.options.api_key_env} "
                                "(or name another variable with --api-key-env)") from e
        except openai.APIStatusError as e:
            raise EndpointError(redact(f"{where} answered HTTP {e.status_code} after {MAX_RETRIES + 1} attempts "
                                       f"({str(e)[:200]}); lower --concurrency or retry later", secret)) from e
        except openai.APIConnectionError as e:
            raise EndpointError(f"{where}: cannot connect to {self.base_url} after {MAX_RETRIES + 1} attempts; "
                                "is the server running?") from e
        except (openai.APIError, ValueError) as e:  # a body that is not JSON, or not a chat completion
            raise EndpointError(redact(f"{where} returned a malformed response ({str(e)[:200]}); check that "
                                       "the URL is the server's OpenAI-compatible /v1 base", secret)) from e
        try:
            doc = resp.model_dump() if hasattr(resp, "model_dump") else dict(resp)
            choice = doc["choices"][0]
            _ = choice["message"]
        except (KeyError, IndexError, TypeError) as e:
            raise EndpointError(f"{where} returned a malformed response (no choices[0].message); check that "
                                "the URL is the server's OpenAI-compatible /v1 base") from e
        return choice

    def _ask(self, url: str, digest: str, question: str) -> Any:
        """One (image, question): the answer text (generate) or the letters' log-probabilities (choice)."""
        text = question if self.mode == "generate" else choice_prompt(question, self.classes)
        key = AnswerCache.key(self.model_id, self.base_url, self.mode, digest, text)
        cached = self.cache().get(key)
        if cached is not None:
            return cached
        body: dict[str, Any] = {
            "model": self.model_id,
            "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}},
                                                      {"type": "text", "text": text}]}],
            "temperature": 0,
            "max_tokens": MAX_NEW_TOKENS if self.mode == "generate" else 1,
        }
        if self.mode == "choice":
            body |= {"logprobs": True, "top_logprobs": MAX_CHOICES}
        choice = self._request(body)
        if self.mode == "generate":
            value: Any = str(choice["message"].get("content") or "").strip()
        else:
            content = (choice.get("logprobs") or {}).get("content") or []
            if not content or not content[0].get("top_logprobs"):
                raise EndpointError(
                    f"{self.name}: the server returned no logprobs, which --vlm-mode choice needs; use "
                    "--vlm-mode generate with this server (or a server that supports logprobs, e.g. vLLM)"
                )
            value = [{"token": t["token"], "logprob": t["logprob"]} for t in content[0]["top_logprobs"]]
        self.cache().put(key, value)
        return value

    # -- classification -------------------------------------------------------------------------------
    def classify(self, images: np.ndarray | torch.Tensor, batch_size: int) -> VLMResult:
        ims = [np.ascontiguousarray(im) for im in as_uint8_nchw(images, self.name).permute(0, 2, 3, 1).cpu().numpy()]
        questions = self.options.questions
        encoded = [png_data_url(im) for im in ims]
        # equal images (in one batch) are asked once, like images already in the cache
        unique = {(digest, q): (url, digest, questions[q]) for q in range(len(questions)) for url, digest in encoded}
        with ThreadPoolExecutor(max_workers=self.options.concurrency, thread_name_prefix="openai-vlm") as pool:
            got = dict(zip(unique, pool.map(lambda job: self._ask(*job), unique.values())))
        per_q = [[got[(digest, q)] for _, digest in encoded] for q in range(len(questions))]
        if self.mode == "generate":
            preds = np.array([[parse_answer(a, self.classes) for a in qa] for qa in per_q], dtype=np.int64)
            return VLMResult(preds[0], answers=[a[:ANSWER_CHARS] for a in per_q[0]],
                             per_question=preds if len(per_q) > 1 else None)
        scores = np.stack([[letter_scores(a, len(self.classes)) for a in qa] for qa in per_q])  # (Q, N, C)
        # a letter absent from a question's top log-probabilities scores -inf there, and so in the ensemble mean
        mean = scores.mean(axis=0)
        named = np.isfinite(mean).any(axis=1)
        preds = np.where(named, mean.argmax(axis=1), UNPARSED).astype(np.int64)
        preds_q = np.where(np.isfinite(scores).any(axis=2), scores.argmax(axis=2), UNPARSED).astype(np.int64)
        # an answer that named no option has no class scores: uniform, so its softmax stays defined
        mean[~named] = 0.0
        return VLMResult(preds, scores=mean, per_question=preds_q if len(per_q) > 1 else None)


@register_model("openai-vlm", known=KNOWN_MODELS)
def create_openai_vlm(spec: str, device: torch.device) -> GenerativeVLM:
    return OpenAIVLM(spec, device)


__all__ = ["AnswerCache", "EndpointError", "KNOWN_MODELS", "OpenAIVLM", "RequestBudgetExhausted", "choice_prompt",
           "letter_scores", "parse_spec", "png_data_url"]

"""``openai-vlm:MODEL@URL`` - a generative VLM behind an OpenAI-compatible chat-completions endpoint.

Ollama (``openai-vlm:llava:7b@http://localhost:11434/v1``), vLLM, LM Studio and llama.cpp's
server all speak it. Each image goes as a base64 PNG ``image_url`` data URL beside the question.

* ``--vlm-mode generate`` (also what ``loglik``, the default, means for an endpoint: a chat API
  cannot score arbitrary continuations): greedy (temperature 0) answers of at most 16 tokens,
  parsed to a class as for local models.
* ``--vlm-mode choice``: the classes as lettered options (A, B, ...; at most 20, the most top
  log-probabilities an OpenAI-compatible server returns), one token asked with ``logprobs``; each
  class is scored by its letter's log-probability. A server that returns no logprobs is refused.

Transport (``domainbench.models.endpoint_transport``): timeouts, connection errors, 429 and 5xx
are retried with exponential back-off and jitter (a ``Retry-After`` is honoured) for as long as
``--retry-budget`` allows one request; each attempt ends within ``--request-timeout`` in total, and
an answer over 1 MiB is refused. At most ``--concurrency`` requests are in flight: fewer while the
server throttles (halved on 429/503, grown back one at a time). ``--max-requests`` counts requests
actually sent. A run that cannot go on (budget spent, guard reached) stops with one line naming the
endpoint and the last status, and ``domainbench run --resume RUN`` continues it. Every answer is cached on disk per (model, endpoint, image hash, prompt), so a
resumed run sends nothing twice. The API key is read from ``OPENAI_API_KEY`` (or the variable
``--api-key-env`` names) when the request is made; it is never stored, logged or shown.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import re
import sqlite3
import socket
import string
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import numpy as np
import torch

from domainbench.errors import RESUME_COMMAND, UserInputError
from domainbench.models import endpoint_transport as transport
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
#: a generate-mode answer is cached (and parsed) up to this many characters: 16 tokens are far fewer,
#: and a server that ignores max_tokens cannot fill the cache
CACHED_ANSWER_CHARS = 2000
#: seconds the pre-flight connection may take: an endpoint that cannot be reached fails before anything is stored
CONNECT_CHECK_S = 10.0


class EndpointError(UserInputError):
    """The endpoint failed after its retries, or answered something unusable: the message says what to do."""


class RequestBudgetExhausted(UserInputError):
    """--max-requests was reached: the run stops here and resumes later without resending anything."""


class EndpointStalled(EndpointError):
    """--retry-budget ran out while the endpoint kept throttling or failing: the run stops resumably."""


RESUME_HINT = f"the answers so far are cached: {RESUME_COMMAND}"


def _split(spec: str) -> tuple[str, str, str]:
    """(model, "@", url): the URL starts at the first "@http(s)://" (a model name may hold ":" and "@")."""
    at = min((i for i in (spec.find("@http://"), spec.find("@https://")) if i >= 0), default=-1)
    if at < 0:
        model, sep, url = spec.rpartition("@")
        return model, sep, url
    return spec[:at], "@", spec[at + 1:]


def parse_spec(spec: str) -> tuple[str, str]:
    model, sep, url = _split(spec)
    example = ("e.g. openai-vlm:llava:7b@http://localhost:11434/v1 (Ollama) or "
               "openai-vlm:MODEL@http://localhost:8000/v1 (vLLM)")
    if not sep or not model or not url.startswith(("http://", "https://")):
        raise UserInputError(f"openai-vlm:{_shown(spec)}: give MODEL@URL with the server's OpenAI-compatible base URL, "
                             + example)
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as e:  # http://[::1/v1, http://host:99999
        raise UserInputError(f"openai-vlm:{_shown(spec)}: the URL is not valid ({e}); {example}") from None
    if not parts.hostname:
        raise UserInputError(f"openai-vlm:{_shown(spec)}: the URL names no host; {example}")
    if port == 0:
        raise UserInputError(f"openai-vlm:{_shown(spec)}: port 0 is not a server's port; {example}")
    if parts.username is not None or parts.password is not None:
        # the model name is stored with every unit: a credential in it would be stored too
        raise UserInputError(f"openai-vlm:{_shown(spec)}: the URL holds a user name or password; put the key in "
                             "OPENAI_API_KEY (or the variable --api-key-env names) and leave it out of the URL")
    return model, url.rstrip("/")


def _shown(spec: str) -> str:
    """A spec as it may be printed: the user:password part of its URL hidden."""
    model, sep, url = _split(spec)
    scheme, slashes, rest = url.partition("://")
    host_part, slash, path = rest.partition("/")
    if "@" in host_part:
        host_part = "***@" + host_part.rpartition("@")[2]
    return f"{model}{sep}{scheme}{slashes}{host_part}{slash}{path}"


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


_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=\-*]+")


def scrub_secrets(text: str, secret: str | None) -> str:
    """``text`` with the key (whole or its visible ends), key-like strings and bearer tokens replaced."""
    from domainbench.runtime.settings import redact_key as redact

    return _BEARER.sub(lambda m: f"{m.group(1)} <redacted>", redact(text, secret))


#: held while a model opens its answer cache
_CACHE_OPEN = threading.Lock()


class AnswerCache:
    """Answers on disk, keyed by (model, endpoint, image hash, request): a resumed run sends nothing twice."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        # another process (a second run, a worker) may hold the file: wait for it as the store does
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None, timeout=30.0)
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
    from domainbench.runtime.settings import Settings

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
        #: the tokens the endpoint's answers reported in ``usage`` (``engine.resources``: stored per run)
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self._limit: transport.AdaptiveLimit | None = None  # shared by every batch: the endpoint's state
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

    # -- what a remote model cannot do ----------------------------------------------------------
    def preprocess(self, images: np.ndarray) -> torch.Tensor:
        return as_uint8_nchw(images, self.name)

    def encode_image(self, pixels: torch.Tensor) -> torch.Tensor:
        raise TypeError(f"{self.name} is a remote model: it has no image embeddings (stability and PD threat are n/a)")

    # -- transport ----------------------------------------------------------------------------------
    def limiter(self) -> transport.AdaptiveLimit:
        lim = self._limit
        if lim is None or lim.ceiling != self.options.concurrency:
            lim = self._limit = transport.AdaptiveLimit(self.options.concurrency, self.base_url)
        return lim

    def preflight(self) -> None:
        """Refuse an endpoint nobody listens at before the run stores anything (a refused or unknown host)."""
        parts = urlsplit(self.base_url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:
            socket.create_connection((parts.hostname or "", port),
                                     timeout=min(CONNECT_CHECK_S, self.options.request_timeout)).close()
        except OSError as e:
            why = "connection refused" if isinstance(e, ConnectionRefusedError) else (
                "no answer" if isinstance(e, (TimeoutError, socket.timeout)) else str(e) or type(e).__name__)
            raise EndpointError(f"{self.name}: cannot connect to {self.base_url} ({why}); start the server or "
                                "fix the URL (nothing was stored)") from None

    def cache(self) -> AnswerCache:
        # the request pool's threads all ask on the first images: one opens the file, the others wait for it (two
        # connections switching a new file to WAL at once fail with "database is locked")
        with _CACHE_OPEN:
            if self._cache is None:
                self._cache = AnswerCache(default_cache_path())
        return self._cache

    def _spend(self) -> None:
        with self._lock:
            limit = self.options.max_requests
            if limit is not None and self.requests_sent >= limit:
                raise RequestBudgetExhausted(
                    f"{self.name}: stopped after {self.requests_sent} requests (--max-requests {limit}); {RESUME_HINT} "
                    "(add --max-requests to raise the guard)"
                )
            self.requests_sent += 1

    @property
    def requests(self) -> int:
        """Requests sent (every attempt, retries included), as ``--max-requests`` counts them."""
        return self.requests_sent

    def _count_usage(self, doc: Any) -> None:
        """Add an answer's ``usage`` (OpenAI's prompt_tokens / completion_tokens); a server that reports none adds
        nothing, and a malformed count is ignored rather than failing the answer."""
        usage = doc.get("usage") if isinstance(doc, dict) else None
        if not isinstance(usage, dict):
            return
        counts = [usage.get(k) for k in ("prompt_tokens", "completion_tokens")]
        counts = [n if isinstance(n, int) and not isinstance(n, bool) and n >= 0 else 0 for n in counts]
        with self._lock:
            self.prompt_tokens += counts[0]
            self.completion_tokens += counts[1]

    def _headers(self) -> dict[str, str]:
        key = os.environ.get(self.options.api_key_env) or "none"  # local servers take any key
        return {"authorization": f"Bearer {key}", "accept": "application/json"}

    def _request(self, body: dict[str, Any]) -> dict[str, Any]:
        """One chat completion's first choice, retried while the endpoint throttles or fails briefly.

        Retries go on until ``--retry-budget`` seconds have passed since the first attempt; the
        wait before each is the server's ``Retry-After`` or a jittered exponential back-off."""
        from domainbench.runtime.settings import redact_key as redact

        secret = os.environ.get(self.options.api_key_env)
        url = f"{self.base_url}/chat/completions"
        budget = self.options.retry_budget
        limit = self.limiter()
        t0 = time.monotonic()
        attempt = 0
        while True:
            self._spend()
            epoch = limit.acquire()
            reply: transport.Reply | None = None
            try:
                reply = transport.post_json(url, body, self._headers(), self.options.request_timeout)
                last = f"HTTP {reply.status}"
            except transport.AnswerTooLarge:
                limit.release(epoch, ok=False, throttled=False)
                raise EndpointError(f"{self.name} answered more than {transport.MAX_ANSWER_BYTES >> 20} MiB to one "
                                    f"request; check that {self.base_url} is an OpenAI-compatible /v1 base that "
                                    f"honours max_tokens; {RESUME_HINT}") from None
            except TimeoutError:
                last = f"no whole answer within {self.options.request_timeout:g} s (--request-timeout)"
            except OSError as e:
                last = f"connection failed ({type(e).__name__})"
            status = reply.status if reply is not None else None
            throttled = status in transport.THROTTLING
            limit.release(epoch, ok=status == 200, throttled=throttled)
            if reply is not None and status == 200:
                return self._choice(reply, secret)
            if reply is not None and status not in transport.RETRYABLE:
                self._refuse(reply, secret)
            wait = transport.retry_after(reply.headers) if reply is not None else None
            if wait is None:
                wait = transport.backoff_delay(attempt)
            spent = time.monotonic() - t0
            if spent + wait > budget:
                raise EndpointStalled(redact(
                    f"{self.name}: {self.base_url} still answered {last} after {attempt + 1} attempts in {spent:.0f} s "
                    f"(--retry-budget {budget:g} s); {RESUME_HINT} once it answers (or raise --retry-budget)", secret))
            time.sleep(wait)
            attempt += 1

    def _refuse(self, reply: transport.Reply, secret: str | None) -> None:
        """An answer that retrying cannot change (400, 401, 403, 404, 422, ...): one line saying what to do."""
        from domainbench.runtime.settings import redact_key as redact

        status = reply.status
        if status == 401:
            raise EndpointError(f"{self.name} refused the API key (HTTP 401); set {self.options.api_key_env} "
                                f"(or name another variable with --api-key-env); {RESUME_HINT}")
        if status == 403:
            raise EndpointError(f"{self.name}: the API key may not use this model (HTTP 403); check the key in "
                                f"{self.options.api_key_env} and the model name; {RESUME_HINT}")
        if status == 404:
            raise EndpointError(f"{self.name}: {self.base_url}/chat/completions was not found (HTTP 404); give the "
                                f"server's OpenAI-compatible /v1 base URL and a model it serves; {RESUME_HINT}")
        detail = reply.body[:200].decode("utf-8", "replace").replace("\n", " ")
        raise EndpointError(redact(f"{self.name} refused the request with HTTP {status} ({detail}); it is not retried: "
                                   f"check the model name, --vlm-mode and the server's limits; {RESUME_HINT}",
                                   secret))

    def _choice(self, reply: transport.Reply, secret: str | None) -> dict[str, Any]:
        """choices[0] of a 200 answer, checked to be a chat completion (a dict with a dict message)."""
        from domainbench.runtime.settings import redact_key as redact

        try:
            doc = reply.json()
        except (ValueError, UnicodeDecodeError):
            snippet = reply.body[:80].decode("utf-8", "replace")
            raise EndpointError(redact(f"{self.name} returned a malformed response (not JSON: {snippet!r}); check that "
                                       f"the URL is the server's OpenAI-compatible /v1 base; {RESUME_HINT}",
                                       secret)) from None
        self._count_usage(doc)
        try:
            choice = doc["choices"][0]
            if not isinstance(choice, dict) or not isinstance(choice["message"], dict):
                raise TypeError("message is not an object")
        except (KeyError, IndexError, TypeError):
            raise EndpointError(f"{self.name} returned a malformed response (no choices[0].message object); check "
                                f"that the URL is the server's OpenAI-compatible /v1 base; {RESUME_HINT}") from None
        return choice

    def _ask(self, url: str, digest: str, question: str) -> Any:
        """One (image, question): the answer text (generate) or the letters' log-probabilities (choice)."""
        text = question if self.mode == "generate" else choice_prompt(question, self.classes)
        key = AnswerCache.key(self.model_id, self.base_url, self.mode, digest, text)
        cached = self.cache().get(key)
        if cached is not None:
            return self._scrub(cached)  # a cache written before answers were scrubbed
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
            value: Any = str(choice["message"].get("content") or "").strip()[:CACHED_ANSWER_CHARS]
        else:
            value = self._top_logprobs(choice)
        value = self._scrub(value)
        self.cache().put(key, value)
        return value

    def _scrub(self, value: Any) -> Any:
        """``value`` (an answer, or choice-mode tokens) without the API key or any bearer token: a server that echoes
        the request's Authorization header would otherwise have it stored in the answer cache and the run's units."""
        secret = os.environ.get(self.options.api_key_env)
        if isinstance(value, str):
            return scrub_secrets(value, secret)
        if isinstance(value, list):
            return [{**t, "token": scrub_secrets(str(t.get("token", "")), secret)} if isinstance(t, dict) else t
                    for t in value]
        return value

    def _top_logprobs(self, choice: dict[str, Any]) -> list[dict[str, Any]]:
        """The first token's top log-probabilities as [{token, logprob}], each logprob a number."""
        logprobs = choice.get("logprobs")
        content = (logprobs.get("content") if isinstance(logprobs, dict) else None) or []
        first = content[0] if isinstance(content, list) and content else None
        top = first.get("top_logprobs") if isinstance(first, dict) else None
        if not top:
            raise EndpointError(
                f"{self.name}: the server returned no logprobs, which --vlm-mode choice needs; use "
                "--vlm-mode generate with this server (or a server that supports logprobs, e.g. vLLM)"
            )
        value = []
        for t in top if isinstance(top, list) else []:
            lp = t.get("logprob") if isinstance(t, dict) else None
            if isinstance(lp, bool) or not isinstance(lp, (int, float)) or lp != lp or lp > 1e-3:
                raise EndpointError(f"{self.name} returned a malformed response (a top_logprobs entry whose logprob "
                                    f"is {lp!r}, not a log-probability); check the server; {RESUME_HINT}")
            value.append({"token": str(t.get("token", ""))[:16], "logprob": float(lp)})
        if not value:
            raise EndpointError(f"{self.name} returned a malformed response (top_logprobs is not a list); check the "
                                f"server; {RESUME_HINT}")
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


def create_openai_vlm(spec: str, device: torch.device) -> GenerativeVLM:
    return OpenAIVLM(spec, device)


__all__ = ["AnswerCache", "EndpointError", "KNOWN_MODELS", "OpenAIVLM", "RequestBudgetExhausted", "choice_prompt",
           "letter_scores", "parse_spec", "png_data_url"]

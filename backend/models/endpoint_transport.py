"""How ``openai-vlm:`` requests travel: one POST bounded in total time and size, and the limiter that
rides out a throttling endpoint.

Kept free of heavy imports: the CLI's progress bar reads :func:`concurrency_note` on every update.

* :func:`post_json` sends one request and reads the whole answer within ``timeout`` seconds *in total*
  (a watchdog closes the socket at the deadline, so a server trickling bytes cannot hold it longer)
  and refuses an answer larger than :data:`MAX_ANSWER_BYTES` as it streams in.
* :class:`AdaptiveLimit` caps the requests in flight: it halves on 429/503 (once per congestion
  window: the answers to requests sent before the cut do not cut again), grows by about one request
  per window of successes, and never exceeds ``--concurrency``.
* :func:`backoff_delay`: exponential with full jitter; :func:`retry_after` reads ``Retry-After``
  (seconds or an HTTP date) and ``retry-after-ms``.
"""

from __future__ import annotations

import email.utils
import http.client
import json
import random
import socket
import ssl
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

#: an answer of 16 tokens, or 20 top log-probabilities of one token, is a few kB; anything near this is
#: not a chat completion of this request, and would fill the answer cache and the memory
MAX_ANSWER_BYTES = 1 << 20
#: the first back-off (seconds) and its cap; DOMAINBENCH_RETRY_BACKOFF scales both (tests and the
#: fault benchmark set it small so that throttling scenarios run in seconds)
BACKOFF_BASE = 0.5
BACKOFF_CAP_FACTOR = 60.0
#: statuses worth retrying: throttling, a server briefly down, a gateway timeout
RETRYABLE = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 520, 521, 522, 523, 524, 529})
#: statuses that say the server is overloaded: the limiter halves on them
THROTTLING = frozenset({429, 503, 529})


class AnswerTooLarge(Exception):
    """The body grew past MAX_ANSWER_BYTES."""


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def backoff_base() -> float:
    from domainbench.runtime.settings import retry_backoff_base

    return retry_backoff_base(BACKOFF_BASE)


def backoff_delay(attempt: int, rng: random.Random | None = None) -> float:
    """Seconds before retry number ``attempt`` (0-based): uniform in [0, base * 2**attempt], capped."""
    base = backoff_base()
    ceiling = min(base * BACKOFF_CAP_FACTOR, base * 2.0 ** min(attempt, 30))
    return (rng or random).uniform(0.0, ceiling)


def retry_after(headers: dict[str, str], now: float | None = None) -> float | None:
    """The wait a server asked for, in seconds (never negative), or None when it asked for none."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            value = float(ms) / 1000.0
            if value == value and value >= 0 and value != float("inf"):
                return value
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if not raw:
        return None
    try:
        value = float(raw)
        return value if value == value and 0 <= value < float("inf") else None
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw).timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    return max(0.0, when - (time.time() if now is None else now))


def post_json(url: str, payload: dict[str, Any], headers: dict[str, str], timeout: float,
              max_bytes: int = MAX_ANSWER_BYTES) -> Reply:
    """POST ``payload`` as JSON; the whole exchange ends within ``timeout`` seconds or raises TimeoutError.

    Connection failures raise OSError; a body over ``max_bytes`` raises AnswerTooLarge.
    """
    parts = urlsplit(url)
    deadline = time.monotonic() + timeout
    host = parts.hostname or ""
    if parts.scheme == "https":
        conn: http.client.HTTPConnection = http.client.HTTPSConnection(
            host, parts.port, timeout=timeout, context=ssl.create_default_context())
    else:
        conn = http.client.HTTPConnection(host, parts.port, timeout=timeout)
    expired = threading.Event()

    def cut() -> None:
        # a socket timeout bounds each read, not their sum: a server sending one byte per second would
        # never trip it, so the deadline shuts the socket down whatever is in progress
        expired.set()
        sock = conn.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    watchdog = threading.Timer(timeout, cut)
    watchdog.daemon = True
    watchdog.start()
    try:
        body = json.dumps(payload).encode()
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        conn.request("POST", path, body=body, headers={**headers, "content-type": "application/json",
                                                       "content-length": str(len(body))})
        resp = conn.getresponse()
        declared = resp.getheader("content-length")
        if declared is not None and declared.isdigit() and int(declared) > max_bytes:
            raise AnswerTooLarge(int(declared))
        chunks: list[bytes] = []
        size = 0
        while True:
            chunk = resp.read1(65536) if hasattr(resp, "read1") else resp.read(65536)
            if not chunk:
                break
            size += len(chunk)
            if size > max_bytes:
                raise AnswerTooLarge(size)
            chunks.append(chunk)
            if time.monotonic() > deadline:
                raise TimeoutError(f"no whole answer within {timeout:g} s")
        if expired.is_set():
            raise TimeoutError(f"no whole answer within {timeout:g} s")
        return Reply(resp.status, {k.lower(): v for k, v in resp.getheaders()}, b"".join(chunks))
    except (OSError, http.client.HTTPException) as e:
        if expired.is_set() or isinstance(e, (TimeoutError, socket.timeout)):
            raise TimeoutError(f"no whole answer within {timeout:g} s") from e
        if isinstance(e, OSError):
            raise
        raise ConnectionError(f"broken HTTP answer ({type(e).__name__}: {e})") from e
    finally:
        watchdog.cancel()
        conn.close()


class AdaptiveLimit:
    """Requests in flight to one endpoint: additive increase, multiplicative decrease (halve on 429/503)."""

    def __init__(self, ceiling: int, label: str = "") -> None:
        self.ceiling = max(1, int(ceiling))
        self.limit = float(self.ceiling)
        self.label = label
        self.in_flight = 0
        self.cuts = 0
        self.lowest = self.ceiling
        self._epoch = 0  # bumped by every cut: answers to requests sent before it do not cut again
        self._cond = threading.Condition()
        _LIVE.add(self)

    @property
    def allowed(self) -> int:
        return max(1, int(self.limit))

    def acquire(self) -> int:
        with self._cond:
            while self.in_flight >= self.allowed:
                self._cond.wait()
            self.in_flight += 1
            return self._epoch

    def release(self, epoch: int, *, ok: bool, throttled: bool) -> None:
        with self._cond:
            self.in_flight -= 1
            if throttled and epoch == self._epoch:
                self.limit = max(1.0, self.limit / 2.0)
                self._epoch += 1
                self.cuts += 1
                self.lowest = min(self.lowest, self.allowed)
            elif ok:
                self.limit = min(float(self.ceiling), self.limit + 1.0 / self.limit)
            self._cond.notify_all()

    def note(self) -> str:
        return f"{self.allowed}/{self.ceiling} in flight" if self.allowed < self.ceiling else ""


_LIVE: weakref.WeakSet[AdaptiveLimit] = weakref.WeakSet()


def concurrency_note() -> str:
    """For the progress bar: the throttled endpoints' current concurrency, e.g. ``endpoint 2/8 in flight``."""
    notes = [f"endpoint {n}" for lim in list(_LIVE) if (n := lim.note())]
    return ", ".join(notes)

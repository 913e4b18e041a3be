"""An OpenAI-compatible chat-completions server on 127.0.0.1 for the openai-vlm tests (no network).

``script(request_json, call_number)`` returns a :class:`Answer`: a 200 chat completion with
``content`` (and ``top_logprobs`` for the first token when given), another status, a raw body
(malformed JSON), a delay (timeouts) or a
trickle (a body sent one byte at a time). Every request and its headers are recorded.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


@dataclass
class Answer:
    content: str = ""
    top_logprobs: list[tuple[str, float]] | None = None
    status: int = 200
    raw: bytes | None = None  # sent as the body as it is
    delay: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)
    trickle: float = 0.0  # seconds between the body's bytes (a server that never quite finishes)
    usage: dict[str, int] | None = None  # the answer's "usage" (OpenAI's token counts), sent when given


class FakeVLMServer:
    def __init__(self, script: Callable[[dict[str, Any], int], Answer]) -> None:
        self.script = script
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                req = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
                with lock:
                    n = len(fake.requests)
                    fake.requests.append(req)
                    fake.headers.append({k.lower(): v for k, v in self.headers.items()})
                    fake.in_flight += 1
                    fake.max_in_flight = max(fake.max_in_flight, fake.in_flight)
                try:
                    ans = fake.script(req, n)
                    time.sleep(ans.delay)
                    if ans.raw is not None:
                        body = ans.raw
                    elif ans.status != 200:
                        body = json.dumps({"error": {"message": "scripted error", "type": "error"}}).encode()
                    else:
                        choice: dict[str, Any] = {"index": 0, "finish_reason": "stop",
                                                  "message": {"role": "assistant", "content": ans.content}}
                        if ans.top_logprobs is not None:
                            top = [{"token": t, "logprob": lp, "bytes": None} for t, lp in ans.top_logprobs]
                            choice["logprobs"] = {"content": [{"token": ans.top_logprobs[0][0], "bytes": None,
                                                               "logprob": ans.top_logprobs[0][1], "top_logprobs": top}]}
                        doc = {"id": f"c{n}", "object": "chat.completion", "created": 0,
                               "model": req.get("model"), "choices": [choice]}
                        body = json.dumps(doc | ({"usage": ans.usage} if ans.usage is not None else {})).encode()
                    self.send_response(ans.status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(body)))
                    for k, v in ans.headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    if ans.trickle:
                        for i in range(len(body)):
                            self.wfile.write(body[i:i + 1])
                            self.wfile.flush()
                            time.sleep(ans.trickle)
                    else:
                        self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up waiting
                finally:
                    with lock:
                        fake.in_flight -= 1

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def serve() -> Iterator[Any]:
    """``serve(script)`` starts a :class:`FakeVLMServer`; every server started is closed after the test."""
    servers: list[FakeVLMServer] = []

    def start(script: Any) -> FakeVLMServer:
        servers.append(FakeVLMServer(script))
        return servers[-1]

    yield start
    for s in servers:
        s.close()

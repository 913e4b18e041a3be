"""A scripted OpenAI-compatible chat-completions server on 127.0.0.1, for the planner tests."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    content: str | None = None  # assistant message text (status 200)
    status: int = 200
    body: Any = None  # raw JSON body for non-200 replies
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


Script = Callable[[dict[str, Any], int], Reply]


class FakeLLM:
    """Records every request; answers with ``script(request_json, call_number)``."""

    def __init__(self) -> None:
        self.script: Script = lambda req, n: Reply(content="{}")
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", 0))
                req = json.loads(self.rfile.read(length) or b"{}")
                with fake._lock:
                    n = len(fake.requests)
                    fake.requests.append({"path": self.path, **req})
                    fake.headers.append({k.lower(): v for k, v in self.headers.items()})
                    fake.in_flight += 1
                    fake.max_in_flight = max(fake.max_in_flight, fake.in_flight)
                try:
                    reply = fake.script(req, n)
                    if reply.delay:
                        time.sleep(reply.delay)
                    if reply.status == 200:
                        payload: Any = {
                            "id": f"chatcmpl-{n}",
                            "object": "chat.completion",
                            "created": int(time.time()),
                            "model": req.get("model", "fake"),
                            "choices": [
                                {
                                    "index": 0,
                                    "message": {"role": "assistant", "content": reply.content},
                                    "finish_reason": "stop",
                                }
                            ],
                            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                        }
                    else:
                        payload = reply.body or {"error": {"message": "scripted error", "type": "error"}}
                    data = json.dumps(payload).encode()
                    self.send_response(reply.status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    for k, v in reply.headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout tests)
                finally:
                    with fake._lock:
                        fake.in_flight -= 1

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def answer(*items: tuple[str, list[int]] | dict[str, Any]) -> str:
    """JSON answer text with the given (name, severities) pairs or raw item dicts."""
    out = []
    for it in items:
        if isinstance(it, dict):
            out.append(it)
        else:
            name, sev = it
            out.append({"name": name, "severities": sev, "reason": f"{name} happens in this domain."})
    return json.dumps({"corruptions": out})

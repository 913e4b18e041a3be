"""Endpoint faults for ``benchmarks/faults.py``: an ``openai-vlm:`` run against a throttling, failing or
recovering server (fake OpenAI-compatible servers on 127.0.0.1, run from this process).

Each scenario runs the fault domain through the real CLI in its own $DOMAINBENCH_HOME (so the
answer cache starts empty) and reports:

- lost requests: answers the reference run stored that the scenario's answer cache lacks at the end;
- duplicated requests: (image, question) pairs the server answered (HTTP 200) more than once;
- lost and recomputed units, and whether the CSV report equals the undisturbed endpoint run's.

The server answers deterministically (a class name chosen by a hash of the image), so two runs agree
exactly; ``DOMAINBENCH_RETRY_BACKOFF`` scales the back-off down so that a scenario takes seconds.
"""

from __future__ import annotations

import collections
import hashlib
import sqlite3
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.models.fake_vlm_server import Answer, FakeVLMServer  # noqa: E402

BACKOFF = "0.02"


class Script:
    """The fake server's behaviour: ``fault(n, state)`` gives a status to refuse with (or None to answer)."""

    def __init__(self, classes: list[str], fault: Callable[[int, dict[str, Any]], int | None],
                 retry_after: str | None = None) -> None:
        self.classes, self.fault = classes, fault
        self.headers = {"retry-after": retry_after} if retry_after else {}
        self.lock = threading.Lock()
        self.state: dict[str, Any] = {"answered": 0, "down_until": 0.0, "down": False}
        self.answered: collections.Counter[str] = collections.Counter()
        self.refused = 0

    def __call__(self, req: dict[str, Any], n: int) -> Answer:
        content = req["messages"][0]["content"]
        key = hashlib.sha256((content[0]["image_url"]["url"] + content[1]["text"]).encode()).hexdigest()
        with self.lock:
            status = self.fault(n, self.state)
            if status:
                self.refused += 1
                return Answer(status=status, headers=self.headers)
            self.state["answered"] += 1
            self.answered[key] += 1
        return Answer(content=self.classes[int(key[:8], 16) % len(self.classes)])


def _cache_rows(home: Path) -> int:
    path = home / "vlm-answers.sqlite"
    if not path.exists():
        return 0
    with sqlite3.connect(path) as db:
        return int(db.execute("SELECT COUNT(*) FROM answers").fetchone()[0])


def _rows(b: Any, url: str) -> list[dict[str, str]]:
    """The CSV report with the server's address (in the model name; each scenario has its own port) masked."""
    return [{k: v.replace(url, "URL") for k, v in r.items()} for r in b.report_rows("endpoint")]


def _bench(bench_cls: Any, work: Path, images: int, name: str) -> Any:
    sub = work / name
    sub.mkdir()
    b = bench_cls(sub, images)
    b.env["DOMAINBENCH_RETRY_BACKOFF"] = BACKOFF
    return b


def _run_args(b: Any, run_id: str, url: str, *extra: str) -> list[str]:
    args = b.new_run(run_id)
    args[args.index("fake:slow")] = f"openai-vlm:fake@{url}"
    return [*args, "--vlm-mode", "generate", *extra]


def endpoint_scenarios(bench_cls: Any, work: Path, images: int) -> list[tuple[str, int, int, int, int, bool, str]]:
    """(scenario, lost requests, duplicated requests, lost units, recomputed units, report equal, notes) rows."""
    from domainbench.data import load_sample

    classes = load_sample().classes
    rows = []

    # the undisturbed endpoint run every scenario is compared with
    ref = _bench(bench_cls, work, images, "endpoint-reference")
    script = Script(classes, lambda n, s: None)
    server = FakeVLMServer(script)
    code, err = ref.cli(*_run_args(ref, "endpoint", server.url, "--concurrency", "8"))
    assert code == 0, err
    reference_rows, reference_keys = _rows(ref, server.url), set(script.answered)
    assert _cache_rows(ref.home) == len(reference_keys)
    total_units = len(ref.units("endpoint"))
    server.close()

    def finish(name: str, b: Any, script: Script, before: dict[tuple, str | None], note: str) -> None:
        after = b.units("endpoint")
        # an answer the reference needed that this server never gave, or one given but not stored
        lost_requests = len(reference_keys - set(script.answered)) + max(0, len(reference_keys) - _cache_rows(b.home))
        duplicated = sum(c - 1 for c in script.answered.values() if c > 1)
        recomputed = sum(1 for k, v in before.items() if k in after and after[k] != v)
        equal = _rows(b, server.url) == reference_rows
        rows.append((name, lost_requests, duplicated, total_units - len(after), recomputed, equal, note))

    # 1. a server that answers every other request with HTTP 429 (no Retry-After), at concurrency 8
    b = _bench(bench_cls, work, images, "endpoint-429")
    script = Script(classes, lambda n, s: 429 if n % 2 == 0 else None)
    server = FakeVLMServer(script)
    t0 = time.perf_counter()
    code, err = b.cli(*_run_args(b, "endpoint", server.url, "--concurrency", "8"))
    server.close()
    finish("endpoint: 429 every other", b, script, {},
           f"exit {code}, {script.refused} refused of {len(server.requests)} sent, "
           f"max {server.max_in_flight} in flight ({time.perf_counter() - t0:.0f} s)")

    # 2. an outage longer than --retry-budget: the run stops resumably; the server comes back; --resume finishes
    b = _bench(bench_cls, work, images, "endpoint-outage")

    def outage(n: int, s: dict[str, Any]) -> int | None:
        if s["answered"] >= len(reference_keys) // 3 and not s.get("recovered"):
            return 503
        return None

    script = Script(classes, outage)
    server = FakeVLMServer(script)
    code, err = b.cli(*_run_args(b, "endpoint", server.url, "--concurrency", "4", "--retry-budget", "1"))
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    one_line = (code == 2 and len(lines) == 1 and lines[0].startswith("error:") and "HTTP 503" in lines[0]
                and "domainbench run --resume endpoint" in lines[0] and server.url in lines[0])
    before = b.units("endpoint")
    script.state["recovered"] = True
    code2, err2 = b.cli("run", "--resume", "endpoint")
    assert code2 == 0, err2
    server.close()
    finish("endpoint: outage + resume", b, script, before,
           f"stopped with one line naming endpoint, status and --resume: {one_line}; resumed exit {code2}")

    # 3. a short outage (503 with Retry-After: 1) well inside the budget: ridden out in one go
    b = _bench(bench_cls, work, images, "endpoint-recovery")

    def blip(n: int, s: dict[str, Any]) -> int | None:
        if s["answered"] >= len(reference_keys) // 2 and not s["down"]:
            s["down"], s["down_until"] = True, time.monotonic() + 2.0
        return 503 if s["down"] and time.monotonic() < s["down_until"] else None

    script = Script(classes, blip, retry_after="1")
    server = FakeVLMServer(script)
    code, err = b.cli(*_run_args(b, "endpoint", server.url, "--concurrency", "8"))
    server.close()
    finish("endpoint: 2 s outage", b, script, {}, f"exit {code} without a resume, {script.refused} refused")
    return rows

"""Remote endpoints that throttle, fail, trickle or flood (issue 36, items 8, 9, 11, 15, 17).

Every server here is a fake on 127.0.0.1 started by the test; back-off is scaled down with
DOMAINBENCH_RETRY_BACKOFF so that the throttling runs take seconds.
"""

from __future__ import annotations

import collections
import hashlib
import json
import socket
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from domainbench.records.config import CorruptionChoice, DomainConfig, save
from domainbench.models import endpoint_transport as transport
from domainbench.models.generative import VLMOptions
from domainbench.models.openai_vlm_backend import AnswerCache, EndpointError, EndpointStalled, OpenAIVLM
from domainbench.store import open_store
from tests.cli_runner import run_cli
from tests.models.fake_vlm_server import Answer, FakeVLMServer, serve  # noqa: F401 (the fixture)

CLASSES = ["cat", "dog", "ankle boot"]


@pytest.fixture(autouse=True)
def short_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOMAINBENCH_RETRY_BACKOFF", "0.01")


def image_key(req: dict[str, Any]) -> str:
    """What identifies one question about one image: its data URL and text."""
    content = req["messages"][0]["content"]
    return hashlib.sha256((content[0]["image_url"]["url"] + content[1]["text"]).encode()).hexdigest()


def distinct_images(n: int) -> np.ndarray:
    return np.random.default_rng(0).integers(0, 256, size=(n, 8, 8, 3), dtype=np.uint8)


def model(server: FakeVLMServer, tmp_path: Path, **options: Any) -> OpenAIVLM:
    m = OpenAIVLM(f"fake@{server.url}", device=None, cache=AnswerCache(tmp_path / "cache.sqlite"))  # type: ignore[arg-type]
    m.configure(CLASSES, VLMOptions(**{"mode": "generate", **options}))
    return m


class Throttle:
    """A scripted server's bookkeeping: which answers were given (status 200) per request key."""

    def __init__(self, fail: Any) -> None:
        self.fail = fail  # (request number, attempts of this key so far) -> status or None
        self.lock = threading.Lock()
        self.attempts: collections.Counter[str] = collections.Counter()
        self.answered: collections.Counter[str] = collections.Counter()

    def __call__(self, req: dict[str, Any], n: int) -> Answer:
        key = image_key(req)
        with self.lock:
            seen = self.attempts[key]
            self.attempts[key] += 1
            status = self.fail(n, seen)
            if status is None:
                self.answered[key] += 1
        return Answer(status=status) if status else Answer(content="a dog")


def cache_rows(path: Path) -> int:
    with sqlite3.connect(path) as db:
        return int(db.execute("SELECT COUNT(*) FROM answers").fetchone()[0])


def test_every_other_request_429_completes_at_concurrency_8_each_answer_once(serve: Any, tmp_path: Path) -> None:
    script = Throttle(lambda n, seen: 429 if n % 2 == 0 else None)
    server = serve(script)
    m = model(server, tmp_path, concurrency=8)
    res = m.classify(distinct_images(40), 40)
    assert res.preds.tolist() == [1] * 40
    assert len(script.answered) == 40 and set(script.answered.values()) == {1}  # each answered once
    assert cache_rows(tmp_path / "cache.sqlite") == 40
    assert len(server.requests) >= 60  # about half were refused and retried
    assert server.max_in_flight <= 8
    assert m.limiter().cuts >= 1 and m.limiter().lowest < 8  # it slowed down


def test_more_refusals_than_a_fixed_retry_count_are_ridden_out(serve: Any, tmp_path: Path) -> None:
    """Six 429s for every request: a client that gives up after 5 attempts ends the run."""
    script = Throttle(lambda n, seen: 429 if seen < 6 else None)
    server = serve(script)
    res = model(server, tmp_path, concurrency=4).classify(distinct_images(6), 6)
    assert res.preds.tolist() == [1] * 6
    assert len(server.requests) == 42 and set(script.answered.values()) == {1}


def test_retry_after_is_honoured(serve: Any, tmp_path: Path) -> None:
    times: list[float] = []

    def script(req: dict[str, Any], n: int) -> Answer:
        times.append(time.monotonic())
        return Answer(status=429, headers={"retry-after": "1"}) if n == 0 else Answer(content="cat")

    server = serve(script)
    assert model(server, tmp_path).classify(distinct_images(1), 1).preds.tolist() == [0]
    assert len(server.requests) == 2 and times[1] - times[0] >= 0.95


def test_retry_after_forms() -> None:
    assert transport.retry_after({"retry-after": "2.5"}) == 2.5
    assert transport.retry_after({"retry-after-ms": "250"}) == 0.25
    assert transport.retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, now=1445412470.0) == 10.0
    assert transport.retry_after({"retry-after": "soon"}) is None
    assert transport.retry_after({"retry-after": "nan"}) is None
    assert transport.retry_after({}) is None


def test_backoff_is_exponential_with_jitter_and_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    import random

    monkeypatch.setenv("DOMAINBENCH_RETRY_BACKOFF", "0.5")
    rng = random.Random(1)
    draws = {a: [transport.backoff_delay(a, rng) for _ in range(400)] for a in (0, 3, 20)}
    assert 0 <= min(draws[0]) and max(draws[0]) <= 0.5
    assert max(draws[3]) <= 4.0 and max(draws[3]) > 3.0 and min(draws[3]) < 1.0  # spread over [0, 4]
    assert max(draws[20]) <= 30.0  # 0.5 x 60: the cap


def test_adaptive_limit_halves_once_per_window_and_grows_back_slowly() -> None:
    lim = transport.AdaptiveLimit(8)
    epochs = [lim.acquire() for _ in range(8)]
    assert lim.in_flight == 8 and lim.allowed == 8
    for e in epochs:  # eight 429s to requests sent in one window: one cut
        lim.release(e, ok=False, throttled=True)
    assert lim.allowed == 4 and lim.cuts == 1 and lim.in_flight == 0
    e = lim.acquire()  # sent after the cut: its 429 cuts again
    lim.release(e, ok=False, throttled=True)
    assert lim.allowed == 2 and lim.cuts == 2
    for _ in range(3):  # +1/limit per success: about one request more per window
        lim.release(lim.acquire(), ok=True, throttled=False)
    assert 3.0 <= lim.limit < 4.0
    for _ in range(200):
        lim.release(lim.acquire(), ok=True, throttled=False)
    assert lim.limit == 8.0 and lim.allowed == 8 and lim.note() == ""  # never above --concurrency


def test_the_limit_shows_in_the_progress_note() -> None:
    lim = transport.AdaptiveLimit(8, "http://x/v1")
    lim.release(lim.acquire(), ok=False, throttled=True)
    assert lim.note() == "4/8 in flight"
    assert "endpoint 4/8 in flight" in transport.concurrency_note()


def test_a_server_that_admits_two_at_once_is_met_at_two(serve: Any, tmp_path: Path) -> None:
    def script(req: dict[str, Any], n: int) -> Answer:
        return Answer(status=503 if server.in_flight > 2 else 200, content="cat", delay=0.05)

    server = serve(script)
    m = model(server, tmp_path, concurrency=8)
    assert m.classify(distinct_images(30), 30).preds.tolist() == [0] * 30
    assert m.limiter().lowest <= 2


def test_a_budget_spent_stops_resumably_naming_endpoint_and_status(serve: Any, tmp_path: Path) -> None:
    server = serve(lambda req, n: Answer(status=503))
    with pytest.raises(EndpointStalled) as e:
        model(server, tmp_path, retry_budget=0.5).classify(distinct_images(1), 1)
    msg = str(e.value)
    assert server.url in msg and "HTTP 503" in msg and "--retry-budget 0.5 s" in msg and "--resume" in msg


def test_a_trickling_server_is_bounded_in_total_time(serve: Any, tmp_path: Path) -> None:
    server = serve(lambda req, n: Answer(content="cat " * 50, trickle=0.1))
    t0 = time.monotonic()
    with pytest.raises(EndpointStalled, match=r"no whole answer within 0.5 s"):
        model(server, tmp_path, request_timeout=0.5, retry_budget=1.0).classify(distinct_images(1), 1)
    assert time.monotonic() - t0 < 4.0  # a per-read timeout would wait ~100 s (one byte each 0.1 s)


def test_a_huge_answer_is_refused_and_a_long_one_cached_bounded(serve: Any, tmp_path: Path) -> None:
    huge = serve(lambda req, n: Answer(content="x" * (3 << 20)))
    with pytest.raises(EndpointError, match="more than 1 MiB"):
        model(huge, tmp_path / "a").classify(distinct_images(1), 1)
    chatty = serve(lambda req, n: Answer(content="a cat " + "and more " * 2000))
    m = model(chatty, tmp_path / "b")
    res = m.classify(distinct_images(1), 1)
    assert res.preds.tolist() == [0] and len(res.answers[0]) == 200
    with sqlite3.connect(tmp_path / "b" / "cache.sqlite") as db:
        (value,) = db.execute("SELECT value FROM answers").fetchone()
    assert len(json.loads(value)) == 2000


@pytest.mark.parametrize("answer, match", [
    (Answer(raw=b"<html>busy</html>"), "not JSON"),
    (Answer(raw=json.dumps({"choices": [{"message": "cat"}]}).encode()), "no choices.0..message object"),
    (Answer(raw=json.dumps({"choices": []}).encode()), "no choices.0..message object"),
])
def test_malformed_answers_are_one_clear_error(serve: Any, tmp_path: Path, answer: Answer, match: str) -> None:
    server = serve(lambda req, n: answer)
    with pytest.raises(EndpointError, match=match):
        model(server, tmp_path).classify(distinct_images(1), 1)


@pytest.mark.parametrize("top", [[("A", "abc")], [("A", None)], [("A", float("nan"))]])
def test_choice_mode_logprobs_that_are_not_numbers(serve: Any, tmp_path: Path, top: Any) -> None:
    def script(req: dict[str, Any], n: int) -> Answer:
        entries = [{"token": t, "logprob": lp} for t, lp in top]
        choice = {"index": 0, "message": {"role": "assistant", "content": "A"},
                  "logprobs": {"content": [{"token": "A", "logprob": -0.1, "top_logprobs": entries}]}}
        return Answer(raw=json.dumps({"choices": [choice]}).encode())

    server = serve(script)
    with pytest.raises(EndpointError, match="not a log-probability"):
        model(server, tmp_path, mode="choice").classify(distinct_images(1), 1)


def test_http_400_is_not_retried_and_says_so(serve: Any, tmp_path: Path) -> None:
    server = serve(lambda req, n: Answer(status=400))
    with pytest.raises(EndpointError) as e:
        model(server, tmp_path).classify(distinct_images(1), 1)
    assert len(server.requests) == 1
    assert "HTTP 400" in str(e.value) and "not retried" in str(e.value) and "attempts" not in str(e.value)


# -- through the command line ------------------------------------------------------------------------------------

def _plan(tmp_path: Path) -> Path:
    return save(DomainConfig(domain="remote", corruptions=[CorruptionChoice(name="brightness", severities=[5])]),
                tmp_path / "plan.toml")


def _args(tmp_path: Path, url: str, *extra: str) -> list[str]:
    return ["run", str(_plan(tmp_path)), "--models", f"openai-vlm:fake@{url}", "--limit", "6", "--workers", "0",
            "--no-threat", "--no-stability", "--vlm-mode", "generate", "--run-id", "remote", *extra]


def test_cli_run_against_a_throttling_server_completes_with_each_answer_once(
        serve: Any, home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    script = Throttle(lambda n, seen: 429 if n % 2 == 0 else None)
    server = serve(script)
    code, _, err = run_cli(_args(tmp_path, server.url, "--concurrency", "8"), capsys, monkeypatch)
    assert code == 0, err
    assert len(script.answered) == 12 and set(script.answered.values()) == {1}  # 6 clean + 6 corrupted
    assert cache_rows(home / "vlm-answers.sqlite") == 12
    units = open_store().units("remote")
    assert sum(len(u.preds) for u in units) == 12


def test_cli_outage_stops_resumably_then_recovers(serve: Any, home: Path, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    down = {"on": True}
    script = Throttle(lambda n, seen: 503 if down["on"] and n >= 3 else None)
    server = serve(script)
    # shards of 2 images: the first shard is stored before the outage, so the run is kept to be resumed (a run
    # that stored nothing is dropped: test_an_endpoint_failing_from_its_first_request_leaves_nothing_stored)
    (tmp_path / "run.toml").write_text("shard_size = 2\n")
    code, _, err = run_cli(_args(tmp_path, server.url, "--concurrency", "1", "--retry-budget", "0.5",
                                 "--run-config", str(tmp_path / "run.toml")), capsys, monkeypatch)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error:"), err
    assert server.url in err and "HTTP 503" in err and "domainbench run --resume remote" in err
    # the transport flags apply to a resumed session (they change no result)
    code, _, err = run_cli(["run", "--resume", "remote", "--retry-budget", "0.2", "--concurrency", "2"], capsys,
                           monkeypatch)
    assert code == 2 and "--retry-budget 0.2 s" in err and "domainbench run --resume remote" in err, err
    down["on"] = False
    code, _, err = run_cli(["run", "--resume", "remote"], capsys, monkeypatch)
    assert code == 0, err
    assert len(script.answered) == 12 and set(script.answered.values()) == {1}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("url, says", [
    (f"http://127.0.0.1:{_free_port()}/v1", "connection refused"),
    ("http://[::1/v1", "the URL is not valid"),
    ("http://user:hunter2@127.0.0.1:9/v1", "holds a user name or password"),
    ("http://", "names no host"),
])
def test_an_unusable_endpoint_is_refused_before_anything_is_stored(
        home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        url: str, says: str) -> None:
    code, out, err = run_cli(_args(tmp_path, url), capsys, monkeypatch)
    assert code == 2 and err.startswith("error:") and says in err and err.count("\n") == 1, err
    assert "hunter2" not in err and "Traceback" not in err
    assert not list(open_store().find("runs")) and not (home / "crash").exists()


@pytest.mark.parametrize("status", [500, 401, 429])
def test_an_endpoint_failing_from_its_first_request_leaves_nothing_stored(
        serve: Any, home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        status: int) -> None:
    """Issue 36 item 17: a new run that stops before it stored any result leaves no run, domain or unit behind;
    the message says so and to run the command again (not `--resume` of a run that is not there)."""
    healthy = {"on": False}
    server = serve(lambda req, n: Answer(content="a dog") if healthy["on"] else Answer(status=status))
    code, _, err = run_cli(_args(tmp_path, server.url, "--retry-budget", "0.3"), capsys, monkeypatch)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error:"), err
    assert f"HTTP {status}" in err and "nothing of the run was stored" in err and "--resume" not in err, err
    store = open_store()
    assert store.find("runs") == [] and store.find("domains") == [] and store.find("units") == []
    assert not (home / "crash").exists()
    healthy["on"] = True  # the same command, run id included, then runs
    code, _, err = run_cli(_args(tmp_path, server.url), capsys, monkeypatch)
    assert code == 0, err
    assert open_store().get_run("remote").status == "done"


def test_a_saved_plan_is_kept_when_a_failed_first_request_drops_the_run(
        serve: Any, home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    server = serve(lambda req, n: Answer(status=401))
    open_store().domains.save(DomainConfig.model_validate(
        {"domain": "remote", "corruptions": [{"name": "brightness", "severities": [5]}]}), created_at="2026-01-01")
    before = [d.domain_id for d in open_store().find("domains")]
    code, _, err = run_cli(_args(tmp_path, server.url), capsys, monkeypatch)
    assert code == 2 and "nothing of the run was stored" in err, err
    assert [d.domain_id for d in open_store().find("domains")] == before and open_store().find("runs") == []

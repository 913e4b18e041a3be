"""openai-vlm: remote generative VLMs against a fake OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import base64
import csv
import io
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from domainbench.records.config import CorruptionChoice, DomainConfig, save
from domainbench.models import openai_vlm_backend as backend
from domainbench.models.generative import UNPARSED, VLMOptions, softmax_confidence
from domainbench.models.openai_vlm_backend import AnswerCache, EndpointError, OpenAIVLM, RequestBudgetExhausted
from domainbench.store import open_store
from tests.cli_runner import run_cli
from tests.models.fake_vlm_server import Answer, FakeVLMServer, serve  # noqa: F401 (the fixture)

CLASSES = ["cat", "dog", "ankle boot"]
SECRET = "sk-test-SECRET-0123456789"


def images(values: list[int]) -> np.ndarray:
    """Flat grey images: the fake server reads the class from the grey level (value * 40)."""
    return np.stack([np.full((8, 8, 3), v * 40, dtype=np.uint8) for v in values])


def image_of(req: dict[str, Any]) -> np.ndarray:
    url = req["messages"][0]["content"][0]["image_url"]["url"]
    assert url.startswith("data:image/png;base64,")
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))))


def class_of(req: dict[str, Any]) -> int:
    return int(image_of(req)[0, 0, 0]) // 40


def model(server: FakeVLMServer, tmp_path: Path, **options: Any) -> OpenAIVLM:
    m = OpenAIVLM(f"fake-vlm@{server.url}", device=None, cache=AnswerCache(tmp_path / "cache.sqlite"))  # type: ignore[arg-type]
    m.configure(CLASSES, VLMOptions(**{"mode": "generate", **options}))
    return m


def test_generate_mode_sends_images_as_data_urls_and_parses_answers(serve: Any, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    answers = {0: "A cat.", 1: "It's a DOG", 2: "no idea"}
    server = serve(lambda req, n: Answer(content=answers[class_of(req)]))
    m = model(server, tmp_path, concurrency=2)
    ims = images([0, 1, 2, 1])
    res = m.classify(ims, batch_size=99)
    assert res.preds.tolist() == [0, 1, UNPARSED, 1]
    assert res.answers == ["A cat.", "It's a DOG", "no idea", "It's a DOG"]
    assert len(server.requests) == 3 and server.max_in_flight <= 2  # the repeated image is asked once
    req = server.requests[0]
    assert req["model"] == "fake-vlm" and req["temperature"] == 0 and req["max_tokens"] == 16
    assert req["messages"][0]["content"][1] == {"type": "text", "text": VLMOptions().questions[0]}
    assert {class_of(r) for r in server.requests} == {0, 1, 2}
    np.testing.assert_array_equal(image_of(server.requests[0])[..., :3].shape, (8, 8, 3))
    assert all(h["authorization"] == f"Bearer {SECRET}" for h in server.headers)
    # a second pass is answered from the cache: nothing is sent
    assert m.classify(ims, 99).preds.tolist() == res.preds.tolist() and len(server.requests) == 3


def test_rate_limit_then_success_is_retried(serve: Any, tmp_path: Path) -> None:
    server = serve(lambda req, n: Answer(status=429, headers={"retry-after": "0"}) if n == 0 else Answer(content="dog"))
    assert model(server, tmp_path).classify(images([1]), 1).preds.tolist() == [1]
    assert len(server.requests) == 2


def test_server_error_then_success_is_retried(serve: Any, tmp_path: Path) -> None:
    server = serve(lambda req, n: Answer(status=503, headers={"retry-after": "0"}) if n < 2 else Answer(content="cat"))
    assert model(server, tmp_path).classify(images([0]), 1).preds.tolist() == [0]
    assert len(server.requests) == 3


def test_a_slow_answer_times_out_and_is_retried(serve: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    server = serve(lambda req, n: Answer(content="cat", delay=2.0 if n == 0 else 0.0))
    assert model(server, tmp_path, request_timeout=0.5).classify(images([0]), 1).preds.tolist() == [0]
    assert len(server.requests) == 2
    monkeypatch.setenv("DOMAINBENCH_RETRY_BACKOFF", "0.01")
    slow = serve(lambda req, n: Answer(content="cat", delay=2.0))
    with pytest.raises(EndpointError, match=r"no whole answer within 0.3 s .*--retry-budget 1 s.*--resume"):
        model(slow, tmp_path / "other", request_timeout=0.3, retry_budget=1.0).classify(images([0]), 1)


def test_malformed_json_is_a_clear_error(serve: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    server = serve(lambda req, n: Answer(raw=b"{not json"))
    with pytest.raises(EndpointError, match="malformed response") as e:
        model(server, tmp_path).classify(images([0]), 1)
    assert SECRET not in str(e.value)


def test_choice_mode_scores_classes_by_their_letters(serve: Any, tmp_path: Path) -> None:
    tops = {0: [("A", -0.1), ("B", -2.5), (" C", -4.0)], 1: [("B", -0.3), ("A", -1.5)], 2: [("x", -0.1)]}
    server = serve(lambda req, n: Answer(content="A", top_logprobs=tops[class_of(req)]))
    m = model(server, tmp_path, mode="choice")
    res = m.classify(images([0, 1, 2]), 8)
    text = server.requests[0]["messages"][0]["content"][1]["text"]
    assert "A. cat\nB. dog\nC. ankle boot" in text
    assert server.requests[0]["logprobs"] is True and server.requests[0]["max_tokens"] == 1
    assert res.preds.tolist() == [0, 1, UNPARSED]
    np.testing.assert_allclose(res.scores[0], [-0.1, -2.5, -4.0])
    assert res.scores[1][2] == -np.inf  # a letter the server did not return
    conf = softmax_confidence(res.scores)
    e = np.exp([-0.1, -2.5, -4.0])
    assert conf[0] == pytest.approx(e[0] / e.sum())
    assert conf[2] == pytest.approx(1 / 3)  # no option named: uniform


def test_choice_mode_is_refused_without_logprobs(serve: Any, tmp_path: Path) -> None:
    server = serve(lambda req, n: Answer(content="A"))
    with pytest.raises(EndpointError, match="no logprobs"):
        model(server, tmp_path, mode="choice").classify(images([0]), 1)


def test_max_requests_stops_and_the_cache_resumes(serve: Any, tmp_path: Path) -> None:
    server = serve(lambda req, n: Answer(content=CLASSES[class_of(req)]))
    with pytest.raises(RequestBudgetExhausted, match="--max-requests 2"):
        model(server, tmp_path, max_requests=2, concurrency=1).classify(images([0, 1, 2]), 8)
    assert len(server.requests) == 2
    res = model(server, tmp_path, max_requests=2, concurrency=1).classify(images([0, 1, 2]), 8)
    assert res.preds.tolist() == [0, 1, 2] and len(server.requests) == 3  # only the missing one was sent


def test_spec_errors() -> None:
    with pytest.raises(EndpointError.__mro__[1], match="MODEL@URL"):
        OpenAIVLM("llava", None)  # type: ignore[arg-type]
    with pytest.raises(EndpointError.__mro__[1], match="at most 20"):
        OpenAIVLM("m@http://127.0.0.1:9/v1", None).configure([f"c{i}" for i in range(21)],  # type: ignore[arg-type]
                                                             VLMOptions(mode="choice"))


def test_run_with_an_endpoint_end_to_end(serve: Any, home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI: a run that hits --max-requests stops with exit 2 and resumes without resending; the
    key reaches the server only; stability of a remote model reads n/a."""
    monkeypatch.setenv("MY_VLM_KEY", SECRET)
    server = serve(lambda req, n: Answer(content="Trouser" if n % 2 else "a sneaker, I think",
                                         usage={"prompt_tokens": 100 + n, "completion_tokens": 3, "total_tokens": 0}))
    domain = save(DomainConfig(domain="remote", corruptions=[CorruptionChoice(name="brightness", severities=[5])]),
                  tmp_path / "plan.toml")
    name = f"openai-vlm:fake@{server.url}"
    run_toml = tmp_path / "run.toml"
    run_toml.write_text("stability_images = 2\nstability_points = 1\n")
    args = ["run", str(domain), "--models", f"{name},embedded:fmnist-plain", "--limit", "3", "--workers", "0",
            "--no-threat", "--run-config", str(run_toml), "--vlm-mode", "generate", "--api-key-env", "MY_VLM_KEY",
            "--max-requests", "4", "--run-id", "remote"]
    code, _, err = run_cli(args, capsys, monkeypatch)
    assert code == 2 and "--max-requests 4" in err and "--resume" in err
    assert len(server.requests) == 4
    code, out, err = run_cli(["run", "--resume", "remote"], capsys, monkeypatch)
    assert code == 0, err
    assert len(server.requests) == 6  # 3 clean + 3 corrupted images, each asked once
    assert all(h["authorization"] == f"Bearer {SECRET}" for h in server.headers)
    store = open_store()
    dump = repr([r.model_dump() for coll in ("runs", "units", "stability") for r in store.find(coll)])
    assert SECRET not in dump and "MY_VLM_KEY" in dump  # the variable's name is stored, never its value
    assert {u.model for u in store.units("remote")} == {name, "embedded:fmnist-plain"}
    assert not [s for s in store.stability("remote") if s.model == name]
    # its cost, kept over the interruption: the requests sent and the tokens the answers reported, summed over both
    # sessions (4 then 2 requests, the n-th reporting 100 + n prompt tokens and 3 completion tokens)
    spent = store.get_run("remote").timings[name]
    assert (spent["requests"], spent["prompt_tokens"], spent["completion_tokens"]) == (6, sum(range(100, 106)), 18)
    assert "parameters" not in spent and not any(k.startswith("peak_") for k in spent)  # nothing of it runs here
    code, out, err = run_cli(["show", "remote"], capsys, monkeypatch)
    assert code == 0 and "n/a (remote model)" in out
    assert f"  {name}: requests 6, tokens (prompt + completion) 615 + 18" in out.splitlines()


def test_choice_mode_nll_with_a_missing_true_letter_is_unbounded_never_a_wrong_number(
        serve: Any, home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 36, item 5: a true class whose letter is absent from the top log-probabilities scored -inf, and
    int64(inf) wrapped: a run wrong on most images reported NLL 0.272. Now the NLL is n/a (unbounded), the
    images with a finite score still summed exactly."""
    from domainbench.metrics.calibration import calibration_counts
    from domainbench.records.unit_sums import NLL_SCALE

    scores = np.array([[-0.1, -2.5, -4.0], [-0.2, -np.inf, -3.0], [-1.0, -0.5, -np.inf]])
    counts = calibration_counts(scores, np.array([0, 1, 1]))
    logp = scores[[0, 2]] - np.log(np.exp(scores[[0, 2]]).sum(axis=1, keepdims=True))
    assert counts.nll_unbounded == 1 and counts.n == 3 and counts.nll is None
    assert counts.nll_sum == round(-logp[0, 0] * NLL_SCALE) + round(-logp[1, 1] * NLL_SCALE)
    finite = calibration_counts(scores[[0, 2]], np.array([0, 1]))
    assert finite.nll == pytest.approx(-(logp[0, 0] + logp[1, 1]) / 2) and "nll_unbounded" not in finite.model_dump()
    assert (finite + counts).nll is None and (finite + finite).nll == pytest.approx(finite.nll)

    # end to end: the server only ever offers letter A (the first class): 7 of the 8 sample images are wrong
    server = serve(lambda req, n: Answer(content="A", top_logprobs=[("A", -0.05), ("x", -3.0)]))
    domain = save(DomainConfig(domain="remote", corruptions=[CorruptionChoice(name="brightness", severities=[5])]),
                  tmp_path / "plan.toml")
    code, _, err = run_cli(["run", str(domain), "--models", f"openai-vlm:fake@{server.url}", "--limit", "8",
                            "--workers", "0", "--no-threat", "--no-stability", "--vlm-mode", "choice",
                            "--run-id", "choice"], capsys, monkeypatch)
    assert code == 0, err
    units = open_store().units("choice")
    clean = next(u for u in units if u.corruption == "clean")
    wrong = int((np.asarray(clean.labels) != 0).sum())
    assert wrong > 0 and clean.calibration.nll_unbounded == wrong and clean.calibration.nll is None
    code, out, err = run_cli(["export", "choice"], capsys, monkeypatch)
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out)))
    assert len(rows) == 2 and all(r["nll"] == "" for r in rows)  # n/a, never a number


def test_a_key_the_server_echoes_is_never_stored(serve: Any, home: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 36, item 7: a server that echoes the request's headers in its answer had the key stored in the
    units (answers) and in the answer cache."""
    monkeypatch.setenv("MY_VLM_KEY", "plainkey0123456789")  # not sk-like: only the exact value can find it
    seen: list[FakeVLMServer] = []

    def echo(req: dict[str, Any], n: int) -> Answer:
        auth = seen[0].headers[n]["authorization"]
        if req.get("logprobs"):
            return Answer(content="A", top_logprobs=[("A", -0.1), (auth, -1.0), ("B", -2.0)])
        return Answer(content=f"a dog (you sent Authorization: {auth}; token {auth.split()[-1]}; other Bearer abc.def-123)")

    seen.append(serve(echo))
    domain = save(DomainConfig(domain="remote", corruptions=[CorruptionChoice(name="brightness", severities=[5])]),
                  tmp_path / "plan.toml")
    for mode in ("generate", "choice"):
        code, _, err = run_cli(["run", str(domain), "--models", f"openai-vlm:fake@{seen[0].url}", "--limit", "2",
                                "--workers", "0", "--no-threat", "--no-stability", "--vlm-mode", mode,
                                "--api-key-env", "MY_VLM_KEY", "--run-id", mode], capsys, monkeypatch)
        assert code == 0, err
    assert all(h["authorization"] == "Bearer plainkey0123456789" for h in seen[0].headers)  # it was sent
    units = open_store().units("generate")
    assert any("you sent Authorization: Bearer <redacted>" in a for u in units for a in u.vlm.answers)
    stored = [(home / "domainbench.sqlite").read_bytes(), (home / "vlm-answers.sqlite").read_bytes()]
    for extra in home.glob("*-wal"):
        stored.append(extra.read_bytes())
    for blob in stored:
        assert b"plainkey0123456789" not in blob and b"abc.def-123" not in blob and b"plainkey" not in blob


def test_the_request_threads_open_one_answer_cache(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run's first images are asked from every thread of the request pool at once: they share one cache, opened
    once (two connections switching a new file to WAL at once failed with "database is locked")."""
    import threading

    from domainbench.models import openai_vlm_backend as backend

    opened: list[Path] = []
    real = backend.AnswerCache

    def slow_open(path: Path) -> AnswerCache:  # widen the window two threads would race through
        opened.append(path)
        time.sleep(0.05)
        return real(path)

    monkeypatch.setattr(backend, "AnswerCache", slow_open)
    m = OpenAIVLM("fake-vlm@http://127.0.0.1:9", device=None)  # type: ignore[arg-type]
    got: list[AnswerCache] = []
    threads = [threading.Thread(target=lambda: got.append(m.cache())) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(opened) == 1 and len(got) == 8 and all(c is got[0] for c in got)

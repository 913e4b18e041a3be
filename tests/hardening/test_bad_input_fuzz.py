"""Bad inputs through the real CLI entry point: each is exit 2 with one `error:` line, no traceback, nothing stored."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from domainbench.records.config import CorruptionChoice, DomainConfig, save
from domainbench.store import open_store
from tests.cli_runner import run_cli

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))
import fake_models  # noqa: E402,F401  (registers fake:)

GOOD = DomainConfig(domain="d", corruptions=[CorruptionChoice(name="brightness", severities=[1])])


def _write(tmp_path: Path, name: str, data: bytes) -> str:
    (tmp_path / name).write_bytes(data)
    return str(tmp_path / name)


CASES = {
    "latin-1 domain toml": lambda t, d: ["run", _write(t, "l.toml", 'domain = "caf\xe9"\n'.encode("latin-1"))],
    "utf-16 domain toml": lambda t, d: ["run", _write(t, "u16.toml", 'domain = "x"\n'.encode("utf-16"))],
    "binary garbage toml": lambda t, d: ["run", _write(t, "g.toml", os.urandom(64) + b"\xff")],
    "severity as string": lambda t, d: ["run", _write(t, "s.toml", b'domain = "d"\n[[corruptions]]\nname = "fog"\nseverities = ["3"]\n')],
    "severity 0": lambda t, d: ["run", _write(t, "s0.toml", b'domain = "d"\n[[corruptions]]\nname = "fog"\nseverities = [0]\n')],
    "severity float": lambda t, d: ["run", _write(t, "sf.toml", b'domain = "d"\n[[corruptions]]\nname = "fog"\nseverities = [2.5]\n')],
    "severities not a list": lambda t, d: ["run", _write(t, "sn.toml", b'domain = "d"\n[[corruptions]]\nname = "fog"\nseverities = 3\n')],
    "corruptions missing": lambda t, d: ["run", _write(t, "nc.toml", b'domain = "d"\n')],
    "unknown top-level key": lambda t, d: ["run", _write(t, "uk.toml", b'domain = "d"\ncorruptions = []\nextra = 1\n')],
    "aliases with other params": lambda t, d: ["run", _write(t, "al.toml", b'domain = "d"\n[[corruptions]]\nname = "elastic"\n'
                                                b'[corruptions.params]\nalpha = 1.0\n[[corruptions]]\nname = "elastic_transform"\n')],
    "image_size huge": lambda t, d: ["run", d, "--run-config", _write(t, "r.toml", b"image_size = 100000\n")],
    "batch_size string": lambda t, d: ["run", d, "--run-config", _write(t, "r2.toml", b'batch_size = "big"\n')],
    "latin-1 run config": lambda t, d: ["run", d, "--run-config", _write(t, "r3.toml", 'dataset = "\xe9"\n'.encode("latin-1"))],
    "limit beyond bound": lambda t, d: ["run", d, "--limit", "1000000000"],
    "workers beyond bound": lambda t, d: ["run", d, "--workers", "100000"],
    "dataset is a FIFO": lambda t, d: (os.mkfifo(t / "fifo"), ["run", d, "--dataset", str(t / "fifo")])[1],
    "dataset of undecodable images": lambda t, d: (_undecodable(t), ["run", d, "--dataset", str(t / "bad")])[1],
    "latin-1 manifest": lambda t, d: ["run", d, "--dataset", _write(t, "m.csv", "path,label\na.png,caf\xe9\n".encode("latin-1"))],
    "export to /dev/null": lambda t, d: ["export", "r", "-o", "/dev/null"],
    # (in some sandboxes /dev/null is a plain file: a FIFO is refused wherever the tests run)
    "export to a FIFO": lambda t, d: (os.mkfifo(t / "out"), ["export", "r", "-o", str(t / "out")])[1],
    "plan -o a directory": lambda t, d: ["plan", "x", "--provider", "offline", "--samples", "1", "-o", str(t)],
    "gallery -o a file": lambda t, d: ["gallery", "-o", _write(t, "f", b"x"), "-c", "fog"],
    "resume unknown run": lambda t, d: ["run", "--resume", "no[/b]such\x1b[2Jrun"],
    "show unknown run with markup": lambda t, d: ["show", "[red]x[/red]"],
    # issue 36
    "plan nested 3,000 deep": lambda t, d: ["run", _write(t, "deep.toml", b'domain = "d"\nx = ' + b"[" * 3000 + b"]" * 3000)],
    "planner temperature nan": lambda t, d: ["run", _write(t, "tn.toml", b'domain = "d"\n[planner]\ntemperature = nan\n'
                                             b'[[corruptions]]\nname = "fog"\nseverities = [1]\n')],
    "planner frequency inf": lambda t, d: ["run", _write(t, "fi.toml", b'domain = "d"\n[planner]\nfrequencies = {a = inf}\n'
                                           b'[[corruptions]]\nname = "fog"\nseverities = [1]\n')],
    "plan with a byte-order mark and a bad field": lambda t, d: ["run", _write(t, "bom.toml", b'\xef\xbb\xbfdomain = 1\n')],
    "config path is a folder": lambda t, d: ["run", str(t)],
    "request timeout inf": lambda t, d: ["run", d, "--request-timeout", "inf"],
    "request timeout in run config nan": lambda t, d: ["run", d, "--run-config", _write(t, "rt.toml", b"request_timeout = nan\n")],
    "retry budget nan": lambda t, d: ["run", d, "--retry-budget", "nan"],
    "worker poll nan": lambda t, d: ["worker", "--poll", "nan", "--until-idle"],
    "worker lease nan": lambda t, d: ["worker", "--lease", "nan", "--until-idle"],
    "endpoint URL malformed": lambda t, d: ["run", d, "--models", "openai-vlm:m@http://[::1/v1"],
    "endpoint URL without host": lambda t, d: ["run", d, "--models", "openai-vlm:m@http://"],
    "endpoint URL with a password": lambda t, d: ["run", d, "--models", "openai-vlm:m@http://u:hunter2@127.0.0.1:1/v1"],
    "endpoint refuses connections": lambda t, d: ["run", d, "--models", "openai-vlm:m@http://127.0.0.1:1/v1"],
    "endpoint answers HTTP 401 from its first request": lambda t, d: ["run", d, "--models", f"openai-vlm:m@{_failing_endpoint()}",
                                                                      "--vlm-mode", "generate", "--limit", "4"],
    "resume with another dataset": lambda t, d: ["run", "--resume", "r", "--dataset", str(t)],
    "model option its backend lacks": lambda t, d: ["run", d, "--model-arg", "fake:a:mode=generate"],
    "model option of an endpoint nan": lambda t, d: ["run", d, "--models", "openai-vlm:m@http://127.0.0.1:1/v1",
                                                     "--model-arg", "openai-vlm:m@http://127.0.0.1:1/v1:request_timeout=nan"],
    "model options table with a bad value": lambda t, d: ["run", d, "--run-config", _write(
        t, "mt.toml", b'[models."openai-vlm:m@http://127.0.0.1:1/v1"]\nconcurrency = "many"\n')],
    "resume with a plan": lambda t, d: ["run", d, "--resume", "r"],
    "shift file named with a superscript digit": lambda t, d: (_superscript_shift(t), ["run", d, "--limit", "4", "--shift",
                                                                                         f"s={t / 'shift'}"])[1],
}

#: what the error must say, where a case could otherwise pass by failing for another reason
EXPECTED = {
    "dataset is a FIFO": "is not a folder or a file (a FIFO",
    "plan -o a directory": "is a directory, not a file",
    "export to a FIFO": "is a FIFO, not a file",
    "gallery -o a file": "is a file, not a folder",
    "image_size huge": "image_size: Input should be less than or equal to 4096",
    "plan nested 3,000 deep": "nests arrays or tables too deeply",
    "planner temperature nan": "planner.temperature",
    "planner frequency inf": "planner.frequencies.a",
    "plan with a byte-order mark and a bad field": ": domain: ",
    "config path is a folder": "is a folder",
    "request timeout inf": "--request-timeout",
    "request timeout in run config nan": "request_timeout",
    "retry budget nan": "--retry-budget",
    "worker poll nan": "--poll nan",
    "worker lease nan": "--lease nan",
    "endpoint URL malformed": "the URL is not valid",
    "endpoint URL without host": "the URL names no host",
    "endpoint URL with a password": "holds a user name or password",
    "endpoint refuses connections": "connection refused",
    "endpoint answers HTTP 401 from its first request": "nothing of the run was stored",
    "resume with another dataset": "leave out --dataset",
    "model option its backend lacks": "--model-arg fake:a: 'mode' is not an option of the fake backend",
    "model option of an endpoint nan": "--model-arg openai-vlm:m@http://127.0.0.1:1/v1: request_timeout:",
    "model options table with a bad value": "[models] openai-vlm:m@http://127.0.0.1:1/v1: concurrency:",
    "resume with a plan": "leave out a domain config",
}


#: fake endpoints the cases started, closed after each test
_SERVERS: list = []


def _failing_endpoint() -> str:
    from tests.models.fake_vlm_server import Answer, FakeVLMServer

    _SERVERS.append(FakeVLMServer(lambda req, n: Answer(status=401)))
    return _SERVERS[-1].url


@pytest.fixture(autouse=True)
def _close_servers():  # noqa: ANN202
    yield
    while _SERVERS:
        _SERVERS.pop().close()


def _superscript_shift(t: Path) -> None:
    from PIL import Image

    (t / "shift").mkdir()
    Image.new("RGB", (28, 28)).save(t / "shift" / "\u00b2.png")


def _undecodable(t: Path) -> None:
    for cls in ("a", "b"):
        (t / "bad" / cls).mkdir(parents=True)
        (t / "bad" / cls / "x.png").write_bytes(b"\x89PNG not really")


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_exit_2_one_error_line_nothing_stored(case: str, home: Path, tmp_path: Path, capsys,
                                                          monkeypatch) -> None:
    domain = str(save(GOOD, tmp_path / "domain.toml"))
    args = CASES[case](tmp_path, domain)
    if args[0] == "run" and "--resume" not in args:
        args += ["--models", "fake:a", "--no-stability", "--no-threat", "--workers", "0"] if "--workers" not in args \
            else ["--models", "fake:a"]
    code, out, err = run_cli(args, capsys, monkeypatch)
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert code == 2, (case, code, err)
    assert len(lines) == 1 and lines[0].startswith("error: "), (case, err)
    assert "Traceback" not in err + out and "\x1b" not in err and "hunter2" not in err
    if case in EXPECTED:  # refused for the reason the case is about, not a later one
        assert EXPECTED[case] in lines[0], (case, lines[0])
    store = open_store()
    assert store.list_runs() == [] and store.find("units") == []

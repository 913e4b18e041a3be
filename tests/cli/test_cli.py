"""The command line as a user meets it: one-line errors with exit status 2 that write
nothing, and a real subprocess killed part-way then resumed without recomputation."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from domainbench.app.cli import main
from tests.cli_runner import run_cli
from domainbench.records.config import CorruptionChoice, DomainConfig, save
from domainbench.store import open_store

ROOT = Path(__file__).resolve().parents[2]
FAKE = ROOT / "tests" / "engine"
DOMAIN = DomainConfig(
    domain="cli test",
    corruptions=[CorruptionChoice(name="gaussian_noise", severities=[1, 3], reason="r"),
                 CorruptionChoice(name="brightness", severities=[2, 5], reason="r")],
)


sys.path.insert(0, str(FAKE))
import fake_models  # noqa: E402,F401  (registers the fake: backend used below)

BOOT = "import fake_models, sys; from domainbench.app.cli import main; sys.argv[0] = 'domainbench'; main()"


def _cli_process(home: Path, *args: str, **popen: object) -> subprocess.Popen[bytes]:
    """``domainbench ARGS`` in a real subprocess that knows the fake models."""
    env = {**os.environ, "DOMAINBENCH_HOME": str(home), "PYTHONPATH": f"{FAKE}{os.pathsep}{ROOT}"}
    return subprocess.Popen([sys.executable, "-c", BOOT, *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, **popen)  # type: ignore[call-overload]


def _slow_run(home: Path, tmp_path: Path, wait_for_units: int, **popen: object) -> subprocess.Popen[bytes]:
    """A 60-unit run of fake:slow (12 shards of 5 images), returned once it stored some units."""
    cfg = save(DOMAIN, tmp_path / "domain.toml")
    (tmp_path / "run.toml").write_text("shard_size = 5\n")
    proc = _cli_process(home, "--quiet", "run", str(cfg), "--models", "fake:slow", "--limit", "60", "--no-stability",
                        "--workers", "0", "--run-config", str(tmp_path / "run.toml"), **popen)
    store = open_store()
    deadline = time.time() + 120
    while time.time() < deadline and len(store.find("units")) < wait_for_units:
        time.sleep(0.2)
    return proc


cli = run_cli


def _nothing_written() -> None:
    store = open_store()
    assert store.list_runs() == [] and store.find("units") == []


@pytest.mark.parametrize(
    "case",
    ["missing_dataset", "empty_folder", "unknown_model", "malformed_toml", "unknown_corruption", "missing_config", "bad_template",
     "bad_device", "bad_baseline", "bad_batch_size", "bad_run_config_value"],
)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(case: str, home: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    cfg = save(DOMAIN, tmp_path / "domain.toml")
    args = ["run", str(cfg), "--models", "fake:a", "--limit", "20", "--no-stability"]
    expect = ""
    if case == "missing_dataset":
        args += ["--dataset", str(tmp_path / "nope")]
        expect = "does not exist"
    elif case == "empty_folder":
        (tmp_path / "empty").mkdir()
        args += ["--dataset", str(tmp_path / "empty")]
        expect = "is empty"
    elif case == "unknown_model":
        args[3] = "open_clipp:ViT-B-32/openai"
        expect = "unknown model"
    elif case == "malformed_toml":
        cfg.write_text("domain = 'x'\n[[corruptions]\nname=")
        expect = "not valid TOML"
    elif case == "unknown_corruption":
        cfg.write_text(cfg.read_text().replace("gaussian_noise", "gausian_noise"))
        expect = "gaussian_noise"  # the close-name suggestion
    elif case == "bad_template":
        args += ["--template", "no slot here"]
        expect = "--template: each prompt template needs exactly one {}"
    elif case == "bad_device":
        args += ["--device", "gpu"]
        expect = "--device: device 'gpu' is not one of auto, cpu, cuda or cuda:N"
    elif case == "bad_baseline":
        args += ["--baseline", "fake:b"]
        expect = "--baseline: baseline 'fake:b' is not among the run's models ['fake:a']"
    elif case == "bad_batch_size":
        args += ["--batch-size", "0"]
        expect = "--batch-size: "
    elif case == "bad_run_config_value":
        (tmp_path / "run.toml").write_text("workers = -2\n")
        args += ["--run-config", str(tmp_path / "run.toml")]
        expect = f"config file {tmp_path / 'run.toml'}: workers: "
    elif case == "missing_config":
        args[1] = str(tmp_path / "absent.toml")
        expect = "does not exist"
    code, out, err = cli(args, capsys, monkeypatch)
    assert code == 2, err
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and expect in lines[0], err
    assert "Traceback" not in err
    _nothing_written()


def _dataset_with_bad_jpeg(tmp_path: Path) -> Path:
    import numpy as np
    from PIL import Image

    for cls in ("cat", "dog"):
        (tmp_path / "ds" / cls).mkdir(parents=True)
        for i in range(3):
            Image.fromarray(np.full((20, 20, 3), 40 * i, np.uint8)).save(tmp_path / "ds" / cls / f"{i}.png")
    bad = tmp_path / "ds" / "dog" / "bad.jpg"
    bad.write_bytes(b"\xff\xd8garbage")
    return bad


def test_unreadable_image_refuses_the_dataset_by_default(home: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    bad = _dataset_with_bad_jpeg(tmp_path)
    cfg = save(DOMAIN, tmp_path / "domain.toml")
    code, _, err = cli(["run", str(cfg), "--models", "fake:a", "--dataset", str(tmp_path / "ds"), "--no-stability",
                        "--workers", "0"], capsys, monkeypatch)
    assert code == 2, err
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"error: {bad}: cannot decode (UnidentifiedImageError: "), err
    assert lines[0].endswith("; remove or fix it, or pass --skip-unreadable"), err
    _nothing_written()


def test_skip_unreadable_skips_counts_and_shows_the_file(home: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    bad = _dataset_with_bad_jpeg(tmp_path)
    cfg = save(DOMAIN, tmp_path / "domain.toml")
    monkeypatch.setattr(sys, "argv", ["domainbench", "run", str(cfg), "--models", "fake:a", "--dataset", str(tmp_path / "ds"),
                                      "--no-stability", "--workers", "0", "--skip-unreadable", "--run-id", "skipping"])
    main()
    err = capsys.readouterr().err
    assert "bad.jpg" in err and "1 unreadable images" in err
    run = open_store().list_runs()[0]
    assert run.status == "done" and run.n_unreadable == 1 and run.unreadable == [str(bad)]
    assert run.config.skip_unreadable and all(u.n == 6 for u in open_store().units("skipping"))
    code, out, err = cli(["show", "skipping"], capsys, monkeypatch)
    assert code == 0, err
    assert f"1 unreadable image file skipped: {bad}" in " ".join(out.split())


def test_plan_show_export_ls(home: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    cfg = save(DOMAIN, tmp_path / "domain.toml")
    args = ["run", str(cfg), "--models", "fake:a,fake:b", "--limit", "30", "--no-stability", "--workers", "0", "--run-id", "my-run"]
    code, _, err = cli(args, capsys, monkeypatch)
    assert code == 0, err
    run_id = open_store().list_runs()[0].run_id
    assert run_id == "my-run"
    code, _, err = cli(args, capsys, monkeypatch)  # the id is taken: refuse, keep the stored run
    assert code == 2 and "already used" in err and len(open_store().list_runs()) == 1
    code, out, _ = cli(["show", run_id, "--baseline", "fake:b"], capsys, monkeypatch)
    assert code == 0 and "fake:a" in out and "baseline fake:b" in out
    code, out, _ = cli(["export", run_id, "--format", "csv"], capsys, monkeypatch)
    rows = out.strip().splitlines()
    assert rows[0].startswith("run_id,model,corruption,severity") and len(rows) == 1 + 2 * 5
    code, out, _ = cli(["export", run_id, "--format", "json", "-o", str(tmp_path / "r.json")], capsys, monkeypatch)
    import json

    assert json.loads((tmp_path / "r.json").read_text())["report"]["run_id"] == run_id
    code, _, err = cli(["export", run_id, "--format", "xml"], capsys, monkeypatch)
    assert code == 2 and "csv or json" in err
    code, _, err = cli(["show", "no-such-run"], capsys, monkeypatch)
    assert code == 2 and "no run" in err


def test_killed_run_resumes_without_recomputing(home: Path, tmp_path: Path) -> None:
    proc = _slow_run(home, tmp_path, wait_for_units=10, start_new_session=True)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)
    store = open_store()
    before = {(u.corruption, u.severity, u.shard): u.computed_at for u in store.find("units")}
    total = 12 * 5  # 12 shards × (clean + 4 corrupted cells) × 1 model
    assert 10 <= len(before) < total, "the run finished before it could be killed; slow the fake model down"
    run_id = store.list_runs()[0].run_id
    assert store.get_run(run_id).status == "running"  # SIGKILL: no chance to mark it
    from domainbench.store.status import run_status

    assert run_status(store.get_run(run_id)) == "interrupted"  # but its process is gone
    res = _cli_process(home, "run", "--resume", run_id)
    _, err_bytes = res.communicate(timeout=300)
    err = err_bytes.decode()
    assert res.returncode == 0, err
    m = re.search(r"(\d+) units computed, (\d+) already stored", err)
    assert m, err
    computed, stored = int(m.group(1)), int(m.group(2))
    assert stored == len(before) and computed == total - len(before)
    after = store.find("units")
    assert len(after) == total
    assert len({(u.corruption, u.severity, u.shard) for u in after}) == total
    for u in after:
        key = (u.corruption, u.severity, u.shard)
        if key in before:
            assert u.computed_at == before[key]  # not recomputed
    assert store.get_run(run_id).status == "done"


def test_sigterm_marks_the_run_interrupted(home: Path, tmp_path: Path) -> None:
    proc = _slow_run(home, tmp_path, wait_for_units=5)
    store = open_store()
    proc.terminate()
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert b"--resume" in err
    run = store.list_runs()[0]
    assert run.status == "interrupted" and "KeyboardInterrupt" in run.error


@pytest.mark.parametrize(("args", "expect"), [(["bogus"], "No such command"), (["run", "x.toml", "--limit", "many"], "--limit")])
def test_usage_errors_exit_2_without_traceback(args: list[str], expect: str, home: Path, capsys, monkeypatch) -> None:
    code, out, err = cli(args, capsys, monkeypatch)
    assert code == 2 and expect in err and "Traceback" not in err + out


def test_demo_plans_offline_and_compares_both_embedded_models(home: Path, capsys, monkeypatch) -> None:
    code, out, err = cli(["demo", "--limit", "30"], capsys, monkeypatch)
    assert code == 0, err
    assert "embedded:fmnist-plain" in out and "embedded:fmnist-augmented" in out and "make ui" in out
    run = open_store().list_runs()[0]
    assert run.status == "done" and run.config.models == ["embedded:fmnist-plain", "embedded:fmnist-augmented"]
    assert (home / "demo-domain.toml").is_file()


def _one_error_line(err: str) -> str:
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    return lines[0]


@pytest.mark.parametrize("args", [["--device", "gpu"], ["--baseline", "fake:zz"]])
def test_bad_device_or_baseline_in_a_real_process(args: list[str], home: Path, tmp_path: Path) -> None:
    cfg = save(DOMAIN, tmp_path / "domain.toml")
    proc = _cli_process(home, "run", str(cfg), "--models", "fake:a", *args)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 2, err
    assert _one_error_line(err.decode()).startswith(f"error: {args[0]}: ")


@pytest.mark.parametrize("position", ["before", "after"])
def test_quiet_before_or_after_the_command(position: str, home: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    cfg = save(DOMAIN, tmp_path / "domain.toml")
    run = ["run", str(cfg), "--models", "fake:a", "--limit", "10", "--no-stability", "--no-threat", "--workers", "0"]
    code, out, err = cli(run, capsys, monkeypatch, quiet=False)
    assert code == 0 and "units computed" in err  # chatter without --quiet
    args = ["--quiet", *run] if position == "before" else [*run, "--quiet"]
    code, out, err = cli(args, capsys, monkeypatch, quiet=False)
    assert code == 0 and err == "" and "fake:a" in out  # the summary table is the output, kept
    plan = ["plan", "night-time dash cam", "--provider", "offline", "--samples", "1", "-o", str(tmp_path / "p.toml")]
    code, _, err = cli(plan if position == "before" else [*plan, "-q"], capsys, monkeypatch)
    assert code == 0 and err == "" and (tmp_path / "p.toml").is_file()
    code, _, err = cli(["ls", "--quiet"], capsys, monkeypatch, quiet=False)
    assert code == 0 and err == ""


def _unusable_homes(tmp_path: Path) -> list[tuple[str, Path]]:
    (tmp_path / "a-file").write_text("I am not a directory")
    (tmp_path / "corrupt").mkdir()
    (tmp_path / "corrupt" / "domainbench.sqlite").write_bytes(os.urandom(4096))
    homes = [("is a file", tmp_path / "a-file"), ("is a file", tmp_path / "a-file" / "below"),
             ("damaged or not a SQLite database", tmp_path / "corrupt")]
    if os.geteuid() != 0:  # root writes to read-only directories; the path under a file stands in for it
        (tmp_path / "read-only").mkdir()
        (tmp_path / "read-only").chmod(0o500)
        homes.append(("not writable", tmp_path / "read-only"))
    return homes


@pytest.mark.parametrize("command", [["ls"], ["demo", "--limit", "5"]])
def test_unusable_home_is_one_line_naming_the_variable_and_file(command: list[str], tmp_path: Path, capsys, monkeypatch) -> None:
    for why, home in _unusable_homes(tmp_path):
        monkeypatch.setenv("DOMAINBENCH_HOME", str(home))
        code, out, err = cli(command, capsys, monkeypatch)
        assert code == 2, err
        line = _one_error_line(err)
        assert line.startswith(f"error: DOMAINBENCH_HOME={home}: ") and why in line
        assert str(home / "domainbench.sqlite") in line


def test_unreachable_mongo_is_one_line_without_the_password(home: Path, capsys, monkeypatch) -> None:
    from domainbench.store.mongo_store import MongoStore

    monkeypatch.setattr(MongoStore.__init__, "__defaults__", (None, None, 200))  # 200 ms server selection
    monkeypatch.setenv("DOMAINBENCH_MONGO_URI", "mongodb://bob:topsecret@127.0.0.1:9/x")
    code, out, err = cli(["ls"], capsys, monkeypatch)
    assert code == 2
    line = _one_error_line(err)
    assert "DOMAINBENCH_MONGO_URI" in line and "bob:***@127.0.0.1:9" in line and "topsecret" not in err + out


def test_internal_error_exits_1_with_a_traceback_file_and_no_secrets(home: Path, capsys, monkeypatch) -> None:
    import domainbench.models
    def boom(pattern: str) -> list[str]:
        raise RuntimeError("model table broken; key sk-very-secret leaked into the message")

    monkeypatch.setenv("OPENAI_API_KEY", "sk-very-secret")
    monkeypatch.setattr(domainbench.models, "list_models", boom)
    code, out, err = cli(["models"], capsys, monkeypatch)
    assert code == 1
    assert "internal error: RuntimeError: model table broken" in err and "bug in domainbench" in err
    assert "please report it" in err and "Traceback" not in err and "sk-very-secret" not in err + out
    m = re.search(r"the full traceback is in (\S+\.txt)", err)
    assert m, err
    report = Path(m.group(1))
    assert report.parent == (home / "crash-reports").resolve()
    text = report.read_text()
    assert "Traceback (most recent call last)" in text and "in boom" in text and "RuntimeError" in text
    assert "sk-very-secret" not in text and "***" in text

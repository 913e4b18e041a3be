"""Bad executor configuration is one line naming the setting, exit 2, and loses nothing:
Ray not installed, an unreachable Ray address, an address without the Ray executor."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from domainbench.records.config import CorruptionChoice, DomainConfig, RunConfig, save
from domainbench.engine.runner import Engine
from domainbench.store import open_store
from tests.cli_runner import run_cli

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))
import fake_models  # noqa: E402,F401  (registers the fake: backend)

DOMAIN = DomainConfig(domain="executor errors",
                      corruptions=[CorruptionChoice(name="gaussian_noise", severities=[1], reason="r")])


def _cli(args: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> tuple[int, str]:
    code, _, err = run_cli(args, capsys, monkeypatch)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    return code, lines[0]


def _run_args(tmp_path: Path) -> list[str]:
    return ["run", str(save(DOMAIN, tmp_path / "d.toml")), "--models", "fake:a", "--limit", "10", "--no-stability"]


def _nothing_written() -> None:
    store = open_store()
    assert store.list_runs() == [] and store.find("units") == []


def test_ray_not_installed(home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError, as without the extra
    code, line = _cli([*_run_args(tmp_path), "--executor", "ray"], capsys, monkeypatch)
    assert code == 2
    assert line.startswith("error: --executor ray: Ray is not installed") and "pip install 'domainbench[ray]'" in line
    _nothing_written()


@pytest.mark.parametrize("address", ["127.0.0.1:1", "ray://127.0.0.1:1"])
def test_unreachable_ray_address(address: str, home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("ray")
    code, line = _cli([*_run_args(tmp_path), "--executor", "ray", "--address", address], capsys, monkeypatch)
    assert code == 2
    assert line.startswith(f"error: --address {address}: no Ray cluster answers there") and "ray start --head" in line
    _nothing_written()


def test_unreachable_address_on_resume_keeps_the_run(home: Path, capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("ray")
    store = open_store()
    run_id = Engine(store).start(DOMAIN, RunConfig(models=["fake:a"], limit=10, shard_size=5, workers=0,
                                                   stability=False, threat=False))
    store.delete("units", run_id=run_id, model="fake:a", corruption="gaussian_noise", severity=1, shard=1)
    before = (store.get_run(run_id), sorted(store.keys("units", run_id=run_id)), store.get_report(run_id))
    code, line = _cli(["run", "--resume", run_id, "--executor", "ray", "--address", "127.0.0.1:1"], capsys, monkeypatch)
    assert code == 2 and "--address 127.0.0.1:1" in line
    assert (store.get_run(run_id), sorted(store.keys("units", run_id=run_id)), store.get_report(run_id)) == before


@pytest.mark.parametrize(("args", "expect"), [
    (["--address", "auto"], "error: --address auto is a Ray address: add --executor ray"),
    (["--executor", "spark"], "error: --executor 'spark' is not known; use local or ray"),
    (["--executor", "ray", "--address", "nowhere"], "error: --address: Ray address 'nowhere' is not understood"),
    (["--executor", "ray", "--actors", "0"], "error: --actors: "),
])
def test_bad_executor_options(args: list[str], expect: str, home: Path, tmp_path: Path,
                              capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    code, line = _cli([*_run_args(tmp_path), *args], capsys, monkeypatch)
    assert code == 2 and line.startswith(expect), line
    _nothing_written()


def test_worker_reads_the_executor_from_the_environment() -> None:
    from domainbench.engine.executors import options_from_env
    from domainbench.errors import UserInputError

    assert options_from_env({}).kind == "local"
    opts = options_from_env({"DOMAINBENCH_EXECUTOR": "ray", "DOMAINBENCH_RAY_ADDRESS": "ray-head:6379"})
    assert (opts.kind, opts.address) == ("ray", "ray-head:6379")
    assert options_from_env({"DOMAINBENCH_RAY_ADDRESS": "ray-head:6379"}).address is None
    with pytest.raises(UserInputError, match="DOMAINBENCH_EXECUTOR='spark' is not known"):
        options_from_env({"DOMAINBENCH_EXECUTOR": "spark"})
    with pytest.raises(UserInputError, match="DOMAINBENCH_RAY_ADDRESS=nowhere: Ray address 'nowhere' is not understood"):
        options_from_env({"DOMAINBENCH_EXECUTOR": "ray", "DOMAINBENCH_RAY_ADDRESS": "nowhere"})

"""Run config sizes have upper bounds and a batch's memory is checked before anything is allocated;
severities are strict integers; two names of one corruption are evaluated once."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from domainbench.runtime import resource_bounds as bounds
from domainbench.records.config import CorruptionChoice, DomainConfig, RunConfig, load_domain, merge_aliases, save
from domainbench.errors import UserInputError
from tests.cli_runner import run_cli

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))
import fake_models  # noqa: E402,F401  (registers fake:)


@pytest.mark.parametrize(("field", "bound"), [
    ("image_size", bounds.MAX_IMAGE_SIZE), ("batch_size", bounds.MAX_BATCH_SIZE), ("workers", bounds.MAX_WORKERS),
    ("stability_points", bounds.MAX_STABILITY_POINTS), ("stability_images", bounds.MAX_STABILITY_IMAGES),
    ("threat_anchors", bounds.MAX_THREAT_ANCHORS), ("limit", bounds.MAX_LIMIT), ("shard_size", bounds.MAX_SHARD_SIZE)])
def test_each_size_has_an_upper_bound_named_in_the_error(field: str, bound: int, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bounds, "available_memory", lambda: 1 << 50)  # the bound, not the memory check
    RunConfig.from_sources(None, {field: bound, "batch_size": 1} if field != "batch_size" else {field: bound})
    with pytest.raises(UserInputError, match=f"^--{field.replace('_', '-')}: .*less than or equal to {bound}$"):
        RunConfig.from_sources(None, {field: bound + 1})
    (tmp_path / "run.toml").write_text(f"{field} = {bound + 1}\n")
    with pytest.raises(UserInputError, match=f"config file .*run.toml: {field}: .*less than or equal to {bound}"):
        RunConfig.from_sources(tmp_path / "run.toml")


def test_batch_memory_estimate_against_available_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    assert bounds.batch_bytes(128, 224) == 128 * 224 * 224 * 3 * 12
    need = bounds.batch_bytes(512, 2048)
    assert bounds.batch_memory_problem(512, 2048, available=2 * need) is None
    problem = bounds.batch_memory_problem(512, 2048, available=2 * need - 1)
    assert problem is not None and "batch_size 512" in problem and "2048x2048" in problem and "--batch-size" in problem
    monkeypatch.setattr(bounds, "available_memory", lambda: 4 << 30)  # a 4 GiB machine
    with pytest.raises(UserInputError, match="batch_size 4096 of 4096x4096 images needs about 2473.9 GB"):
        RunConfig.from_sources(None, {"batch_size": 4096, "image_size": 4096})
    assert RunConfig.from_sources(None, {"batch_size": 128}).batch_size == 128  # defaults fit


def test_available_memory_reads_this_machine() -> None:
    room = bounds.available_memory()
    meminfo = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines())
    assert room is not None and 0 < room <= int(meminfo["MemTotal"].split()[0]) * 1024


def test_stored_configs_load_whatever_the_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bounds, "available_memory", lambda: 1)
    assert RunConfig.model_validate({"batch_size": 4096}).batch_size == 4096  # a record from a bigger machine


@pytest.mark.parametrize("bad", ['"3"', "3.0", "true", '["3"]'])
def test_severities_are_strict_integers(bad: str, tmp_path: Path) -> None:
    sev = bad if bad.startswith("[") else f"[{bad}]"
    (tmp_path / "d.toml").write_text(f'domain = "d"\n[[corruptions]]\nname = "brightness"\nseverities = {sev}\n')
    with pytest.raises(UserInputError, match=r"d.toml: corruptions.0.severities.0: Input should be a valid integer"):
        load_domain(tmp_path / "d.toml")
    with pytest.raises(ValueError):
        CorruptionChoice(name="brightness", severities=["3"])  # type: ignore[list-item]


def test_two_names_of_one_corruption_are_evaluated_once_with_a_warning(home: Path, tmp_path: Path, capsys,
                                                                        monkeypatch) -> None:
    cfg = DomainConfig(domain="d", corruptions=[CorruptionChoice(name="elastic", severities=[1], reason="a"),
                                                CorruptionChoice(name="brightness", severities=[2]),
                                                CorruptionChoice(name="elastic_transform", severities=[3])])
    merged, notes = merge_aliases(cfg)
    assert [(c.name, c.severities, c.reason) for c in merged.corruptions] == [("elastic", [1, 3], "a"), ("brightness", [2], "")]
    assert len(notes) == 1 and "'elastic' and 'elastic_transform' are the same corruption (elastic)" in notes[0]
    assert merge_aliases(merged) == (merged, [])
    clash = DomainConfig(domain="d", corruptions=[CorruptionChoice(name="elastic", params={"alpha": 1.0}),
                                                  CorruptionChoice(name="Elastic-Transform")])
    with pytest.raises(UserInputError, match="different params"):
        merge_aliases(clash)
    path = save(cfg, tmp_path / "domain.toml")
    code, out, err = run_cli(["run", str(path), "--models", "fake:a", "--limit", "4", "--no-stability", "--no-threat",
                              "--workers", "0"], capsys, monkeypatch, quiet=False)
    assert code == 0, err
    assert "warning: config file" in err and "evaluated once" in err
    from domainbench.store import open_store

    units = open_store().find("units")
    assert sorted({(u.corruption, u.severity) for u in units}) == [("brightness", 2), ("clean", 0), ("elastic", 1),
                                                                    ("elastic", 3)]


def test_bad_bounds_through_the_cli_are_one_line_exit_2(home: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    path = save(DomainConfig(domain="d", corruptions=[CorruptionChoice(name="brightness")]), tmp_path / "d.toml")
    (tmp_path / "run.toml").write_text("image_size = 100000\n")
    code, _, err = run_cli(["run", str(path), "--models", "fake:a", "--run-config", str(tmp_path / "run.toml")],
                           capsys, monkeypatch)
    assert code == 2 and err.count("\n") == 1 and "image_size: Input should be less than or equal to 4096" in err
    code, _, err = run_cli(["run", str(path), "--models", "fake:a", "--limit", str(10**9)], capsys, monkeypatch)
    assert code == 2 and err.startswith("error: --limit: ") and str(bounds.MAX_LIMIT) in err

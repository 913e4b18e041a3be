"""Stage timings: a run records seconds per stage and the images each model scored; `show` prints
them under the summary and the JSON export holds them; a resume adds to them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import domainbench
from domainbench.records.config import CorruptionChoice, DomainConfig, RunConfig
from domainbench.engine.timings import RUN, STARTUP, STARTUP_STAGES, StageTimes, timing_lines
from domainbench.store import open_store
from tests.cli_runner import run_cli

DOMAIN = DomainConfig(domain="timings", corruptions=[CorruptionChoice(name="brightness", severities=[1, 3], reason="r")])
N = 24


@pytest.fixture
def run_id(home: Path) -> str:
    cfg = RunConfig(models=["fake:a", "fake:b"], limit=N, shard_size=10, workers=0, stability=False, threat=False)
    return domainbench.run(DOMAIN, run_config=cfg).id  # into $DOMAINBENCH_HOME, as the CLI's run


def test_a_run_records_seconds_per_stage_and_the_images_each_model_scored(run_id: str) -> None:
    t = open_store().get_run(run_id).timings
    assert set(t) == {RUN, STARTUP, "fake:a", "fake:b"}
    # the fixed costs before the first shard; the CLI adds its own imports (below), Engine alone has none to add
    assert set(t[STARTUP]) == {"imports", "dataset", "model load", "text embeddings"}
    assert all(v >= 0 for v in t[STARTUP].values()) and t[STARTUP]["dataset"] > 0
    # run-wide: waiting for decoded and corrupted batches, and measuring each cell's damage (SSIM, PSNR)
    assert set(t[RUN]) == {"decode", "corruption", "damage"} and all(v >= 0 for v in t[RUN].values())
    for model in ("fake:a", "fake:b"):
        # beside them its peak memory while scoring (engine.resources; the fake model holds no torch module, so no
        # parameter count)
        assert set(t[model]) == {"preprocess", "forward", "scoring", "store", "images", "peak_host_bytes"}
        assert t[model]["images"] == N * 3  # clean + 2 cells: every forward pass counted once
        assert all(t[model][s] > 0 for s in ("preprocess", "forward", "scoring", "store"))


def test_show_prints_them_and_the_json_export_holds_them(run_id: str, capsys, monkeypatch) -> None:
    code, out, err = run_cli(["show", run_id], capsys, monkeypatch)
    assert code == 0, err
    lines = out.splitlines()
    at = lines.index("time per stage (s):")
    assert lines[at + 1].startswith("  waiting for decode ")
    assert lines[at + 2].startswith("  measuring damage (SSIM, PSNR) ")
    assert lines[at + 3].startswith("  start-up: imports ") and ", dataset " in lines[at + 3]
    assert lines[at + 4].startswith("  fake:a: preprocess ") and f"({N * 3:,} images, " in lines[at + 4]
    code, out, err = run_cli(["export", run_id, "--format", "json"], capsys, monkeypatch)
    assert code == 0, err
    assert json.loads(out)["run"]["timings"] == open_store().get_run(run_id).timings


def test_stage_times_add_up_and_read_as_lines() -> None:
    t = StageTimes({"m": {"forward": 1.0}})
    t.add("m", "forward", 0.5)
    t.add("m", "images", 30)
    t.add(RUN, "decode", 0.25)
    with t.stage("m", "store"):
        pass
    assert t.seconds["m"]["forward"] == 1.5 and t.seconds["m"]["store"] >= 0
    assert timing_lines({RUN: {"decode": 0.25, "corruption": 2.0}, "m": {"forward": 1.5, "scoring": 0.5, "images": 30}}) == [
        "time per stage (s):", "  waiting for decode 0.2, corruption 2.0", "  m: forward 1.5, scoring 0.5 (30 images, 15.0 img/s scored)"]
    assert timing_lines({RUN: {"decode": 0.25, "damage": 1.25}})[1:] == ["  waiting for decode 0.2",
                                                                          "  measuring damage (SSIM, PSNR) 1.2"]
    assert timing_lines({}) == []


def test_run_prints_and_stores_its_start_up_by_stage(home: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    # `run` through the CLI: its own imports join the engine's dataset, model-load and text-embedding seconds,
    # each stage counted once; the text embeddings of a second run of the same model come from the cache
    plan = tmp_path / "d.toml"
    plan.write_text('domain = "t"\n[[corruptions]]\nname = "brightness"\nseverities = [1]\nreason = "r"\n')
    args = ["run", str(plan), "--models", "embedded:fmnist-plain", "--limit", "20", "--workers", "0",
            "--no-stability", "--no-threat"]
    code, out, err = run_cli([*args, "--run-id", "first"], capsys, monkeypatch)
    assert code == 0, err
    first = open_store().get_run("first").timings[STARTUP]
    assert set(first) == set(STARTUP_STAGES) and all(v > 0 for v in first.values())
    line = next(ln for ln in out.splitlines() if ln.startswith("  start-up: "))
    assert line == "  start-up: " + ", ".join(f"{s} {first[s]:.1f}" for s in STARTUP_STAGES)
    code, _, err = run_cli([*args, "--run-id", "second"], capsys, monkeypatch)
    assert code == 0, err
    second = open_store().get_run("second").timings[STARTUP]
    assert second["text embeddings"] < first["text embeddings"]  # read from the store's cache, not encoded


def test_start_up_lines_keep_the_stage_order() -> None:
    assert timing_lines({STARTUP: {"text embeddings": 0.5, "imports": 2.0, "model load": 1.25, "dataset": 0.3}}) == [
        "time per stage (s):", "  start-up: imports 2.0, dataset 0.3, model load 1.2, text embeddings 0.5"]

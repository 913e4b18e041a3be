"""Stage timings: a run records seconds per stage and the images each model scored; `show` prints
them under the summary and the JSON export holds them; a resume adds to them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import domainbench
from domainbench.config import CorruptionChoice, DomainConfig, RunConfig
from domainbench.engine.timings import RUN, StageTimes, timing_lines
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
    assert set(t) == {RUN, "fake:a", "fake:b"}
    # run-wide: waiting for decoded and corrupted batches, and measuring each cell's damage (SSIM, PSNR)
    assert set(t[RUN]) == {"decode", "corruption", "damage"} and all(v >= 0 for v in t[RUN].values())
    for model in ("fake:a", "fake:b"):
        assert set(t[model]) == {"preprocess", "forward", "scoring", "store", "images"}
        assert t[model]["images"] == N * 3  # clean + 2 cells: every forward pass counted once
        assert all(t[model][s] > 0 for s in ("preprocess", "forward", "scoring", "store"))


def test_show_prints_them_and_the_json_export_holds_them(run_id: str, capsys, monkeypatch) -> None:
    code, out, err = run_cli(["show", run_id], capsys, monkeypatch)
    assert code == 0, err
    lines = out.splitlines()
    at = lines.index("time per stage (s):")
    assert lines[at + 1].startswith("  waiting for decode ")
    assert lines[at + 2].startswith("  measuring damage (SSIM, PSNR) ")
    assert lines[at + 3].startswith("  fake:a: preprocess ") and f"({N * 3:,} images, " in lines[at + 3]
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

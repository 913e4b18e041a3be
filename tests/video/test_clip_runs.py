"""`domainbench run PLAN --dataset CLIPS --frames N` end to end (issue 41): stored, shown, exported; the exported
temporal flip rate equals its recomputation from the `--predictions` rows; a run that stops resumes to the same
records; bad input is one `error:` line with nothing stored."""

from __future__ import annotations

import csv
import io
import json
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from tests.cli_runner import run_cli
from tests.video.clip_fixtures import sample_clips

EMBEDDED = "embedded:fmnist-plain,embedded:fmnist-augmented"
TEMPORAL = ("camera_shake", "flicker", "frame_drop", "h264_compression")


def _temporal_names() -> list[str]:
    """The issue's temporal cells that the corruption registry has (all four once they have all landed)."""
    from domainbench.corruptions.clips import temporal_names

    return [n for n in TEMPORAL if n in temporal_names()]


def _has_mode() -> bool:
    from domainbench.records.config import CorruptionChoice

    return "mode" in CorruptionChoice.model_fields


def _plan() -> str:
    text = 'domain = "dash-cam footage at night"\n'
    text += '[[corruptions]]\nname = "gaussian_noise"\nseverities = [3]\n'
    text += '[[corruptions]]\nname = "brightness"\nseverities = [5]\n' + ('mode = "static"\n' if _has_mode() else "")
    for name in _temporal_names():
        text += f'[[corruptions]]\nname = "{name}"\nseverities = [4]\n'
    return text


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("clip_runs")
    sample_clips(root / "clips")
    (root / "plan.toml").write_text(_plan())
    (root / "run.toml").write_text("image_size = 32\nworkers = 0\n")
    return {"root": root, "clips": root / "clips", "plan": root / "plan.toml", "run": root / "run.toml",
            "home": root / "home"}


def _cli(args: list[str], env: dict[str, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
         code: int = 0) -> tuple[str, str]:
    monkeypatch.setenv("DOMAINBENCH_HOME", str(env["home"]))
    got, out, err = run_cli(args, capsys, monkeypatch)
    assert got == code, err
    return out, err


def _run_args(env: dict[str, Path], run_id: str) -> list[str]:
    return ["run", str(env["plan"]), "--dataset", str(env["clips"]), "--frames", "8", "--models", EMBEDDED,
            "--run-config", str(env["run"]), "--run-id", run_id]


@pytest.fixture(scope="module")
def first_run(env: dict[str, Path]) -> str:
    mp = pytest.MonkeyPatch()
    try:
        mp.setenv("DOMAINBENCH_HOME", str(env["home"]))
        import sys

        from domainbench.app.cli import main

        mp.setattr(sys, "argv", ["domainbench", "--quiet", *_run_args(env, "clips-1")])
        try:
            main()
        except SystemExit as e:
            assert not e.code
    finally:
        mp.undo()
    return "clips-1"


def _csv(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def test_clip_run_is_shown_and_exported_and_flip_rate_recomputes_from_the_predictions(
        env: dict[str, Path], first_run: str, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    out, _ = _cli(["show", first_run], env, capsys, monkeypatch)
    assert "clip run clips-1: 6 clips, 48 sampled frames" in out and "flip%" in out and "flicker/4" in out
    rows = _csv(_cli(["export", first_run, "--format", "csv"], env, capsys, monkeypatch)[0])
    cells = {(r["corruption"], r["severity"]) for r in rows}
    assert ("clean", "0") in cells and ("gaussian_noise", "3") in cells
    assert {(n, "4") for n in _temporal_names()} <= cells and {"flicker", "frame_drop"} <= set(_temporal_names())
    assert {r["mode"] for r in rows if r["corruption"] in _temporal_names()} == {""}  # a temporal one has none
    assert {r["mode"] for r in rows if r["corruption"] == "brightness"} == {"static" if _has_mode() else "independent"}
    assert len(rows) == 2 * len(cells)
    assert {"frame_accuracy", "clip_accuracy_mean", "clip_accuracy_vote", "temporal_flip_rate", "flip_rate_added",
            "recovery_time", "temporal_flip_rate_ci_low"} <= set(rows[0])
    preds = _csv(_cli(["export", first_run, "--predictions"], env, capsys, monkeypatch)[0])
    assert len(preds) == 2 * len(cells) * 48  # one row per (model, cell, clip, frame)
    assert list(preds[0])[:8] == ["model", "corruption", "severity", "mode", "clip", "frame_index", "time", "label"]
    # the flip rate recomputed from the rows: consecutive rows of a (model, cell, clip), in frame order
    by: dict[tuple[str, str, str], list[tuple[int, str]]] = defaultdict(list)
    for p in preds:
        by[(p["model"], p["corruption"] + p["severity"] + p["mode"], p["clip"])].append((int(p["frame_index"]),
                                                                                         p["prediction"]))
    for r in rows:
        flips = pairs = right = frames = 0
        for (model, cell, _clip), seq in by.items():
            if model != r["model"] or cell != r["corruption"] + r["severity"] + r["mode"]:
                continue
            seq.sort()
            pairs += len(seq) - 1
            flips += sum(a[1] != b[1] for a, b in zip(seq, seq[1:]))
        for p in preds:
            if p["model"] == r["model"] and p["corruption"] + p["severity"] + p["mode"] == r["corruption"] + r["severity"] + r["mode"]:
                frames += 1
                right += p["label"] == p["prediction"]
        assert float(r["temporal_flip_rate"]) == flips / pairs
        assert float(r["frame_accuracy"]) == right / frames
    doc = json.loads(_cli(["export", first_run, "--format", "json"], env, capsys, monkeypatch)[0])
    assert doc["kind"] == "clip" and doc["sampling"]["frames"] == 8 and len(doc["clips"]) == 6
    assert all(len(c["frame_indices"]) == 8 for c in doc["clips"]) and doc["paired"]
    assert doc["rows"][0]["temporal_flip_rate"] == float(rows[0]["temporal_flip_rate"])


_KILLER = """
import os, signal, sys
from domainbench.engine import clip_kind
real, calls = clip_kind.score_cell, []
def dies_on_the_third(ms, frames):
    calls.append(1)
    if len(calls) == 3:
        os.kill(os.getpid(), signal.SIGKILL)  # a kill: nothing runs after it, the run stays 'running'
    return real(ms, frames)
clip_kind.score_cell = dies_on_the_third
from domainbench.app.cli import main
sys.argv = ["domainbench", "--quiet", *sys.argv[1:]]
main()
"""


def test_a_killed_run_resumes_to_the_same_records(env: dict[str, Path], first_run: str,
                                                  capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    import os
    import subprocess
    import sys

    from domainbench.store import open_store

    killed = subprocess.run([sys.executable, "-c", _KILLER, *_run_args(env, "clips-2")],
                            env={**os.environ, "DOMAINBENCH_HOME": str(env["home"])}, capture_output=True, text=True,
                            timeout=600)
    assert killed.returncode == -9, killed.stderr
    monkeypatch.setenv("DOMAINBENCH_HOME", str(env["home"]))
    store = open_store()
    run = store.get_run("clips-2")
    assert run is not None and run.status == "running" and len(store.clip_units("clips-2")) == 2
    store.close()
    _cli(["run", "--resume", "clips-2"], env, capsys, monkeypatch)
    one = _cli(["export", first_run, "--format", "json"], env, capsys, monkeypatch)[0]
    two = _cli(["export", "clips-2", "--format", "json"], env, capsys, monkeypatch)[0]
    a, b = json.loads(one), json.loads(two)
    assert a["rows"] == b["rows"] and a["paired"] == b["paired"] and a["clips"] == b["clips"]
    p1 = _cli(["export", first_run, "--predictions"], env, capsys, monkeypatch)[0]
    assert p1 == _cli(["export", "clips-2", "--predictions"], env, capsys, monkeypatch)[0]


def _runs(env: dict[str, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> str:
    return _cli(["ls"], env, capsys, monkeypatch)[0]


@pytest.mark.parametrize("case", ["frames0", "unreadable", "adaptive", "fps_and_frames"])
def test_bad_clip_input_is_one_error_line_and_nothing_is_stored(
        env: dict[str, Path], first_run: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, case: str) -> None:
    before = _runs(env, capsys, monkeypatch)
    args = _run_args(env, f"bad-{case}")
    if case == "frames0":
        args[args.index("--frames") + 1] = "0"
        want = "--frames 0"
    elif case == "unreadable":
        import shutil

        shutil.copytree(env["clips"], tmp_path / "clips")
        (tmp_path / "clips" / "trouser" / "broken.mp4").write_text("not a video")
        args[args.index("--dataset") + 1] = str(tmp_path / "clips")
        want = "clip trouser/broken.mp4: is not a readable video"
    elif case == "adaptive":
        args += ["--adaptive"]
        want = "--adaptive: clip runs evaluate every sampled frame of every clip"
    else:
        args += ["--fps", "2"]
        want = "--frames and --fps both given"
    _, err = _cli(args, env, capsys, monkeypatch, code=2)
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and want in lines[0], err
    assert _runs(env, capsys, monkeypatch) == before


def test_skip_unreadable_leaves_the_clip_out_and_records_it(env: dict[str, Path], first_run: str, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    shutil.copytree(env["clips"], tmp_path / "clips")
    (tmp_path / "clips" / "trouser" / "broken.mp4").write_text("not a video")
    plan = tmp_path / "plan.toml"
    plan.write_text('domain = "d"\n[[corruptions]]\nname = "gaussian_noise"\nseverities = [3]\n')
    _cli(["run", str(plan), "--dataset", str(tmp_path / "clips"), "--frames", "4", "--models", "embedded:fmnist-plain",
          "--run-config", str(env["run"]), "--run-id", "skipping", "--skip-unreadable"], env, capsys, monkeypatch)
    doc = json.loads(_cli(["export", "skipping", "--format", "json"], env, capsys, monkeypatch)[0])
    assert doc["unreadable"] == [{"clip": "trouser/broken.mp4", "why": doc["unreadable"][0]["why"]}]
    assert len(doc["clips"]) == 6 and doc["rows"][0]["frames"] == 24


def test_a_still_image_run_leaves_temporal_corruptions_out_and_refuses_a_plan_of_them_only(
        env: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text('domain = "d"\n[[corruptions]]\nname = "gaussian_noise"\nseverities = [3]\n'
                    '[[corruptions]]\nname = "flicker"\nseverities = [3]\n'
                    '[[corruptions]]\nname = "frame_drop"\nseverities = [2]\n')
    monkeypatch.setenv("DOMAINBENCH_HOME", str(env["home"]))
    code, out, err = run_cli(["run", str(plan), "--limit", "10", "--models", "embedded:fmnist-plain", "--run-id",
                              "frames", "--no-stability", "--no-threat"], capsys, monkeypatch, quiet=False)
    assert code == 0, err
    assert "note: flicker, frame_drop are temporal" in out + err and "give --dataset a clip folder" in out + err
    doc = json.loads(_cli(["export", "frames", "--format", "json"], env, capsys, monkeypatch)[0])
    assert sorted({c["corruption"] for c in doc["cells"]}) == ["clean", "gaussian_noise"]

    plan.write_text('domain = "d"\n[[corruptions]]\nname = "flicker"\nseverities = [3]\n'
                    '[[corruptions]]\nname = "frame_drop"\nseverities = [2]\n')
    before = _runs(env, capsys, monkeypatch)
    _, err = _cli(["run", str(plan), "--limit", "10", "--models", "embedded:fmnist-plain"], env, capsys, monkeypatch,
                  code=2)
    assert err.startswith("error: corruption 'flicker' (and 'frame_drop') is temporal") and "clip folder" in err
    assert len(err.strip().splitlines()) == 1 and _runs(env, capsys, monkeypatch) == before


def test_a_generative_vlm_answers_each_frame_and_its_clip_is_the_vote(tmp_path: Path) -> None:
    from domainbench.records.config import CorruptionChoice, DomainConfig, RunConfig
    from domainbench.data.clip_samples import write_sample_clips
    from domainbench.data.clips import Sampling
    from domainbench.engine.clip_kind import load_clip_run, start_clip_run
    from domainbench.metrics.clips import vote
    from domainbench.store import open_store
    from tests.models.tiny_vlms import save_tiny_llava

    clips = write_sample_clips(tmp_path / "clips", per_class=1, frames=6, size=32, classes=2, seed=0)
    model = f"hf-vlm:{save_tiny_llava(tmp_path / 'llava')}"
    store = open_store(f"sqlite:///{tmp_path / 'db.sqlite'}")
    domain = DomainConfig(domain="d", corruptions=[CorruptionChoice(name="flicker", severities=[5])])
    rid = start_clip_run(store, domain, RunConfig(dataset=str(clips), image_size=32, workers=0, models=[model]),
                         Sampling(frames=3), "vlm-clips")
    result = load_clip_run(store, rid)
    assert [r["corruption"] for r in result.rows] == ["clean", "flicker"]
    for r in result.rows:
        assert r["clip_accuracy_mean"] is None and r["frames"] == 6  # no embedding: the vote only
        unit = result.units[f"{model}\t" + ("clean" if r["corruption"] == "clean" else "flicker:5")]
        votes = [vote(np.asarray(p)) for p in unit["preds"]]
        labels = [c["label"] for c in result.clips]
        assert r["clip_accuracy_vote"] == np.mean(np.asarray(votes) == np.asarray(labels))
    store.close()


def test_a_queued_still_image_run_of_temporal_corruptions_only_is_refused_when_a_worker_takes_it(tmp_path: Path) -> None:
    from domainbench.records.config import CorruptionChoice, DomainConfig, RunConfig
    from domainbench.engine.lifecycle import queue_run
    from domainbench.engine.runner import Engine
    from domainbench.errors import UserInputError
    from domainbench.store import open_store

    store = open_store(f"sqlite:///{tmp_path / 'db.sqlite'}")
    domain = DomainConfig(domain="d", corruptions=[CorruptionChoice(name="h264_compression", severities=[2])])
    run = queue_run(store, domain, RunConfig(limit=10, models=["embedded:fmnist-plain"]), "queued-still")
    with pytest.raises(UserInputError, match="'h264_compression' is temporal"):
        Engine(store).resume(run.run_id)
    assert not list(store.units.keys(run_id=run.run_id))
    store.close()


def test_the_plan_names_each_image_corruptions_mode_and_a_plan_without_modes_keeps_its_id() -> None:
    from domainbench.records.config import DomainConfig
    from domainbench.engine.clip_kind import clip_cells
    from domainbench.errors import UserInputError
    from domainbench.store.repositories import domain_id

    entries = [{"name": "gaussian_noise", "severities": [2], "mode": "static"}, {"name": "motion_blur", "severities": [3]},
               {"name": "flicker", "severities": [4]}]
    domain = DomainConfig.model_validate({"domain": "d", "corruptions": entries})
    assert [(c.corruption, c.severity, c.mode) for c in clip_cells(domain)] == [
        ("clean", 0, None), ("gaussian_noise", 2, "static"), ("motion_blur", 3, "independent"), ("flicker", 4, None)]
    # an unset mode is not written, so plans made before the field hash to the ids they were stored under
    plain = DomainConfig.model_validate({"domain": "d", "corruptions": entries[1:]})
    assert "mode" not in plain.model_dump(mode="json")["corruptions"][0]
    assert domain_id(plain) != domain_id(domain)
    with pytest.raises(UserInputError, match=r"'flicker' is temporal.*remove mode = 'static'"):
        clip_cells(DomainConfig.model_validate({"domain": "d", "corruptions": [entries[2] | {"mode": "static"}]}))
    with pytest.raises(ValueError, match="static"):
        DomainConfig.model_validate({"domain": "d", "corruptions": [entries[1] | {"mode": "sometimes"}]})

"""Clip runs go where a still run goes (issue 41): queued (``service.launch.enqueue_run``, the UI's launch) and taken
by a worker, started by ``domainbench.run`` and continued by ``domainbench.resume``; each stores exactly what the
CLI's ``domainbench run PLAN --dataset CLIPS --frames N`` stores. The embedded models on tiny clips."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from domainbench.data.clip_samples import write_sample_clips

MODEL = "embedded:fmnist-plain"
PLAN = ('domain = "dash-cam footage"\n[[corruptions]]\nname = "flicker"\nseverities = [4]\n'
        '[[corruptions]]\nname = "gaussian_noise"\nseverities = [3]\nmode = "static"\n')


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("clip_entry")
    write_sample_clips(root / "clips", per_class=1, frames=6, size=32, classes=2, seed=0)
    (root / "plan.toml").write_text(PLAN)
    (root / "run.toml").write_text("image_size = 32\nworkers = 0\n")
    return {"clips": root / "clips", "plan": root / "plan.toml", "run": root / "run.toml", "home": root / "home"}


@pytest.fixture(scope="module")
def cli_run(env: dict[str, Path]) -> str:
    """The reference: ``domainbench run PLAN --dataset CLIPS --frames 4`` through the real entry point."""
    from domainbench.app.cli import main

    mp = pytest.MonkeyPatch()
    try:
        mp.setenv("DOMAINBENCH_HOME", str(env["home"]))
        mp.setattr(sys, "argv", ["domainbench", "--quiet", "run", str(env["plan"]), "--dataset", str(env["clips"]),
                                 "--frames", "4", "--models", MODEL, "--run-config", str(env["run"]), "--run-id", "cli"])
        try:
            main()
        except SystemExit as e:
            assert not e.code
    finally:
        mp.undo()
    return "cli"


def _store(env: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> Any:
    from domainbench.store import open_store

    monkeypatch.setenv("DOMAINBENCH_HOME", str(env["home"]))
    return open_store()


def _same_results(store: Any, run_id: str, reference: str) -> None:
    from domainbench.engine.clip_kind import load_clip_run

    a, b = load_clip_run(store, reference), load_clip_run(store, run_id)
    assert len(a.units) == 3 and len(a.rows) == 3  # one model × (clean, flicker:4, gaussian_noise:3/static)
    assert b.units == a.units and b.rows == a.rows and b.paired == a.paired and b.clips == a.clips
    assert b.run.status == "done" and b.run.dataset == a.run.dataset and b.run.config == a.run.config


def test_a_queued_clip_run_shows_its_kind_and_a_worker_stores_what_the_cli_stores(
        env: dict[str, Path], cli_run: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from domainbench.app.worker import Worker
    from domainbench.records.config import RunConfig, load_domain
    from domainbench.frontend import data, launching

    store = _store(env, monkeypatch)
    domain = load_domain(env["plan"])
    cfg = RunConfig(models=[MODEL], dataset=str(env["clips"]), image_size=32, workers=0)
    assert launching.is_clip_folder(str(env["clips"])) and not launching.is_clip_folder("sample")
    queued = launching.enqueue(store, domain, cfg, frames=4)  # the New domain page's launch
    assert queued.status == "queued" and queued.kind == "clip" and queued.kind_settings == {
        "sampling": {"frames": 4, "fps": None, "max_frames": None, "seed": 0}}
    frame = data.runs_frame(store)
    assert frame.set_index("run").loc[queued.run_id, "kind"] == "clips"
    said: list[str] = []
    worker = Worker(store, say=said.append)
    assert worker.run_one() and worker.executed == [queued.run_id]
    assert any("done: 3 units computed, 0 already stored" in line for line in said), said
    _same_results(store, queued.run_id, cli_run)
    assert store.get_run(queued.run_id).environment["executor"] == "local"


def test_a_queued_clip_run_with_a_bad_option_is_refused_before_anything_is_stored(
        env: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    from domainbench.data.clips import Sampling
    from domainbench.errors import UserInputError
    from domainbench.records.config import RunConfig, load_domain
    from domainbench.service.launch import enqueue_run

    store = _store(env, monkeypatch)
    before = [r.run_id for r in store.list_runs()]
    domain = load_domain(env["plan"])
    cfg = RunConfig(models=[MODEL], dataset=str(env["clips"]), image_size=32, workers=0)
    with pytest.raises(UserInputError, match="--frames 0"):
        enqueue_run(store, domain, cfg, sampling=Sampling(frames=0))
    with pytest.raises(UserInputError, match="--limit: clip runs"):
        enqueue_run(store, domain, cfg.model_copy(update={"limit": 5}))
    with pytest.raises(UserInputError, match="unknown model 'embedded:nope'"):
        enqueue_run(store, domain, cfg.model_copy(update={"models": ["embedded:nope"]}))
    assert [r.run_id for r in store.list_runs()] == before


def test_the_python_api_runs_a_clip_dataset_and_resumes_a_clip_run(
        env: dict[str, Path], cli_run: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import domainbench
    from domainbench.engine import clip_kind

    store = _store(env, monkeypatch)
    run = domainbench.run(env["plan"], MODEL, dataset=env["clips"], frames=4, image_size=32, workers=0, store=store,
                          run_id="api")
    assert run.status == "done" and run.stats is not None and run.stats.computed_units == 3
    _same_results(store, "api", cli_run)
    assert run.clips.rows == clip_kind.load_clip_run(store, cli_run).rows  # the typed result

    real, calls = clip_kind.score_cell, []

    def fails_on_the_second(ms: Any, frames: Any) -> Any:
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("the second unit fails")
        return real(ms, frames)

    monkeypatch.setattr(clip_kind, "score_cell", fails_on_the_second)
    with pytest.raises(RuntimeError, match="second unit"):
        domainbench.run(env["plan"], MODEL, dataset=env["clips"], frames=4, image_size=32, workers=0, store=store,
                        run_id="api-resumed")
    monkeypatch.setattr(clip_kind, "score_cell", real)
    assert domainbench.load_run("api-resumed", store=store).status == "failed"
    kept = clip_kind.stored_units(store, store.get_run("api-resumed"))
    assert len(kept) == 1
    from domainbench.frontend import data

    row = data.runs_frame(store).set_index("run").loc["api-resumed"]
    assert row["kind"] == "clips" and row["units"] == "1 of 3 units" and row["progress"] == 1 / 3
    resumed = domainbench.resume("api-resumed", store=store)
    assert resumed.status == "done" and resumed.stats is not None
    assert (resumed.stats.computed_units, resumed.stats.skipped_units) == (2, 1)
    _same_results(store, "api-resumed", cli_run)
    assert {k: resumed.clips.units[k] for k in kept} == kept


def test_each_unit_is_its_own_document_and_a_run_stored_with_its_units_on_the_record_reads_and_resumes_unchanged(
        env: dict[str, Path], cli_run: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import domainbench
    from domainbench.engine.clip_kind import load_clip_run

    store = _store(env, monkeypatch)
    ref = load_clip_run(store, cli_run)
    run = store.get_run(cli_run)
    # the run record stays the same size however many units the run has: each unit is a clip_units document
    assert "units" not in run.kind_settings
    docs = store.clip_units(cli_run)
    assert sorted((d.model, d.cell) for d in docs) == sorted((u["model"], u["cell"]) for u in ref.units.values())
    assert all(d.preds == ref.units[f"{d.model}\t{d.cell}"]["preds"] and len(d.preds) == 2 for d in docs)

    # a store written before clip_units: every unit on the run record, no documents
    older = {**run.kind_settings, "units": ref.units}
    store.put_run(run.model_copy(update={"run_id": "older", "kind_settings": older}))
    got = load_clip_run(store, "older")
    assert got.units == ref.units and got.rows == ref.rows and got.paired == ref.paired
    # such a run stopped after two of its three units resumes to the same results, its units kept on its record
    stopped = {k: v for k, v in run.kind_settings.items() if k not in ("rows", "paired")}
    stopped["units"] = dict(list(ref.units.items())[:2])
    store.put_run(run.model_copy(update={"run_id": "older-stopped", "status": "failed", "kind_settings": stopped}))
    resumed = domainbench.resume("older-stopped", store=store)
    assert resumed.stats is not None and (resumed.stats.computed_units, resumed.stats.skipped_units) == (1, 2)
    got = load_clip_run(store, "older-stopped")
    assert got.units == ref.units and got.rows == ref.rows and got.paired == ref.paired and got.run.status == "done"
    assert store.get_run("older-stopped").kind_settings["units"] == ref.units and not store.clip_units("older-stopped")

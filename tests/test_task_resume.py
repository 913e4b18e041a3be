"""Task runs store each (model, cell) as it finishes (issue 38): a run killed part-way keeps its units, and
`--resume` (or a worker's claim of a queued task run) computes only the missing ones, giving exactly the
records of an uninterrupted run; on SQLite and on MongoDB (mongomock)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mongomock
import pytest

from domainbench.records.config import CorruptionChoice, DomainConfig, RunConfig
from domainbench.data.task_samples import write_sample_manifests
from domainbench.engine import task_eval
from domainbench.engine.task_kind import load_task_run, start_task_run
from domainbench.errors import UserInputError
from domainbench.store import open_store
from domainbench.store.mongo_store import MongoStore
from tests.cli_runner import run_cli
from tests.models.tiny_vlms import save_tiny_llava

DOMAIN = DomainConfig(domain="dim and noisy", corruptions=[
    CorruptionChoice(name="gaussian_noise", severities=[3, 5]), CorruptionChoice(name="brightness", severities=[5])])
EMBEDDED = ["embedded:fmnist-plain", "embedded:fmnist-augmented"]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("task_resume")
    vqa, retrieval = write_sample_manifests(root / "m", images=5, seed=1)
    return {"vqa": vqa, "retrieval": retrieval, "llava": f"hf-vlm:{save_tiny_llava(root / 'llava')}"}


def _cfg(inputs: dict[str, Any], task: str) -> RunConfig:
    models = [inputs["llava"]] if task == "vqa" else EMBEDDED
    return RunConfig(task=task, dataset=str(inputs[task]), models=models, image_size=32,
                     **({"max_new_tokens": 4} if task == "vqa" else {}))


def _store(backend: str, root: Path) -> Any:
    if backend == "sqlite":
        return open_store(home=root)
    return MongoStore("mongodb://localhost/taskresume", client=mongomock.MongoClient())


class Killed(KeyboardInterrupt):
    """Ctrl-C in the middle of a run, after some units were stored."""


def _kill_after(monkeypatch: pytest.MonkeyPatch, units: int) -> list[int]:
    calls: list[int] = []
    real = task_eval.evaluate_cell

    def dying(*args: Any, **kwargs: Any) -> dict[str, Any]:
        if len(calls) == units:
            raise Killed()
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(task_eval, "evaluate_cell", dying)
    return calls


def _records(result: Any) -> tuple[Any, ...]:
    return result.rows, result.paired, result.predictions


@pytest.mark.parametrize("task", ["retrieval", "vqa"])
@pytest.mark.parametrize("backend", ["sqlite", "mongomock"])
def test_a_killed_task_run_resumes_to_the_uninterrupted_records(
        inputs: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend: str, task: str) -> None:
    cfg = _cfg(inputs, task)
    whole = open_store(home=tmp_path / "whole")
    start_task_run(whole, DOMAIN, cfg, run_id="whole")
    expected = load_task_run(whole, "whole")
    units = 4 * len(cfg.models)  # clean + 3 corruption cells
    assert len(whole.task_units("whole")) == units

    store = _store(backend, tmp_path / "killed")
    kill_at = 3 if task == "retrieval" else 2  # mid-cell for two models; after the clean cell for one
    with monkeypatch.context() as m:
        _kill_after(m, kill_at)
        with pytest.raises(Killed):
            start_task_run(store, DOMAIN, cfg, run_id="r")
    run = store.get_run("r")
    assert run is not None and run.status == "interrupted" and "rows" not in (run.kind_settings or {})
    assert len(store.task_units("r")) == kill_at
    with pytest.raises(UserInputError, match="resume it with `domainbench run --resume r`"):
        load_task_run(store, "r")

    calls = _kill_after(monkeypatch, 10**6)  # counts the units the resume computes
    import domainbench

    done = domainbench.resume("r", store=store)
    assert done.stats is not None and (done.stats.computed_units, done.stats.skipped_units) == (units - kill_at, kill_at)
    assert len(calls) == units - kill_at
    resumed = load_task_run(store, "r")
    assert resumed.run.status == "done" and resumed.run.resumed_at is not None
    assert _records(resumed) == _records(expected)
    # a finished run resumed again computes nothing and stays as it was
    calls.clear()
    domainbench.resume("r", store=store)
    assert calls == [] and _records(load_task_run(store, "r")) == _records(expected)


def test_confidence_is_recomputed_from_the_stored_units(inputs: dict[str, Any], tmp_path: Path) -> None:
    store = open_store(home=tmp_path)
    start_task_run(store, DOMAIN, _cfg(inputs, "retrieval"), run_id="r")
    at95, at80 = load_task_run(store, "r"), load_task_run(store, "r", 0.80)
    direct = task_eval.evaluate_task(DOMAIN, "retrieval", inputs["retrieval"], EMBEDDED, image_size=32,
                                     confidence=0.80)
    assert at80.rows == direct.rows and at80.paired == direct.paired
    for r95, r80 in zip(at95.rows, at80.rows):
        m = "image_retrieval_recall@1"
        assert r95[m] == r80[m]
        assert r95[f"{m}_ci_low"] <= r80[f"{m}_ci_low"] <= r80[f"{m}_ci_high"] <= r95[f"{m}_ci_high"]
    # the 80 % intervals are narrower somewhere (not the 95 % ones read back)
    assert any(r95[f"{m}_ci_low"] < r80[f"{m}_ci_low"] for r95, r80 in zip(at95.rows, at80.rows)
               for m in at95.metrics if r95[f"{m}_ci_low"] is not None)


def test_resume_on_ray_is_refused_in_one_line(inputs: dict[str, Any], tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOMAINBENCH_HOME", str(tmp_path))
    store = open_store(home=tmp_path)
    with monkeypatch.context() as m:
        _kill_after(m, 1)
        with pytest.raises(Killed):
            start_task_run(store, DOMAIN, _cfg(inputs, "retrieval"), run_id="r")
    code, _, err = run_cli(["run", "--resume", "r", "--executor", "ray"], capsys, monkeypatch)
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith("error: --executor ray: retrieval runs execute on local; choose --executor local"), err
    assert len(store.task_units("r")) == 1 and store.get_run("r").status == "interrupted"  # type: ignore[union-attr]
    code, out, err = run_cli(["run", "--resume", "r"], capsys, monkeypatch, quiet=False)
    assert code == 0, err
    assert "7 units computed, 1 already stored" in out + err and "iR@1%" in out


def test_the_worker_runs_a_queued_task_run(inputs: dict[str, Any], tmp_path: Path) -> None:
    from domainbench.service.launch import enqueue_run
    from domainbench.app.worker import Worker

    store = open_store(home=tmp_path)
    cfg = _cfg(inputs, "retrieval").model_copy(update={"dataset": str(inputs["retrieval"])})
    queued = enqueue_run(store, DOMAIN, cfg, run_id="q")
    assert queued.status == "queued" and queued.kind == "retrieval"
    bad = cfg.model_copy(update={"models": [inputs["llava"]]})
    with pytest.raises(UserInputError, match="is a generative model"):
        enqueue_run(store, DOMAIN, bad, run_id="bad")
    assert store.get_run("bad") is None
    assert Worker(store, name="w", say=lambda _: None).run_one()
    reference = open_store(home=tmp_path / "ref")
    start_task_run(reference, DOMAIN, cfg, run_id="q")
    got = load_task_run(store, "q")
    assert got.run.status == "done" and got.run.dataset is not None
    assert _records(got) == _records(load_task_run(reference, "q"))

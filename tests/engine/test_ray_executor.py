"""The Ray executor against the local one: the same stored units, stability and threat records
and report on a local Ray instance with 2 CPUs, and a run whose model actor is killed part-way
that finishes after a resume with the same metrics and no duplicate units."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from domainbench.records.config import CorruptionChoice, DomainConfig, RunConfig
from domainbench.engine.executors import ExecutorOptions, make_engine
from domainbench.engine.reports import build_report
from domainbench.engine.runner import Engine
from domainbench.store import Store, open_store

ray = pytest.importorskip("ray")

from domainbench.engine.ray_executor import RayEngine, WorkerLostError  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
DOMAIN = DomainConfig(
    domain="ray test",
    corruptions=[
        CorruptionChoice(name="gaussian_noise", severities=[1, 4], reason="sensor"),
        CorruptionChoice(name="brightness", severities=[3], reason="exposure"),
    ],
)
# the Ray workers import the fake model backend the way a plugin would be imported on a cluster
RAY = ExecutorOptions(kind="ray", modules=["fake_models"])
# one model per actor: two actors share each corrupted shard (half a CPU each leaves one for corruption)
RAY_GROUPS = ExecutorOptions(kind="ray", modules=["fake_models"], models_per_actor=1, cpus_per_actor=0.5)


def cfg(**kw: object) -> RunConfig:
    base = dict(models=["fake:a", "fake:b"], limit=50, shard_size=20, workers=0, stability_points=2,
                stability_images=6, threat_anchors=3)
    return RunConfig(**(base | kw))  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def local_ray() -> Iterator[Any]:
    """One local Ray instance with 2 CPU workers for the module (starting one takes seconds)."""
    before = os.environ.get("PYTHONPATH")
    path = os.pathsep.join([str(HERE), str(ROOT), before or ""]).rstrip(os.pathsep)
    os.environ["PYTHONPATH"] = path  # the raylet and its workers inherit it: fake_models is importable
    try:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR",
                 runtime_env={"env_vars": {"PYTHONPATH": path, "NO_ALBUMENTATIONS_UPDATE": "1", "HF_HUB_OFFLINE": "1"}})
        yield ray
        ray.shutdown()
    finally:
        # later tests must not see the checkout on PYTHONPATH (a wheel install would find it "already installed")
        if before is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = before


@pytest.fixture
def one_thread() -> Iterator[None]:
    """Local runs with the actor's thread counts (Ray gives a 1-CPU actor OMP_NUM_THREADS=1).

    float32 matrix products (torch and numpy's BLAS) are summed in a different order with a
    different thread count, so embeddings, stability radii and the different-class threat
    would differ in the 8th digit; with the same arithmetic the two executors agree exactly.
    """
    from threadpoolctl import threadpool_limits

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    with threadpool_limits(1):
        yield
    torch.set_num_threads(threads)


def _units(store: Store, run_id: str) -> dict[tuple[Any, ...], tuple[Any, ...]]:
    return {(u.model, u.corruption, u.severity, u.shard): (u.n, u.preds, u.indices, u.confusion, u.flips, u.params,
                                                          u.labels, u.seed)
            for u in store.units(run_id)}


def _stability(store: Store, run_id: str) -> dict[tuple[Any, ...], tuple[Any, ...]]:
    return {(d.model, d.corruption, d.shard): (d.indices, d.points, d.grid, d.divergence_radius, d.cosine, d.euclidean)
            for d in store.find("stability", run_id=run_id)}


def _threat(store: Store, run_id: str) -> dict[tuple[Any, ...], tuple[Any, ...]]:
    return {(d.corruption, d.severity, d.shard): (d.n, d.sum, d.sum_sq, d.n_above_1, d.max)
            for d in store.find("threat", run_id=run_id)}


def _numbers(store: Store, run_id: str) -> dict[str, Any]:
    report = build_report(store, run_id)
    return {"models": [m.model_dump() for m in report.models], "table": [r for r in report.table()],
            "threat": [t.model_dump() for t in report.threat], "link": [m.model_dump() for m in report.stability_link],
            "baseline": report.baseline, "different_class_threat": report.different_class_threat}


def test_ray_run_stores_exactly_what_the_local_run_stores(local_ray: Any, home: Path, one_thread: None) -> None:
    store = open_store()
    local = Engine(store).start(DOMAIN, cfg())
    engine = make_engine(store, options=RAY_GROUPS)
    assert isinstance(engine, RayEngine)
    remote = engine.start(DOMAIN, cfg())
    assert engine.stats.computed_units == 3 * 4 * 2  # shards × cells (clean + 3) × models
    a, b = _units(store, local), _units(store, remote)
    assert len(a) == 24 and a == b
    assert _stability(store, local) == _stability(store, remote) and len(_stability(store, local)) == 3 * 2 * 2
    assert _threat(store, local) == _threat(store, remote) and len(_threat(store, local)) == 3 * 3
    assert _numbers(store, local) == _numbers(store, remote)
    run = store.get_run(remote)
    assert run.status == "done" and run.environment["executor"] == "ray" and run.environment["actors"] == 2
    assert store.get_report(remote) is not None


def test_killed_actor_resumes_to_the_same_metrics_without_duplicates(local_ray: Any, home: Path, one_thread: None) -> None:
    store = open_store()
    slow = cfg(models=["fake:slow", "fake:b"], stability=False, shard_size=10)  # 5 shards × 4 cells × 2 models
    engine = make_engine(store, options=RAY)
    assert isinstance(engine, RayEngine)
    failure: list[BaseException] = []

    def go() -> None:
        try:
            engine.start(DOMAIN, slow, run_id="killed")
        except BaseException as e:  # noqa: BLE001 - the test inspects it
            failure.append(e)

    thread = threading.Thread(target=go)
    thread.start()
    deadline = time.time() + 240
    while time.time() < deadline and len(store.keys("units", run_id="killed")) < 6:
        time.sleep(0.05)
    stored_at_kill = len(store.keys("units", run_id="killed"))
    assert 6 <= stored_at_kill < 40, "the run finished before it could be killed"
    os.kill(engine.actor_pids[0], signal.SIGKILL)  # the model actor's process, as a lost node would lose it
    thread.join(240)
    assert not thread.is_alive()
    assert len(failure) == 1 and isinstance(failure[0], WorkerLostError), failure
    assert "domainbench run --resume killed" in str(failure[0]) and "\n" not in str(failure[0])
    assert store.get_run("killed").status == "failed"
    before = {k: u.computed_at for k, u in ((_key(u), u) for u in store.units("killed"))}

    resumed = make_engine(store, options=RAY)
    assert resumed.resume("killed") == "killed"
    assert resumed.stats.skipped_units == len(before) >= stored_at_kill
    assert resumed.stats.computed_units == 40 - len(before)
    units = store.units("killed")
    assert len(units) == len({_key(u) for u in units}) == 40  # no duplicates, nothing missing
    assert all(before[_key(u)] == u.computed_at for u in units if _key(u) in before)  # stored units untouched

    reference = Engine(store).start(DOMAIN, slow)  # uninterrupted, local
    assert _units(store, "killed") == _units(store, reference)
    assert _threat(store, "killed") == _threat(store, reference)
    assert _numbers(store, "killed") == _numbers(store, reference)
    assert store.get_run("killed").status == "done"


def _key(u: Any) -> tuple[Any, ...]:
    return (u.model, u.corruption, u.severity, u.shard)


def test_the_local_executor_never_imports_ray(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # any `import ray` now fails
    store = open_store()
    run_id = make_engine(store).start(DOMAIN, cfg(models=["fake:a"], limit=10, stability=False, threat=False))
    assert store.get_run(run_id).status == "done"


def test_cli_ui_launch_worker_and_ray_runs_of_one_plan_store_identical_records(local_ray: Any, home: Path, tmp_path: Path,
                                                                               one_thread: None) -> None:
    """One run lifecycle: the CLI, the UI's launch taken by a worker, and the Ray executor store the same records."""
    from typer.testing import CliRunner

    from domainbench.app.cli import app
    from domainbench.records.config import save
    from domainbench.frontend import launching
    from domainbench.app.worker import Worker

    store = open_store()
    plan = cfg(limit=30, shard_size=10)
    save(DOMAIN, tmp_path / "domain.toml")
    save(plan, tmp_path / "run.toml")
    out = CliRunner().invoke(app, ["--quiet", "run", str(tmp_path / "domain.toml"), "--run-config", str(tmp_path / "run.toml"),
                                   "--run-id", "cli"])
    assert out.exit_code == 0, out.output
    launched = launching.enqueue(store, DOMAIN, plan).run_id
    assert store.get_run(launched).status == "queued"
    worker = Worker(store, say=lambda _: None)
    assert worker.run_one() and worker.executed == [launched]
    on_ray = make_engine(store, options=RAY_GROUPS).start(DOMAIN, plan)

    runs = ["cli", launched, on_ray]
    assert [store.get_run(r).status for r in runs] == ["done"] * 3
    assert len(_units(store, "cli")) == 3 * 4 * 2  # shards × cells (clean + 3) × models
    for other in runs[1:]:
        assert _units(store, other) == _units(store, "cli")
        assert _stability(store, other) == _stability(store, "cli")
        assert _threat(store, other) == _threat(store, "cli")
        assert _numbers(store, other) == _numbers(store, "cli")
    assert store.get_run(on_ray).environment["executor"] == "ray"


PLAIN, AUGMENTED = "embedded:fmnist-plain", "embedded:fmnist-augmented"
FMR_DOMAIN = DomainConfig(domain="ray fmr test", corruptions=[CorruptionChoice(name=n, reason="r")
                                                            for n in ("gaussian_noise", "contrast", "brightness")])


def _fmr(store: Store, run_id: str) -> dict[tuple[Any, ...], tuple[Any, ...]]:
    return {(r.model, r.shard): (r.search, r.seed, r.indices, r.labels, r.clean_preds, r.final_preds, r.validated, r.steps,
                                 r.oracle_clean, r.oracle_final, r.ops, r.images, r.originals)
            for r in store.fmr(run_id)}


def _fmr_numbers(store: Store, run_id: str) -> dict[str, Any]:
    report = build_report(store, run_id)
    assert report.fmr is not None
    return {"fmr": report.fmr.model_dump(), "models": [m.model_dump() for m in report.models]}


def test_cli_ui_launch_worker_and_ray_fmr_runs_of_one_plan_store_identical_records(local_ray: Any, home: Path,
                                                                                   tmp_path: Path, one_thread: None) -> None:
    """FMR is a kind of run of the one lifecycle: `domainbench fmr`, a queued FMR run taken by a worker,
    and the Ray executor (one actor call per (tested model, shard)) store the same records and report."""
    from typer.testing import CliRunner

    from domainbench.app.cli import app
    from domainbench.records.config import save
    from domainbench.frontend import launching
    from domainbench.app.worker import Worker

    store = open_store()
    save(FMR_DOMAIN, tmp_path / "domain.toml")
    # the embedded models, not the fakes: an oracle of fakes rarely agrees with a label, so nothing would be perturbed
    zoo = f"{PLAIN},{AUGMENTED}"
    out = CliRunner().invoke(app, ["--quiet", "fmr", str(tmp_path / "domain.toml"), "--models", zoo, "--oracle", zoo,
                                   "--budget", "2", "--candidates", "2", "--limit", "12", "--shard-size", "5",
                                   "--device", "cpu", "--run-id", "cli-fmr"])
    assert out.exit_code == 0, out.output
    cli = store.get_run("cli-fmr")
    plan, settings = cli.config, cli.fmr
    assert settings is not None and settings.oracle == [PLAIN, AUGMENTED]

    launched = launching.enqueue(store, FMR_DOMAIN, plan, fmr=settings).run_id
    assert store.get_run(launched).status == "queued" and store.get_run(launched).fmr == settings
    worker = Worker(store, say=lambda _: None)
    assert worker.run_one() and worker.executed == [launched]
    engine = make_engine(store, options=RAY_GROUPS)  # one tested model per actor, the oracle on each
    on_ray = engine.start(FMR_DOMAIN, plan, fmr=settings)
    assert engine.stats.computed_units == 3 * 2  # shards × tested models, each one actor call

    runs = ["cli-fmr", launched, on_ray]
    assert [store.get_run(r).status for r in runs] == ["done"] * 3
    reference = _fmr(store, "cli-fmr")
    assert len(reference) == 3 * 2 and any(any(r[7]) for r in reference.values())  # some image was perturbed
    for other in runs[1:]:
        assert _fmr(store, other) == reference
        assert _units(store, other) == _units(store, "cli-fmr")
        assert _fmr_numbers(store, other) == _fmr_numbers(store, "cli-fmr")
    ray_run = store.get_run(on_ray)
    assert ray_run.environment["executor"] == "ray" and ray_run.environment["actors"] == 2
    assert store.get_run(launched).dataset == cli.dataset  # the worker pinned the dataset, as a CLI start does


def test_ray_actors_read_classifiers_from_the_stores_text_embedding_cache(local_ray: Any, home: Path) -> None:
    """A cached entry is used on the actors, corruption and FMR alike: a planted classifier whose row 0 points
    along the images' mean embedding and whose other rows point against it makes every prediction class 0,
    which the real prompts never do. (Identical rows would tie every class, and which column of a float32
    matrix product rounds highest differs between CPUs: an AVX-512 EPYC gave class 8 for some images.)"""
    from domainbench.records.config import FmrSettings
    from domainbench.data import open_dataset
    from domainbench.engine.text_cache import classifier_key
    from domainbench.models import build_classifier, create_model
    from domainbench.models.base import DEFAULT_TEMPLATES
    from domainbench.records.packed import PackedArray
    from domainbench.store.records import TextEmbeddingRecord

    store = open_store()
    classes = open_dataset("sample").classes
    model = create_model("fake:a", "cpu")
    real = build_classifier(model, classes, list(DEFAULT_TEMPLATES)).numpy()
    images = open_dataset("sample").subset(20).load(np.arange(20)).images
    with torch.inference_mode():
        emb = model.encode_image(model.preprocess(images)).numpy()
    toward = emb.mean(axis=0) / np.linalg.norm(emb.mean(axis=0))
    assert (emb @ toward).min() > 0.1 * np.linalg.norm(emb, axis=1).max()  # every image is clearly on class 0's side
    planted = [PackedArray((toward if k == 0 else -toward).astype(real.dtype)) for k in range(len(classes))]
    store.caches.put_text_embedding(TextEmbeddingRecord(cache_key=classifier_key(model, classes, list(DEFAULT_TEMPLATES)),
                                                        model=model.name, n_classes=len(classes), n_templates=5,
                                                        rows=planted))
    plain = cfg(models=["fake:a"], limit=20, stability=False, threat=False)
    run = make_engine(store, options=RAY).start(DOMAIN, plain)
    assert {p for u in store.units(run) for p in u.preds} == {0}
    fmr = make_engine(store, options=RAY).start(FMR_DOMAIN, plain, fmr=FmrSettings(oracle=["fake:b", "fake:c"], budget=1,
                                                                                     candidates=1, shard_size=10))
    assert {p for r in store.fmr(fmr) for p in r.clean_preds} == {0}
    assert len(store.caches.text_embeddings()) == 3  # fake:a planted, the oracle's two built once on an actor
    assert len(set((emb @ real.T).argmax(axis=1).tolist())) > 1  # the real classifier predicts several classes


def test_a_worker_on_ray_finishes_a_queued_fmr_run_through_fenced_actors(local_ray: Any, home: Path) -> None:
    """The worker's lease fence reaches the FMR actors' writes (their store is the worker's fenced view)."""
    from domainbench.records.config import FmrSettings
    from domainbench.frontend import launching
    from domainbench.app.worker import Worker

    store = open_store()
    plan = cfg(models=["fake:a"], limit=12, stability=False, threat=False)
    settings = FmrSettings(oracle=["fake:b", "fake:c"], budget=1, candidates=1, shard_size=4)
    queued = launching.enqueue(store, FMR_DOMAIN, plan, fmr=settings).run_id
    worker = Worker(store, say=lambda _: None, executor=RAY)
    assert worker.run_one() and worker.executed == [queued]
    run = store.get_run(queued)
    assert run.status == "done" and run.environment["executor"] == "ray" and run.lease_until is None
    assert sorted(r.shard for r in store.fmr(queued)) == [0, 1, 2]
    assert len(store.units(queued)) == 3 and store.get_report(queued).fmr is not None


def test_a_killed_fmr_actor_resumes_to_the_local_runs_records(local_ray: Any, home: Path, one_thread: None) -> None:
    from domainbench.records.config import FmrSettings

    store = open_store()
    plan = cfg(models=["fake:slow"], limit=20, stability=False, threat=False)  # 5 shards, each a slow search
    settings = FmrSettings(oracle=["fake:b", "fake:c"], budget=2, candidates=2, shard_size=4)
    engine = make_engine(store, options=RAY)
    failure: list[BaseException] = []

    def go() -> None:
        try:
            engine.start(FMR_DOMAIN, plan, run_id="fmr-killed", fmr=settings)
        except BaseException as e:  # noqa: BLE001 - the test inspects it
            failure.append(e)

    thread = threading.Thread(target=go)
    thread.start()
    deadline = time.time() + 240
    while time.time() < deadline and not store.keys("fmr", run_id="fmr-killed"):
        time.sleep(0.05)
    assert 1 <= len(store.keys("fmr", run_id="fmr-killed")) < 5, "the run finished before it could be killed"
    os.kill(engine.actor_pids[0], signal.SIGKILL)
    thread.join(240)
    assert not thread.is_alive()
    assert len(failure) == 1 and isinstance(failure[0], WorkerLostError), failure
    assert "domainbench fmr --resume fmr-killed" in str(failure[0])
    before = {r.shard: r for r in store.fmr("fmr-killed")}

    resumed = make_engine(store, options=RAY)
    assert resumed.resume("fmr-killed") == "fmr-killed"
    assert resumed.stats.skipped_units == len(before) and resumed.stats.computed_units == 5 - len(before)
    after = {r.shard: r for r in store.fmr("fmr-killed")}
    assert sorted(after) == [0, 1, 2, 3, 4] and all(after[s] == before[s] for s in before)
    reference = Engine(store).start(FMR_DOMAIN, plan, fmr=settings)  # uninterrupted, local
    assert _fmr(store, "fmr-killed") == _fmr(store, reference)
    assert store.get_run("fmr-killed").status == "done"


def test_the_ray_driver_decodes_through_the_input_pipelines_workers_to_the_local_runs_records(
        local_ray: Any, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, one_thread: None) -> None:
    """On a JPEG folder, the driver of a corruption run and of an FMR run takes its shards from the input
    pipeline's worker processes (``--workers 2``; the driver itself never decodes a file) and the actors
    store what the local executor, decoding in this process, stores."""
    from test_input_pipeline import SIZE, _jpeg_folder

    from domainbench.records.config import FmrSettings
    from domainbench.data import Dataset

    _jpeg_folder(tmp_path / "ds", broken=False)
    plan = cfg(models=["fake:a"], limit=None, dataset=str(tmp_path / "ds"), image_size=SIZE, shard_size=5,
               stability=False, threat=False)
    settings = FmrSettings(oracle=["fake:b", "fake:c"], budget=1, candidates=2, shard_size=5)
    store = open_store()
    local = Engine(store).start(DOMAIN, plan), Engine(store).start(FMR_DOMAIN, plan, fmr=settings)

    def decoded_inline(self: Dataset, indices: Any) -> Any:
        raise AssertionError(f"the driver decoded images {list(indices)} itself")

    monkeypatch.setattr(Dataset, "load", decoded_inline)  # this process only: the actors and workers import their own
    pooled = plan.model_copy(update={"workers": 2})
    on_ray = make_engine(store, options=RAY).start(DOMAIN, pooled)
    fmr_on_ray = make_engine(store, options=RAY).start(FMR_DOMAIN, pooled, fmr=settings)
    assert _units(store, on_ray) == _units(store, local[0]) and len(_units(store, on_ray)) == 3 * 4
    assert _fmr(store, fmr_on_ray) == _fmr(store, local[1]) and len(_fmr(store, fmr_on_ray)) == 3
    assert _units(store, fmr_on_ray) == _units(store, local[1])


def test_ray_scores_real_shift_cells_as_the_local_executor_does(local_ray: Any, home: Path, tmp_path: Path,
                                                                one_thread: None) -> None:
    # paired, labelled shift: flips against the stored clean pass, SSIM/PSNR and embedding stability; with one
    # model per actor each actor group scores the shift with its own models
    from domainbench.records.config import RealShift
    from tests.engine.test_shift_cells import N, _inverted_sample

    _inverted_sample(tmp_path / "inv", class_folders=True)
    domain = DOMAIN.model_copy(update={"shift": [RealShift(name="inv", path=str(tmp_path / "inv"))]})
    run_cfg = cfg(limit=N, shard_size=10, threat=False)
    store = open_store()
    local = Engine(store).start(domain, run_cfg)
    engine = make_engine(store, options=RAY_GROUPS)
    remote = engine.start(domain, run_cfg)
    a, b = _units(store, local), _units(store, remote)
    shift_units = {k: v for k, v in a.items() if k[1] == "shift:inv"}
    assert len(shift_units) == 3 * 2 and a == b  # 3 shards × 2 models, and every other unit the same
    assert engine.stats.computed_units == len(a)
    assert all(v[4] > 0 for v in shift_units.values())  # inverted images flip predictions: the pairing held
    stab = {k: v for k, v in _stability(store, local).items() if k[1] == "shift:inv"}
    assert len(stab) == 3 * 2 and _stability(store, local) == _stability(store, remote)
    damage = {(u.model, u.shard): u.damage for u in store.units(local, corruption="shift:inv")}
    assert all(d is not None for d in damage.values())
    assert damage == {(u.model, u.shard): u.damage for u in store.units(remote, corruption="shift:inv")}
    assert _numbers(store, local) == _numbers(store, remote)
    assert store.get_run(remote).dataset.shifts.keys() == {"inv"}


def test_an_adaptive_ray_run_stops_the_cells_the_local_run_stops(local_ray: Any, home: Path, one_thread: None) -> None:
    # rounds go one at a time on Ray: the cells still active are those the local executor would score
    run_cfg = cfg(limit=80, shard_size=10, stability=False, threat=False, adaptive=True, target_width=0.45)
    store = open_store()
    local = Engine(store).start(DOMAIN, run_cfg)
    remote = make_engine(store, options=RAY_GROUPS).start(DOMAIN, run_cfg)
    a, b = _units(store, local), _units(store, remote)
    assert a == b
    per_cell: dict[tuple[str, int], int] = {}
    for model, corruption, severity, _ in a:
        per_cell[(corruption, severity)] = per_cell.get((corruption, severity), 0) + (model == "fake:a")
    # every cell settled before the last of the 8 rounds, and the run stopped there on both executors
    assert set(per_cell) == {("clean", 0), ("gaussian_noise", 1), ("gaussian_noise", 4), ("brightness", 3)}
    assert max(per_cell.values()) < 8
    assert _numbers(store, local) == _numbers(store, remote)


CLIP_DOMAIN = DomainConfig(domain="clips on ray", corruptions=[
    CorruptionChoice(name="flicker", severities=[4], reason="mains lamps"),
    CorruptionChoice(name="gaussian_noise", severities=[3], reason="sensor"),
])


def test_a_clip_run_on_ray_stores_exactly_the_units_of_the_local_run_and_a_local_run_resumes_on_ray(
        local_ray: Any, home: Path, tmp_path: Path, one_thread: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Clip runs (engine.clip_kind) on Ray: one corruption task per cell, one actor call per (model, cell), the same
    units, rows and verdicts as the local executor; a local run that failed part-way resumes on Ray (Engine.resume,
    as a worker's claim does) to the same units without recomputing the stored ones."""
    from domainbench.data.clip_samples import write_sample_clips
    from domainbench.data.clips import Sampling
    from domainbench.engine import clip_kind
    from domainbench.engine.clip_kind import load_clip_run, start_clip_run

    clips = write_sample_clips(tmp_path / "clips", per_class=1, frames=6, size=32, classes=2, seed=0)
    plan = RunConfig(dataset=str(clips), image_size=32, workers=0, models=["fake:a", "fake:b"])
    store = open_store()
    local = start_clip_run(store, CLIP_DOMAIN, plan, Sampling(frames=4), "clip-local")
    remote = start_clip_run(store, CLIP_DOMAIN, plan, Sampling(frames=4), "clip-ray", executor=RAY_GROUPS)
    a, b = load_clip_run(store, local), load_clip_run(store, remote)
    assert len(a.units) == 2 * 3 and a.units == b.units  # models × cells (clean, flicker:4, gaussian_noise:3)
    assert a.rows == b.rows and a.paired == b.paired and a.clips == b.clips
    assert len(a.clips) == 2 and all(len(c["frame_indices"]) == 4 for c in a.clips)
    env = store.get_run(remote).environment
    assert env["executor"] == "ray" and env["actors"] == 2

    real, calls = clip_kind.score_cell, []

    def fails_on_the_third(ms: Any, frames: Any) -> Any:
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("the third unit fails")
        return real(ms, frames)

    monkeypatch.setattr(clip_kind, "score_cell", fails_on_the_third)
    with pytest.raises(RuntimeError, match="third unit"):
        start_clip_run(store, CLIP_DOMAIN, plan, Sampling(frames=4), "clip-resumed")
    monkeypatch.setattr(clip_kind, "score_cell", real)
    assert store.get_run("clip-resumed").status == "failed"
    before = clip_kind.stored_units(store, store.get_run("clip-resumed"))
    assert len(before) == 2
    engine = make_engine(store, options=RAY)
    assert engine.resume("clip-resumed") == "clip-resumed"
    assert (engine.stats.skipped_units, engine.stats.computed_units) == (2, 4)
    c = load_clip_run(store, "clip-resumed")
    assert c.units == a.units and c.rows == a.rows and c.paired == a.paired
    assert {k: c.units[k] for k in before} == before

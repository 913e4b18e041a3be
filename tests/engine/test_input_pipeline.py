"""The input pipeline decodes in worker processes exactly what the in-process decode gives, for `run`
and `fmr` (the Ray driver's: ``test_ray_executor.py``), and pins batches exactly when the models run on CUDA
(no GPU here: ``torch.Tensor.pin_memory`` is stood in for, and the models' device is said to be CUDA).

References: ``Dataset.load`` (the decode runs used before the pipeline) and an independent
Pillow decode written here (shorter side to the image size, bicubic, centre crop).
"""

from __future__ import annotations

import multiprocessing as mp
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from domainbench.records.config import CorruptionChoice, DomainConfig, RunConfig
from domainbench.data import load_sample, open_dataset
from domainbench.engine.input_pipeline import InputPipeline, ShardLoader, auto_workers
from domainbench.engine.jobs import Corrupted
from domainbench.engine.runner import Engine
from domainbench.store import Store, open_store

SIZE = 24


def _jpeg_folder(root: Path, broken: bool = True) -> None:
    rng = np.random.default_rng(3)
    for i in range(11):
        h, w = int(rng.integers(20, 60)), int(rng.integers(20, 60))  # non-square, smaller and larger than SIZE
        folder = root / f"class_{i % 3}"
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray(rng.integers(0, 255, (h, w, 3), dtype=np.uint8)).save(folder / f"{i:02d}.jpg", quality=85)
    Image.fromarray(rng.integers(0, 255, (30, 30), dtype=np.uint8), mode="L").save(root / "class_1" / "grey.jpg")
    if broken:
        (root / "class_2" / "broken.jpg").write_bytes(b"\xff\xd8 not a jpeg")


def _pil_reference(path: Path) -> np.ndarray:
    with Image.open(path) as im:
        im = im.convert("RGB")
        s = SIZE / min(im.size)
        im = im.resize((max(SIZE, round(im.size[0] * s)), max(SIZE, round(im.size[1] * s))), Image.Resampling.BICUBIC)
        left, top = (im.size[0] - SIZE) // 2, (im.size[1] - SIZE) // 2
        return np.asarray(im.crop((left, top, left + SIZE, top + SIZE)))


@pytest.fixture(scope="module")
def pool() -> ProcessPoolExecutor:
    with ProcessPoolExecutor(2, mp_context=mp.get_context("spawn")) as p:
        yield p


def test_worker_decode_equals_the_in_process_decode_and_pillow(tmp_path: Path, pool: ProcessPoolExecutor) -> None:
    _jpeg_folder(tmp_path / "ds")
    ds = open_dataset(str(tmp_path / "ds"), image_size=SIZE)
    loader = ShardLoader(ds, pool, workers=2)
    shards = [np.arange(0, 5), np.arange(5, 12), np.arange(12, 13)]
    assert len(ds) == 13
    got = [loader.start(s).result() for s in shards]
    for shard, batch in zip(shards, got):
        ref = ds.load(shard)
        assert batch.images.dtype == np.uint8 and batch.images.shape[1:] == (SIZE, SIZE, 3)
        assert np.array_equal(batch.images, ref.images)
        assert batch.indices.tolist() == ref.indices.tolist() and batch.labels.tolist() == ref.labels.tolist()
        assert batch.unreadable == ref.unreadable
        for img, i in zip(batch.images, batch.indices):
            assert np.array_equal(img, _pil_reference(ds.paths[i]))
    assert [Path(p).name for b in got for _, p, _ in b.unreadable] == ["broken.jpg"]
    assert sum(len(b.indices) for b in got) == 12


def test_in_memory_sample_is_sliced_not_decoded(pool: ProcessPoolExecutor) -> None:
    ds = load_sample()
    loader = ShardLoader(ds, pool, workers=2)
    idx = np.arange(100, 164)
    batch = loader.start(idx).result()
    assert np.array_equal(batch.images, ds.arrays[idx]) and batch.labels.tolist() == ds.labels[idx].tolist()


def test_ahead_starts_one_shard_beyond_the_one_handed_out(tmp_path: Path) -> None:
    ds = load_sample()
    started: list[int] = []
    loader = ShardLoader(ds, None, workers=0)
    real = loader.start
    loader.start = lambda idx: (started.append(int(idx[0])), real(idx))[1]  # type: ignore[method-assign]
    shards = [np.arange(i, i + 10) for i in range(0, 40, 10)]
    seen = []
    for shard, _, fut in loader.ahead(iter([(k, []) for k in range(4)]), shards):
        seen.append((shard, len(started)))
        assert np.array_equal(fut.result().images, ds.arrays[shards[shard]])
    loader.close()
    assert seen == [(0, 2), (1, 3), (2, 4), (3, 4)]


def test_auto_workers_is_one_per_core_at_most_8_leaving_two_to_a_cpu_forward(monkeypatch: pytest.MonkeyPatch) -> None:
    for cores, gpu, cpu in ((1, 1, 0), (2, 2, 0), (6, 6, 4), (64, 8, 8)):
        monkeypatch.setattr("os.cpu_count", lambda c=cores: c)
        assert (auto_workers(True), auto_workers(False)) == (gpu, cpu)


def test_a_run_with_worker_processes_stores_what_an_in_process_run_stores(home: Path, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    _jpeg_folder(tmp_path / "ds")
    domain = DomainConfig(domain="pipeline", corruptions=[CorruptionChoice(name="gaussian_noise", severities=[2], reason="r")])
    store = open_store()

    def units(workers: int) -> tuple[dict, dict]:
        cfg = RunConfig(models=["fake:a"], dataset=str(tmp_path / "ds"), image_size=SIZE, shard_size=4, workers=workers,
                        stability=False, threat=False, skip_unreadable=True)
        run_id = Engine(store).start(domain, cfg)
        got = {(u.corruption, u.shard): (u.indices.tolist(), u.preds.tolist(), u.n_unreadable, u.damage)
               for u in store.units(run_id)}
        return got, store.get_run(run_id).timings

    from domainbench.engine.shards import ShardDamage

    measure, calls = ShardDamage.measure, []

    def counted(self: ShardDamage, cell: object, corrupted: object) -> None:
        calls.append(cell)
        measure(self, cell, corrupted)

    monkeypatch.setattr(ShardDamage, "measure", counted)
    (pooled, pooled_t), n_pooled = units(2), len(calls)
    (inline, inline_t), n_inline = units(0), len(calls) - n_pooled
    assert pooled == inline and len(pooled) == 2 * 4
    # the damage sums (SSIM, PSNR) are the same whether the workers measured them beside the corruption or this
    # process after it; with workers, this process measured (almost) none
    measured = [d for (c, shard), (*_, d) in pooled.items() if c != "clean" and shard < 3]  # shard 3 holds the bad file
    assert len(measured) == 3 and all(d is not None and d.n == 4 for d in measured)
    assert n_inline == 4 and n_pooled <= 1  # (the shard with the bad file: its worker measured nothing)


@pytest.fixture
def pins(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, ...]]:
    """``torch.Tensor.pin_memory`` recorded (the shape of each tensor pinned) and standing in for CUDA's: a copy."""
    calls: list[tuple[int, ...]] = []

    def pin_memory(self: torch.Tensor, *_: object) -> torch.Tensor:
        calls.append(tuple(self.shape))
        return self.clone()

    monkeypatch.setattr(torch.Tensor, "pin_memory", pin_memory)
    return calls


def test_shards_and_host_corrupted_batches_are_pinned_exactly_when_the_models_run_on_cuda(
        pins: list[tuple[int, ...]], monkeypatch: pytest.MonkeyPatch) -> None:
    ds = load_sample()
    shards = [np.arange(i, i + 10) for i in range(0, 30, 10)]
    plan = [(k, [k]) for k in range(3)]
    monkeypatch.setattr("os.cpu_count", lambda: 4)
    for device, pinned in (("cpu", 0), ("cuda", 3), (torch.device("cuda:1"), 3)):
        pins.clear()
        with InputPipeline.for_models(ds, None, device) as inputs:
            assert inputs.workers == auto_workers(pinned > 0) and inputs.pool is None  # in-memory: nothing to decode
            got = list(inputs.batches(iter(plan), shards, lambda b: b))
        assert [(s, t) for s, t, _ in got] == plan
        for (k, _, batch) in got:
            assert np.array_equal(batch.images, ds.arrays[shards[k]]) and batch.indices.tolist() == shards[k].tolist()
        assert pins == [(10, 28, 28)] * pinned
        pins.clear()
        corrupted = Corrupted(ds.arrays[:4], {"drawn": [1, 2, 3, 4]})
        out = inputs.pinning.corrupted(_Done(corrupted)).result()
        assert np.array_equal(out.images, corrupted.images) and out.drawn == corrupted.drawn
        assert pins == [(4, 28, 28)] * (pinned > 0)


class _Done:
    def __init__(self, value: Corrupted) -> None:
        self.value = value

    def result(self) -> Corrupted:
        return self.value


DOMAIN = DomainConfig(domain="pipeline", corruptions=[CorruptionChoice(name="gaussian_noise", severities=[2], reason="r"),
                                                      CorruptionChoice(name="contrast", severities=[1], reason="r")])


def test_a_run_and_an_fmr_run_with_models_on_cuda_score_pinned_batches_and_store_the_cpu_runs_records(
        home: Path, pins: list[tuple[int, ...]], monkeypatch: pytest.MonkeyPatch) -> None:
    """The local executor decides pinning from its models' device: told they run on CUDA (their tensors
    stay on the CPU here), it pins every clean shard and host-corrupted batch once, and nothing changes."""
    from domainbench.records.config import FmrSettings

    store = open_store()
    plan = RunConfig(models=["fake:a", "fake:b"], limit=30, shard_size=10, workers=0, corrupt_on="cpu",
                     stability=False, threat=False)
    fmr = FmrSettings(oracle=["fake:b", "fake:c"], budget=1, candidates=2, shard_size=10)
    on_cpu = Engine(store).start(DOMAIN, plan), Engine(store).start(DOMAIN, plan, fmr=fmr)
    assert pins == []
    for kind in ("domainbench.engine.corruption_kind", "domainbench.fmr.kind"):  # each kind's local part asks it
        monkeypatch.setattr(f"{kind}.models_device", lambda models: torch.device("cuda"))
    monkeypatch.setattr("torch.cuda.get_device_name", lambda device: "pretend")
    on_cuda = Engine(store).start(DOMAIN, plan)
    assert pins == [(10, 28, 28)] * (3 + 3 * 2)  # per shard: the clean images, then each corrupted cell
    pins.clear()
    fmr_on_cuda = Engine(store).start(DOMAIN, plan, fmr=fmr)
    assert pins == [(10, 28, 28)] * 3
    assert _units(store, on_cuda) == _units(store, on_cpu[0]) and len(_units(store, on_cuda)) == 3 * 3 * 2
    assert _fmr(store, fmr_on_cuda) == _fmr(store, on_cpu[1]) and _units(store, fmr_on_cuda) == _units(store, on_cpu[1])


def _units(store: Store, run_id: str) -> dict[tuple, tuple]:
    return {(u.model, u.corruption, u.severity, u.shard): (u.n, u.indices, u.preds, u.confidence, u.confusion, u.flips,
                                                          u.labels, u.n_unreadable, u.params)
            for u in store.units(run_id)}


def _fmr(store: Store, run_id: str) -> dict[tuple, tuple]:
    return {(r.model, r.shard): (r.indices, r.labels, r.clean_preds, r.final_preds, r.validated, r.steps, r.oracle_clean,
                                 r.oracle_final, r.ops, r.images, r.originals)
            for r in store.fmr(run_id)}


def test_fmr_decodes_its_shards_in_the_pipelines_workers_to_the_in_process_decodes_records(
        home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`domainbench fmr --workers 2` decodes every shard in worker processes (this process decodes only the
    two images the tested models are probed with) and stores what an FMR run decoding in this process stores."""
    from typer.testing import CliRunner

    from domainbench.app.cli import app
    from domainbench.records.config import save
    from domainbench.data import Dataset

    _jpeg_folder(tmp_path / "ds", broken=False)
    save(DOMAIN, tmp_path / "domain.toml")
    loaded: list[list[int]] = []
    real = Dataset.load
    monkeypatch.setattr(Dataset, "load", lambda self, idx: (loaded.append(np.asarray(idx).tolist()), real(self, idx))[1])
    out = CliRunner().invoke(app, ["--quiet", "fmr", str(tmp_path / "domain.toml"), "--models", "fake:a", "--oracle",
                                   "fake:b,fake:c", "--budget", "1", "--candidates", "2", "--shard-size", "5",
                                   "--dataset", str(tmp_path / "ds"), "--device", "cpu", "--workers", "2",
                                   "--run-id", "pooled"])
    assert out.exit_code == 0, out.output
    assert loaded == [[0, 1]]  # the probe: every shard was decoded by the workers
    store = open_store()
    pooled = store.get_run("pooled")
    assert pooled.config.workers == 2 and len(store.fmr("pooled")) == 3  # 12 images in shards of 5
    loaded.clear()
    inline = Engine(store).start(DOMAIN, pooled.config.model_copy(update={"workers": 0}), fmr=pooled.fmr)
    assert loaded == [[0, 1], [0, 1, 2, 3, 4], [5, 6, 7, 8, 9], [10, 11]]  # decoded here, on the loader's thread
    assert _fmr(store, inline) == _fmr(store, "pooled") and _units(store, inline) == _units(store, "pooled")

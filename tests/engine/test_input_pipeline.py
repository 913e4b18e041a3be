"""The input pipeline decodes in worker processes exactly what the in-process decode gives.

References: ``Dataset.load`` (the decode runs used before the pipeline) and an independent
Pillow decode written here (shorter side to the image size, bicubic, centre crop).
"""

from __future__ import annotations

import multiprocessing as mp
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from domainbench.config import CorruptionChoice, DomainConfig, RunConfig
from domainbench.data import load_sample, open_dataset
from domainbench.engine.input_pipeline import ShardLoader, auto_workers
from domainbench.engine.runner import Engine
from domainbench.store import open_store

SIZE = 24


def _jpeg_folder(root: Path) -> None:
    rng = np.random.default_rng(3)
    for i in range(11):
        h, w = int(rng.integers(20, 60)), int(rng.integers(20, 60))  # non-square, smaller and larger than SIZE
        folder = root / f"class_{i % 3}"
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray(rng.integers(0, 255, (h, w, 3), dtype=np.uint8)).save(folder / f"{i:02d}.jpg", quality=85)
    Image.fromarray(rng.integers(0, 255, (30, 30), dtype=np.uint8), mode="L").save(root / "class_1" / "grey.jpg")
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


def test_a_run_with_worker_processes_stores_what_an_in_process_run_stores(home: Path, tmp_path: Path) -> None:
    _jpeg_folder(tmp_path / "ds")
    domain = DomainConfig(domain="pipeline", corruptions=[CorruptionChoice(name="gaussian_noise", severities=[2], reason="r")])
    store = open_store()

    def units(workers: int) -> dict:
        cfg = RunConfig(models=["fake:a"], dataset=str(tmp_path / "ds"), image_size=SIZE, shard_size=4, workers=workers,
                        stability=False, threat=False, skip_unreadable=True)
        run_id = Engine(store).start(domain, cfg)
        return {(u.corruption, u.shard): (u.indices.tolist(), u.preds.tolist(), u.n_unreadable) for u in store.units(run_id)}

    pooled, inline = units(2), units(0)
    assert pooled == inline and len(pooled) == 2 * 4

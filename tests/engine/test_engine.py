"""The engine against independent computations: per-image brute force, shard invariance,
corruption shared across models, resume without recomputation, and bad input."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from domainbench import corruptions
from domainbench.records.config import CorruptionChoice, DomainConfig, RunConfig
from domainbench.data import load_sample
from domainbench.engine.jobs import image_seeds
from domainbench.engine.runner import Engine
from domainbench.engine.work import ShardWork
from domainbench.engine.scoring import ModelOutputError
from domainbench.engine.reports import build_report
from domainbench.errors import UserInputError
from domainbench.models import build_classifier, create_model
from domainbench.store import open_store

DOMAIN = DomainConfig(
    domain="test domain",
    corruptions=[
        CorruptionChoice(name="gaussian_noise", severities=[1, 4], reason="sensor"),
        CorruptionChoice(name="brightness", severities=[3], reason="exposure"),
        CorruptionChoice(name="horizontal_flip", severities=[1], reason="mirror"),
    ],
)


def cfg(**kw: object) -> RunConfig:
    base = dict(models=["fake:a"], limit=60, shard_size=25, workers=0, stability_points=3, stability_images=8, threat_anchors=3)
    return RunConfig(**(base | kw))  # type: ignore[arg-type]


def test_units_match_a_per_image_brute_force(home: Path) -> None:
    store = open_store()
    engine = Engine(store)
    run_id = engine.start(DOMAIN, cfg())
    ds = load_sample().subset(60)
    model = create_model("fake:a", "cpu")
    clf = build_classifier(model, ds.classes)

    def pred(img: np.ndarray) -> int:
        with torch.inference_mode():
            return int((model.embed_images(img[None]) @ clf.T).argmax())

    clean = np.array([pred(im) for im in ds.arrays])  # type: ignore[union-attr]
    for c in DOMAIN.corruptions:
        for s in c.severities:
            seeds = image_seeds(0, c.name, s, np.arange(60))
            preds = np.array([pred(corruptions.corrupt(im, c.name, severity=s, seed=sd)) for im, sd in zip(ds.arrays, seeds)])  # type: ignore[arg-type]
            units = store.units(run_id, model="fake:a", corruption=c.name, severity=s)
            assert sum(u.n for u in units) == 60
            ladder = corruptions.resolve_params(c.name, severity=s)
            assert all({k: v for k, v in u.params.items() if k != "drawn"} == ladder for u in units)
            assert all(u.ladder_version == corruptions.get(c.name).ladder_version for u in units)
            assert sum(u.flips for u in units) == int((preds != clean).sum())
            cm = sum(np.array(u.confusion) for u in units)
            expected = np.zeros((10, 10), int)
            np.add.at(expected, (ds.labels, preds), 1)
            np.testing.assert_array_equal(cm, expected)
    summary = build_report(store, run_id)
    from sklearn.metrics import balanced_accuracy_score

    assert summary.table()[0].acc == pytest.approx(balanced_accuracy_score(ds.labels, clean))
    run = store.get_run(run_id)
    assert run.status == "done" and store.get_report(run_id) is not None


#: sums of float32 confidences (fixed-point integers, ``unit_sums.CalibrationSums``): the forward pass of a
#: batch of 7 and one of 60 may round differently (measured on an AVX-512 EPYC: the sums moved by ~1e-7
#: relative), so they are compared to float32 precision while everything else must be equal
CONFIDENCE_SUMS = ("confidence_sum", "nll_sum")


def _without_confidence_sums(value: Any, sums: list[int]) -> Any:
    """``value`` (a dumped report) with every confidence sum moved into ``sums``."""
    if isinstance(value, dict):
        kept = {}
        for k, v in value.items():
            if k in CONFIDENCE_SUMS:
                sums.extend(np.ravel(v).tolist())
            else:
                kept[k] = _without_confidence_sums(v, sums)
        return kept
    if isinstance(value, list):
        return [_without_confidence_sums(v, sums) for v in value]
    return value


def test_shard_size_does_not_change_results(home: Path) -> None:
    store = open_store()
    a = build_report(store, Engine(store).start(DOMAIN, cfg(shard_size=7, stability=False)))
    b = build_report(store, Engine(store).start(DOMAIN, cfg(shard_size=60, stability=False)))
    sums_a: list[int] = []
    sums_b: list[int] = []
    dumped_a = [_without_confidence_sums(m.model_dump(), sums_a) for m in a.models]
    dumped_b = [_without_confidence_sums(m.model_dump(), sums_b) for m in b.models]
    assert dumped_a == dumped_b  # predictions, counts, flips, every accuracy: exactly
    assert len(sums_a) == len(sums_b) > 0 and sums_a == pytest.approx(sums_b, rel=1e-5)
    ta = {(t.corruption, t.severity): t.mean_threat for t in a.threat}
    tb = {(t.corruption, t.severity): t.mean_threat for t in b.threat}
    assert ta.keys() == tb.keys() and all(ta[k] == pytest.approx(tb[k], rel=1e-5) for k in ta)


def test_corruption_is_shared_across_models(home: Path) -> None:
    store = open_store()
    one, three = Engine(store), Engine(store)
    one.start(DOMAIN, cfg(models=["fake:a"]))
    r3 = three.start(DOMAIN, cfg(models=["fake:a", "fake:b", "fake:c"], baseline="fake:b"))
    assert one.stats.corruption_calls == three.stats.corruption_calls > 0
    assert three.stats.computed_units == 3 * one.stats.computed_units
    s = build_report(store, r3)
    rows = {r.model: r for r in s.table()}
    assert rows["fake:b"].mce == pytest.approx(1.0)
    # the baseline is a read-time choice: no recomputation
    s2 = build_report(store, r3, baseline="fake:c")
    assert {r.model: r for r in s2.table()}["fake:c"].mce == pytest.approx(1.0)


def test_resume_recomputes_only_missing_units(home: Path) -> None:
    store = open_store()
    run_id = Engine(store).start(DOMAIN, cfg(models=["fake:a", "fake:b"]))
    before = {(u.model, u.corruption, u.severity, u.shard): u.computed_at for u in store.units(run_id)}
    for u in store.units(run_id, model="fake:b")[:3]:
        store.delete("units", **{k: getattr(u, k) for k in ("run_id", "model", "corruption", "severity", "shard")})
    engine = Engine(store)
    engine.resume(run_id)
    assert engine.stats.computed_units == 3
    after = store.units(run_id)
    assert len(after) == len(before)
    for u in after:
        key = (u.model, u.corruption, u.severity, u.shard)
        assert key in before


def test_stability_and_threat_are_stored(home: Path) -> None:
    store = open_store()
    run_id = Engine(store).start(DOMAIN, cfg())
    stab = store.find("stability", run_id=run_id)
    assert {d.corruption for d in stab} == {"gaussian_noise", "brightness", "horizontal_flip"}
    for d in stab:
        r = np.array(d.divergence_radius)
        assert len(r) == len(d.indices) and np.all((r >= 0) & (r <= 1))
        np.testing.assert_allclose(np.array(d.euclidean), np.sqrt(np.array(d.cosine)), atol=1e-12)
    s = build_report(store, run_id)
    flip = s.threat_of("horizontal_flip", 1)
    noise1 = s.threat_of("gaussian_noise", 1)
    assert noise1.mean_threat < flip.mean_threat
    assert s.different_class_threat > 1.0


def test_unknown_model_writes_nothing(home: Path) -> None:
    store = open_store()
    with pytest.raises(UserInputError, match="unknown model"):
        Engine(store).start(DOMAIN, cfg(models=["nope:x"]))
    with pytest.raises(ValueError, match="baseline"):
        Engine(store).start(DOMAIN, cfg(models=["fake:a"], baseline="fake:b"))
    assert store.list_runs() == []


def test_nan_model_is_a_clear_error(home: Path) -> None:
    with pytest.raises(ModelOutputError, match="fake:nan returned NaN"):
        Engine(open_store()).start(DOMAIN, cfg(models=["fake:nan"]))


def _write_images(folder: Path, n: int, seed: int) -> None:
    from PIL import Image

    folder.mkdir(parents=True)
    rng = np.random.default_rng(seed)
    for i in range(n):
        Image.fromarray(rng.integers(0, 255, (20 + i, 24, 3), dtype=np.uint8)).save(folder / f"{i}.png")


def test_unlabeled_folder_reports_flips_but_no_accuracy(home: Path, tmp_path: Path) -> None:
    _write_images(tmp_path / "imgs", 6, 0)
    (tmp_path / "imgs" / "broken.png").write_bytes(b"not an image")
    store = open_store()
    engine = Engine(store)
    run_id = engine.start(DOMAIN, cfg(dataset=str(tmp_path / "imgs"), classes=["cat", "dog"], image_size=32, limit=None,
                                      skip_unreadable=True))
    assert len(engine.stats.unreadable) == 1 and engine.stats.unreadable[0][1].endswith("broken.png")
    s = build_report(store, run_id)
    row = s.table()[0]
    cells = s.models[0].cells
    assert row.acc is None and row.mce is None
    # the only model is its own baseline: mFR is 1 where flips happen, undefined where none do
    assert row.mfr == (pytest.approx(1.0) if any(c.flips for c in cells) else None)
    assert all(c.accuracy is None and 0 <= c.lfp <= 1 for c in cells)
    assert all(c.n == 6 for c in cells)
    assert store.get_run(run_id).n_unreadable == 1


def test_single_class_dataset_is_rejected(home: Path, tmp_path: Path) -> None:
    _write_images(tmp_path / "ds" / "only", 3, 1)
    with pytest.raises(UserInputError, match="single class"):
        Engine(open_store()).start(DOMAIN, cfg(dataset=str(tmp_path / "ds"), limit=None))


def test_out_of_memory_halves_the_batch_and_gives_the_same_numbers(home: Path) -> None:
    from fake_models import FakeModel

    store = open_store()
    quiet = dict(batch_size=64, stability=False, threat=False)
    ok = build_report(store, Engine(store).start(DOMAIN, cfg(models=["fake:a"], **quiet)))
    got = build_report(store, Engine(store).start(DOMAIN, cfg(models=["fake:oom"], **quiet)))
    assert FakeModel.oom_raised == 3  # 64 -> 32 -> 16 -> 8, then it stays at 8
    # other batch sizes give other float rounding in the embeddings: the same predictions and counts,
    # confidences (and so ECE/NLL) equal to float32 precision
    counts = lambda cells: [c.model_copy(update={"calibration": None}) for c in cells]  # noqa: E731
    assert counts(ok.models[0].cells) == counts(got.models[0].cells)
    for a, b in zip(ok.models[0].cells, got.models[0].cells):
        assert a.calibration.ece == pytest.approx(b.calibration.ece, abs=1e-6)
        assert a.calibration.nll == pytest.approx(b.calibration.nll, abs=1e-5)
    assert ok.table()[0].acc == got.table()[0].acc


def test_stability_link_joins_radius_with_per_image_accuracy(home: Path) -> None:
    store = open_store()
    run_id = Engine(store).start(DOMAIN, cfg(limit=60, stability_images=20))
    link = build_report(store, run_id).stability_link
    assert [m.model for m in link] == ["fake:a"]
    per = link[0].per_corruption
    assert set(per) == {"gaussian_noise", "brightness", "horizontal_flip"}
    # recompute one corruption's ACC_p by hand from the stored units
    ds = load_sample().subset(60)
    preds = {}
    for u in store.units(run_id, model="fake:a", corruption="gaussian_noise"):
        for i, p in zip(u.indices, u.preds):
            preds.setdefault(i, []).append(p == ds.labels[i])
    stab = store.find("stability", run_id=run_id, model="fake:a", corruption="gaussian_noise")
    idx = [i for d in stab for i in d.indices]
    assert per["gaussian_noise"].n_images == len(idx) == 20 + 20 + 10  # shards of 25, 25, 10 images
    assert per["gaussian_noise"].accuracy_perturbed == pytest.approx(np.mean([np.mean(preds[i]) for i in idx]))
    assert sum(b.count for b in per["gaussian_noise"].bins) == len(idx)


def test_worker_processes_give_the_same_pixels_as_in_process(home: Path) -> None:
    store = open_store()
    inline = Engine(store).start(DOMAIN, cfg(workers=0, stability_images=4))
    pooled_engine = Engine(store)
    pooled = pooled_engine.start(DOMAIN, cfg(workers=2, stability_images=4))
    key = lambda u: (u.model, u.corruption, u.severity, u.shard)  # noqa: E731
    a = {key(u): (u.preds, u.confusion, u.flips) for u in store.units(inline)}
    b = {key(u): (u.preds, u.confusion, u.flips) for u in store.units(pooled)}
    assert a == b and len(a) == 3 * 5
    sa = {(d.corruption, d.shard): d.divergence_radius for d in store.find("stability", run_id=inline)}
    sb = {(d.corruption, d.shard): d.divergence_radius for d in store.find("stability", run_id=pooled)}
    assert sa.keys() == sb.keys() and all(np.allclose(sa[k], sb[k], atol=1e-12) for k in sa)


def test_resume_refuses_a_run_computed_on_another_severity_ladder(home: Path) -> None:
    store = open_store()
    run_id = Engine(store).start(DOMAIN, cfg(stability=False, threat=False))
    run = store.get_run(run_id)
    assert run.ladder_versions == {c.name: corruptions.get(c.name).ladder_version for c in DOMAIN.corruptions}
    # as if the run had been computed before gaussian_noise's ladder was recalibrated to this version
    current = run.ladder_versions["gaussian_noise"]
    store.update_run(run_id, ladder_versions={**run.ladder_versions, "gaussian_noise": current + 1}, status="interrupted")
    with pytest.raises(UserInputError, match=rf"gaussian_noise \(v{current + 1} stored, v{current} now\).*start a new run"):
        Engine(store).resume(run_id)
    assert store.get_run(run_id).status == "interrupted"  # nothing changed
    # a run stored before ladders were versioned reads as version 1 everywhere
    store.update_run(run_id, ladder_versions={})
    assert store.get_run(run_id).ladder_version("gaussian_noise") == 1


def test_next_shard_decodes_on_a_thread_while_this_one_is_scored(home: Path, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from domainbench.data import Dataset

    _write_images(tmp_path / "imgs", 12, 1)
    for name in ("3b.png", "7b.png"):  # unreadable images in two different shards
        (tmp_path / "imgs" / name).write_bytes(b"not an image")
    kw = dict(dataset=str(tmp_path / "imgs"), classes=["cat", "dog"], image_size=32, limit=None, stability=False,
              threat=False, skip_unreadable=True)
    store = open_store()
    one_shard = Engine(store)
    reference = one_shard.start(DOMAIN, cfg(shard_size=100, **kw))  # nothing to load ahead of

    loads: dict[int, tuple[float, int]] = {}  # first index of the shard -> (load started, thread)
    scored: dict[int, float] = {}  # shard -> scoring finished
    real_load, real_consume = Dataset.load, ShardWork.consume

    def load(self: Dataset, indices: np.ndarray) -> Any:
        loads[int(indices[0])] = (time.perf_counter(), threading.get_ident())
        return real_load(self, indices)

    def consume(self: ShardWork, shard: int, *rest: Any) -> None:
        real_consume(self, shard, *rest)
        scored[shard] = time.perf_counter()

    monkeypatch.setattr(Dataset, "load", load)
    monkeypatch.setattr(ShardWork, "consume", consume)
    sharded = Engine(store)
    run = sharded.start(DOMAIN, cfg(shard_size=4, **kw))
    assert sorted(loads) == [0, 4, 8, 12] and sorted(scored) == [0, 1, 2, 3]
    assert all(thread != threading.get_ident() for _, thread in loads.values())
    # shard k+2 is being decoded before shard k's scoring ends (k+1 before k's even starts)
    assert all(loads[4 * (k + 2)][0] < scored[k] for k in (0, 1))
    assert sharded.stats.unreadable == one_shard.stats.unreadable and len(sharded.stats.unreadable) == 2

    def per_image(run_id: str) -> dict[tuple[str, int, int], int]:
        return {(u.corruption, u.severity, i): p for u in store.units(run_id)
                for i, p in zip(u.indices, u.preds)}

    assert per_image(run) == per_image(reference) and len(per_image(run)) == 12 * 5

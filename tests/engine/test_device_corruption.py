"""--corrupt-on: where each job is corrupted, the per-unit record, and results that do not depend on it."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import pytest
import torch
from pydantic import ValidationError

from domainbench.config import CorruptionChoice, DomainConfig, RunConfig
from domainbench.engine.device_corruption import corruption_site
from domainbench.engine.runner import Engine
from domainbench.store import open_store

#: corruptions whose device kernels reproduce the CPU pixels, one without a device kernel, one random
DETERMINISTIC = ["horizontal_flip", "rotation", "row_noise", "occluder", "color_shift", "gaussian_blur"]
DOMAIN = DomainConfig(
    domain="device corruption",
    corruptions=[CorruptionChoice(name=n, severities=[2, 5] if n != "horizontal_flip" else [1], reason="test") for n in DETERMINISTIC]
    + [
        CorruptionChoice(name="webp_compression", severities=[3], reason="no device kernel (no batched WebP encoder)"),
        CorruptionChoice(name="gaussian_noise", severities=[4], reason="random per-pixel draws"),
    ],
)


def cfg(**kw: object) -> RunConfig:
    base = dict(models=["fake:a", "fake:b"], limit=40, shard_size=16, workers=0, device="cpu", stability=False,
                threat=False)
    return RunConfig(**(base | kw))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("choice", "model_device", "corruption", "site"),
    [
        ("cpu", "cuda", "gaussian_noise", "cpu"),
        ("auto", "cpu", "gaussian_noise", "cpu"),  # a CPU-only machine keeps the worker processes
        ("auto", "cuda", "gaussian_noise", "device"),
        ("auto", "cuda", "webp_compression", "cpu"),  # no device kernel
        ("device", "cpu", "gaussian_noise", "device"),
        ("device", "cuda:1", "webp_compression", "cpu"),
    ],
)
def test_corruption_site(choice: str, model_device: str, corruption: str, site: str) -> None:
    assert corruption_site(choice, torch.device(model_device), corruption) == site


def test_corrupt_on_is_checked() -> None:
    assert RunConfig().corrupt_on == "auto"
    with pytest.raises(ValidationError, match="corrupt_on"):
        RunConfig(corrupt_on="gpu")  # type: ignore[arg-type]


def test_results_do_not_depend_on_where_units_were_corrupted(home: Path) -> None:
    store = open_store()
    on_cpu = Engine(store).start(DOMAIN, cfg(corrupt_on="cpu"))
    device_engine = Engine(store)
    on_device = device_engine.start(DOMAIN, cfg(corrupt_on="device"))
    key = lambda u: (u.model, u.corruption, u.severity, u.shard)  # noqa: E731
    a = {key(u): u for u in store.units(on_cpu)}
    b = {key(u): u for u in store.units(on_device)}
    assert a.keys() == b.keys() and len(a) == 2 * 3 * (1 + 1 + 2 * (len(DETERMINISTIC) - 1) + 2)
    for k, unit in b.items():
        corruption = k[1]
        assert a[k].corrupted_on == (None if corruption == "clean" else "cpu")
        if corruption == "clean":
            assert unit.corrupted_on is None
        elif corruption == "webp_compression":
            assert unit.corrupted_on == "cpu"
        else:
            assert unit.corrupted_on == "device"
        if corruption != "gaussian_noise":
            # same pixels (up to a grey level of rounding), same predictions, same drawn values
            assert (unit.preds, unit.confusion, unit.flips, unit.params) == (a[k].preds, a[k].confusion, a[k].flips, a[k].params), k
        else:
            assert unit.n == a[k].n and unit.params == a[k].params
    # the random kernel draws its noise from torch generators: other pixels, so (almost surely) other predictions somewhere
    assert any(b[k].preds != a[k].preds for k in b if k[1] == "gaussian_noise")


def test_device_jobs_stay_on_the_device() -> None:
    from domainbench.engine.jobs import Job, run_job
    from domainbench.engine.device_corruption import run_device_job

    images = np.random.default_rng(0).integers(0, 256, (5, 28, 28), dtype=np.uint8)
    job = Job(0, "rotation", 3)
    on_device = run_device_job(job, images, np.arange(5), 7, torch.device("cpu"))
    # a tensor the models preprocess where it is, never a host copy
    assert isinstance(on_device.images, torch.Tensor) and on_device.on == "device"
    on_cpu = run_job(job, images, np.arange(5), 7).images
    assert np.abs(on_device.images.numpy().astype(int) - on_cpu).max() <= 1  # the kernels' rounding, as above


def test_stability_and_threat_consume_device_images(home: Path) -> None:
    store = open_store()
    domain = DomainConfig(domain="device tasks", corruptions=[
        CorruptionChoice(name=n, severities=[3], reason="bit-identical device kernel") for n in ("occluder",)])
    kw = dict(stability=True, threat=True, stability_points=2, stability_images=8, threat_anchors=2)
    runs = [Engine(store).start(domain, cfg(corrupt_on=site, **kw)) for site in ("cpu", "device")]
    stab = [{(r.model, r.corruption, r.shard): r.model_dump(exclude={"run_id", "computed_at"}) for r in store.find("stability", run_id=run)}
            for run in runs]
    threat = [{(r.corruption, r.severity, r.shard): r.model_dump(exclude={"run_id"}) for r in store.find("threat", run_id=run)}
              for run in runs]
    assert stab[0] and stab[0] == stab[1]
    assert threat[0] and threat[0] == threat[1]

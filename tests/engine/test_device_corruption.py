"""--corrupt-on: where each job is corrupted, the per-unit record, and results that do not depend on it."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import pytest
import torch
from pydantic import ValidationError

from domainbench.records.config import CorruptionChoice, DomainConfig, RunConfig
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
            # same pixels (up to a grey level of rounding), same predictions
            assert (unit.preds, unit.confusion, unit.flips, unit.params) == (a[k].preds, a[k].confusion, a[k].flips, a[k].params), k
        else:
            assert unit.n == a[k].n and unit.params == a[k].params
    # same drawn values: units do not store them, ``query.drawn_of`` makes them again on the CPU for either
    from domainbench.data import load_sample
    from domainbench.engine.device_corruption import run_device_job
    from domainbench.engine.jobs import Job, run_job

    images, indices = load_sample().subset(40).arrays[:16], np.arange(16)
    for corruption, severity in {(k[1], k[2]) for k in b if k[1] not in ("clean", "webp_compression")}:
        job = Job(0, corruption, severity)
        drawn = run_device_job(job, images, indices, 0, torch.device("cpu")).drawn
        assert drawn == run_job(job, images, indices, 0).drawn and (drawn or corruption != "occluder"), corruption
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


#: every step has a device kernel that reproduces the CPU pixels (up to rounding); one random step
DEVICE_STEPS = [("rotation", 2), ("gaussian_blur", 3)]
RANDOM_STEPS = [("rotation", 2), ("gaussian_noise", 3)]


@pytest.mark.parametrize(
    ("choice", "model_device", "steps", "site"),
    [
        ("auto", "cuda", DEVICE_STEPS, "device"),
        ("device", "cpu", RANDOM_STEPS, "device"),
        ("auto", "cpu", DEVICE_STEPS, "cpu"),  # CPU-only machine: the worker processes
        ("cpu", "cuda", DEVICE_STEPS, "cpu"),
        ("auto", "cuda", [("rotation", 2), ("webp_compression", 3)], "cpu"),  # one step without a device kernel
    ],
)
def test_composition_site_needs_a_device_kernel_for_every_step(choice: str, model_device: str,
                                                               steps: list[tuple[str, int]], site: str) -> None:
    from domainbench.engine.device_corruption import job_site
    from domainbench.engine.jobs import Job

    job = Job(0, "compose:c", 1, {"steps": [list(s) for s in steps]})
    assert corruption_site(choice, torch.device(model_device), "compose:c", steps) == site
    assert job_site(choice, torch.device(model_device), job) == site


def test_a_composition_on_the_device_is_its_device_steps_by_hand() -> None:
    from domainbench.corruptions import derive_seed
    from domainbench.corruptions import device as device_kernels
    from domainbench.engine.device_corruption import run_device_job
    from domainbench.engine.jobs import Job, image_seeds, run_job

    images = np.random.default_rng(1).integers(0, 256, (4, 32, 32, 3), dtype=np.uint8)
    indices = np.array([3, 9, 10, 17])
    for steps in (DEVICE_STEPS, RANDOM_STEPS):
        job = Job(0, "compose:c", 1, {"steps": [list(s) for s in steps]})
        got = run_device_job(job, images, indices, 7, torch.device("cpu"))
        assert isinstance(got.images, torch.Tensor) and got.on == "device" and len(got.drawn["steps"]) == 2
        seeds = image_seeds(7, "compose:c", 1, indices)
        by_hand = torch.from_numpy(images)
        for k, (name, severity) in enumerate(steps):
            by_hand, drawn = device_kernels.corrupt_batch(by_hand, name, severity=severity,
                                                          seeds=[derive_seed(s, k) for s in seeds], return_drawn=True)
            assert got.drawn["steps"][k] == drawn
        assert torch.equal(got.images, by_hand)
        # the same seeds give the same pixels (a resumed run); the steps changed the images
        assert torch.equal(run_device_job(job, images, indices, 7, torch.device("cpu")).images, got.images)
        assert not np.array_equal(got.images.numpy(), images)
    # kernels that reproduce the CPU pixels: the composition matches the CPU workers' up to the kernels' rounding
    job = Job(0, "compose:c", 1, {"steps": [list(s) for s in DEVICE_STEPS]})
    on_cpu = run_job(job, images, indices, 7).images
    on_device = run_device_job(job, images, indices, 7, torch.device("cpu")).images.numpy()
    assert np.abs(on_device.astype(int) - on_cpu).max() <= 2


def test_a_run_corrupts_a_composition_on_the_device_when_every_step_can(home: Path) -> None:
    from domainbench.records.config import Composition, CompositionStep

    def comp(name: str, steps: list[tuple[str, int]]) -> Composition:
        return Composition(name=name, steps=[CompositionStep(corruption=c, severity=s) for c, s in steps])

    domain = DomainConfig(domain="composed on the device", corruptions=[
        CorruptionChoice(name="rotation", severities=[2], reason="test")],
        compositions=[comp("tilted blur", DEVICE_STEPS), comp("tilted webp", [("rotation", 2), ("webp_compression", 3)])])
    store = open_store()
    runs = [Engine(store).start(domain, cfg(corrupt_on=site, limit=24)) for site in ("cpu", "device")]
    units = [{(u.model, u.corruption, u.shard): u for u in store.units(run)} for run in runs]
    assert units[0].keys() == units[1].keys()
    composed = [k for k in units[1] if k[1].startswith("compose:")]
    assert len(composed) == 2 * 2 * 2  # models x compositions x shards
    for k in composed:
        a, b = units[0][k], units[1][k]
        assert a.corrupted_on == "cpu"
        assert b.corrupted_on == ("device" if k[1] == "compose:tilted blur" else "cpu")
        assert a.preds == b.preds and a.params == b.params, k
        assert a.damage is not None and b.damage is not None
        assert b.damage.ssim == pytest.approx(a.damage.ssim, abs=0.02)

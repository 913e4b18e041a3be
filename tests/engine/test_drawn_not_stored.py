"""What a corruption draws per image is not stored in units: ``query.drawn_of`` makes it again from the run's
seed, and it is exactly what the run drew (every corruption that draws per image, and a composition)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from domainbench.records.config import Composition, CompositionStep, CorruptionChoice, DomainConfig, RunConfig
from domainbench.engine import local_executor
from domainbench.engine.jobs import run_job
from domainbench.engine.runner import Engine
from domainbench.errors import UserInputError
from domainbench.query import drawn_of, recreate
from domainbench.store import open_store

DRAWING = [("shadow", 3), ("occluder", 2), ("perspective", 2), ("grid_distortion", 2), ("motion_blur", 2)]
DOMAIN = DomainConfig(
    domain="draws per image",
    corruptions=[CorruptionChoice(name=n, severities=[s], reason="draws per image") for n, s in DRAWING],
    compositions=[Composition(name="shade", steps=[CompositionStep(corruption="shadow", severity=3),
                                                   CompositionStep(corruption="motion_blur", severity=2)])],
)


def test_units_hold_no_draws_and_the_draws_made_again_are_the_runs(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ran: dict[tuple[str, tuple[int, ...]], Any] = {}

    def spy(job: Any, images: np.ndarray, indices: np.ndarray, seed: int) -> Any:
        out = run_job(job, images, indices, seed)
        ran[(job.corruption, tuple(indices.tolist()))] = out
        return out

    monkeypatch.setattr(local_executor, "run_job", spy)
    store = open_store()
    cfg = RunConfig(models=["fake:a", "fake:b"], limit=24, shard_size=12, workers=0, device="cpu", corrupt_on="cpu",
                    stability=False, threat=False, seed=5)
    run_id = Engine(store).start(DOMAIN, cfg)
    run, units = store.get_run(run_id), store.units(run_id)
    assert run is not None and len(units) == 2 * 2 * (1 + len(DRAWING) + 1)
    corrupted = [u for u in units if u.corruption != "clean"]
    assert all("drawn" not in u.params for u in units)
    for u in corrupted:
        at_run = ran[(u.corruption, tuple(u.indices))]
        assert at_run.drawn, u.corruption  # each of these cells draws per image
        assert drawn_of(run, u) == at_run.drawn, (u.model, u.corruption, u.shard)
        images, kept = recreate(run, u.corruption, u.severity, list(u.indices))
        assert np.array_equal(images.images, at_run.images) and kept.tolist() == list(u.indices)
    assert {len(drawn_of(run, u)["steps"]) for u in corrupted if u.corruption == "compose:shade"} == {2}
    assert drawn_of(run, next(u for u in units if u.corruption == "clean")) == {}

    shadow = next(u for u in corrupted if u.corruption == "shadow")
    with pytest.raises(UserInputError, match="another severity ladder for shadow"):
        drawn_of(run, shadow.model_copy(update={"ladder_version": shadow.ladder_version + 1}))
    from domainbench.corruptions.kernels.frost_photos import texture_source

    other = "procedural" if texture_source() == "imagenet-c" else "imagenet-c"
    with pytest.raises(UserInputError, match=f"the {other} frost texture"):
        drawn_of(run, shadow.model_copy(update={"frost_texture": other}))

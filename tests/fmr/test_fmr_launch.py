"""Queueing an FMR run (the UI's launch path, ``launch.enqueue_run(..., fmr=...)``): its inputs are
checked before anything is stored, and it is other work than a corruption run of the same plan."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from domainbench.records.config import CorruptionChoice, DomainConfig, FmrSettings, RunConfig
from domainbench.errors import UserInputError
from domainbench.service.launch import enqueue_run
from domainbench.store import open_store
from domainbench.store.queue import DuplicateRunError

from .conftest import AUGMENTED, PLAIN

DOMAIN = DomainConfig(domain="fmr launch", corruptions=[CorruptionChoice(name="brightness", reason="r")])
CFG = RunConfig(models=[PLAIN], limit=6, device="cpu", stability=False, threat=False)
SETTINGS = FmrSettings(oracle=[PLAIN, AUGMENTED], budget=1)


def test_a_queued_fmr_run_keeps_its_settings_and_is_not_a_duplicate_of_the_corruption_run(home: Path) -> None:
    store = open_store()
    plain = enqueue_run(store, DOMAIN, CFG)
    fmr = enqueue_run(store, DOMAIN, CFG, fmr=SETTINGS)
    assert plain.fmr is None and store.get_run(fmr.run_id).fmr == SETTINGS
    assert store.get_run(fmr.run_id).status == "queued"
    with pytest.raises(DuplicateRunError, match=fmr.run_id):
        enqueue_run(store, DOMAIN, CFG, fmr=SETTINGS)
    # a plain classifier under test is named, not loaded, here: the worker checks it when it loads it
    enqueue_run(store, DOMAIN, CFG.model_copy(update={"models": ["py:some_module:classify"]}), fmr=SETTINGS)


@pytest.mark.parametrize("case", ["one_oracle", "classifier_oracle", "unknown_oracle", "unlabelled"])
def test_bad_fmr_launch_inputs_are_refused_before_anything_is_stored(case: str, home: Path, tmp_path: Path) -> None:
    store = open_store()
    cfg, settings, expect = CFG, SETTINGS, ""
    if case == "one_oracle":
        settings, expect = FmrSettings(oracle=[PLAIN]), "at least 2 zero-shot models"
    elif case == "classifier_oracle":
        settings, expect = FmrSettings(oracle=[PLAIN, "py:m:f"]), "not zero-shot capable"
    elif case == "unknown_oracle":
        settings, expect = FmrSettings(oracle=[PLAIN, "embedded:nope"]), "unknown model 'embedded:nope'"
    else:
        flat = tmp_path / "flat"  # a folder of images without class folders: no labels
        flat.mkdir()
        for i in range(2):
            Image.fromarray(np.full((8, 8, 3), 40 * i, np.uint8)).save(flat / f"{i}.png")
        cfg = CFG.model_copy(update={"dataset": str(flat), "classes": ["cat", "dog"]})
        expect = "has no labels"
    with pytest.raises(UserInputError, match=expect):
        enqueue_run(store, DOMAIN, cfg, fmr=settings)
    assert store.list_runs() == []


class _StopAfter:
    """Engine events that interrupt the run like Ctrl-C once ``n`` units are stored."""

    def __init__(self, n: int) -> None:
        self.n, self.seen = n, 0

    def start(self, total_units: int, done_units: int) -> None:
        pass

    def message(self, text: str) -> None:
        pass

    def advance(self, units: int, images: int) -> None:
        self.seen += units
        if self.seen >= self.n:
            raise KeyboardInterrupt


def test_run_resume_continues_an_fmr_run_like_fmr_resume(home: Path, capsys, monkeypatch) -> None:
    """One lifecycle: `domainbench run --resume` of an FMR run finishes it (it used to refuse it)."""
    from domainbench.engine.runner import Engine
    from tests.cli_runner import run_cli

    store = open_store()
    settings = SETTINGS.model_copy(update={"shard_size": 3, "budget": 2, "candidates": 2})
    with pytest.raises(KeyboardInterrupt):
        Engine(store, _StopAfter(1)).start(DOMAIN, CFG, run_id="stopped", fmr=settings)
    assert store.get_run("stopped").status == "interrupted" and len(store.fmr("stopped")) == 1
    first = store.fmr("stopped")[0]
    code, out, err = run_cli(["run", "--resume", "stopped"], capsys, monkeypatch)
    assert code == 0, err
    assert "FMR" in out and "oracle: majority of 2" in out
    done = {r.shard: r for r in store.fmr("stopped")}
    assert sorted(done) == [0, 1] and done[first.shard] == first  # the stored unit is untouched
    whole = Engine(store).start(DOMAIN, CFG, run_id="whole", fmr=settings)
    assert [(r.final_preds, r.steps, r.images) for r in sorted(store.fmr(whole), key=lambda r: r.shard)] == \
        [(done[s].final_preds, done[s].steps, done[s].images) for s in (0, 1)]
    assert store.get_run("stopped").status == "done" and store.get_report("stopped").fmr is not None

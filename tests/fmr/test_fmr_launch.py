"""Queueing an FMR run (the UI's launch path, ``launch.enqueue_run(..., fmr=...)``): its inputs are
checked before anything is stored, and it is other work than a corruption run of the same plan."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from domainbench.config import CorruptionChoice, DomainConfig, FmrSettings, RunConfig
from domainbench.errors import UserInputError
from domainbench.launch import enqueue_run
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

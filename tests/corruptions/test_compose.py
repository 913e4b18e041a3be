"""Composed corruptions equal their steps applied one after the other with the derived seeds; plans carry them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from domainbench import corruptions
from domainbench.records.config import DomainConfig, load_domain
from domainbench.errors import UserInputError

STEPS = [("brightness", 2), ("gaussian_noise", 3), ("motion_blur", 1)]


def _images() -> np.ndarray:
    return np.random.default_rng(0).integers(0, 256, (4, 32, 32, 3), dtype=np.uint8)


def test_a_composition_equals_its_steps_by_hand() -> None:
    images, seeds = _images(), [11, 12, 13, 14]
    out, drawn = corruptions.corrupt_composed(images, STEPS, seeds)
    by_hand, before_last = images, None
    for k, (name, severity) in enumerate(STEPS):
        before_last = by_hand
        by_hand = np.stack([corruptions.corrupt(img, name, severity=severity, seed=corruptions.derive_seed(s, k))
                            for img, s in zip(by_hand, seeds)])
    np.testing.assert_array_equal(out, by_hand)
    # what each step drew is what that step alone draws with its seeds (motion_blur: a direction per image)
    _, last_drawn = corruptions.corrupt_batch(before_last, "motion_blur", severity=1,
                                              seeds=[corruptions.derive_seed(s, 2) for s in seeds], return_drawn=True)
    assert len(drawn) == 3 and drawn[2] == last_drawn and len(next(iter(last_drawn.values()))) == 4
    # pure: the same seeds give the same pixels, another image order gives each image its own pixels
    again, _ = corruptions.corrupt_composed(images[::-1], STEPS, seeds[::-1])
    np.testing.assert_array_equal(again[::-1], out)
    assert not np.array_equal(out, images)


@pytest.mark.parametrize(("steps", "needle"), [
    ([], "1 to 5 steps"),
    ([("brightness", 1)] * 6, "1 to 5 steps"),
    ([("brigtness", 1)], "brightness"),
    ([("brightness", 6)], "1..5"),
    ([("brightness", "3")], "1..5"),
])
def test_bad_steps_are_refused_by_name(steps: list, needle: str) -> None:
    with pytest.raises(corruptions.CorruptionError, match=needle):
        corruptions.corrupt_composed(_images(), steps, [0, 1, 2, 3])


def test_plans_load_with_and_without_compositions(tmp_path: Path) -> None:
    old = tmp_path / "old.toml"
    old.write_text('schema_version = 1\ndomain = "x"\n[[corruptions]]\nname = "fog"\nseverities = [1]\n')
    cfg = load_domain(old)
    assert cfg.compositions == [] and cfg.schema_version == 1
    new = tmp_path / "new.toml"
    new.write_text('domain = "night"\n[[corruptions]]\nname = "fog"\nseverities = [1]\n'
                   '[[compositions]]\nname = "night rain"\nreason = "dark and wet"\n'
                   'steps = [{corruption = "brightness", severity = 3}, {corruption = "rain", severity = 2}]\n')
    cfg = load_domain(new)
    assert cfg.schema_version == 2 and cfg.compositions[0].cell_name == "compose:night rain"
    assert cfg.compositions[0].pairs == [("brightness", 3), ("rain", 2)]


@pytest.mark.parametrize(("steps", "needle"), [
    ('[{corruption = "brightnes", severity = 3}]', "brightness"),
    ('[{corruption = "brightness", severity = "3"}]', "severity"),
    ('[{corruption = "brightness", severity = 9}]', "severity"),
    ("[" + ", ".join(['{corruption = "fog", severity = 1}'] * 6) + "]", "steps"),
])
def test_bad_compositions_name_the_input(tmp_path: Path, steps: str, needle: str) -> None:
    p = tmp_path / "bad.toml"
    p.write_text(f'domain = "x"\n[[corruptions]]\nname = "fog"\n[[compositions]]\nname = "c"\nsteps = {steps}\n')
    with pytest.raises(UserInputError, match=needle):
        load_domain(p)


def test_composition_names_are_unique() -> None:
    step = {"corruption": "fog", "severity": 1}
    with pytest.raises(ValueError, match="composition listed twice"):
        DomainConfig(domain="x", corruptions=[], compositions=[{"name": "a", "steps": [step]}] * 2)

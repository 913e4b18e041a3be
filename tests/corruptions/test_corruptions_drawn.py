"""Provenance: the random values a kernel draws come back with the pixels, and can be fixed."""

from __future__ import annotations

import json

import numpy as np
import pytest

from domainbench import corruptions
from domainbench.corruptions import CorruptionError

SEEDS = [11, 12, 13]
#: declared draws a kernel makes only in some environments: frost crops only where the reference's
#: photographs are installed (tests/corruptions/test_frost_photos.py covers both sources)
ONLY_SOMETIMES = {"frost": {"crop"}}


@pytest.fixture(scope="module")
def images(request) -> np.ndarray:
    photo = request.getfixturevalue("photo")
    return np.stack([photo(48, 64), photo(48, 64, "flower.jpg"), np.full((48, 64, 3), 128, np.uint8)])


def _flat(values):
    for v in values:
        if isinstance(v, list):
            yield from _flat(v)
        else:
            yield v


@pytest.mark.parametrize("name", corruptions.names(temporal=False))
def test_drawn_values_are_declared_per_image_in_range_and_json(images, name):
    spec = corruptions.get(name)
    plain = corruptions.corrupt_batch(images, name, severity=4, seeds=SEEDS)
    out, drawn = corruptions.corrupt_batch(images, name, severity=4, seeds=SEEDS, return_drawn=True)
    np.testing.assert_array_equal(out, plain)  # asking for provenance never changes a pixel
    assert set(drawn) <= set(spec.draws) and set(spec.draws) - set(drawn) <= ONLY_SOMETIMES.get(name, set())
    json.dumps(drawn)
    for key, values in drawn.items():
        assert len(values) == len(images)
        assert all(v is not None for v in values)
        if spec.draws[key] is not None:
            lo, hi = spec.draws[key]
            assert all(lo <= v <= hi for v in _flat(values)), (key, values)


@pytest.mark.parametrize("name", [n for n in corruptions.names(temporal=False) if corruptions.get(n).draws])
def test_fixing_the_drawn_values_with_the_same_seeds_changes_nothing(images, name):
    out, drawn = corruptions.corrupt_batch(images, name, severity=3, seeds=SEEDS, return_drawn=True)
    again, drawn_again = corruptions.corrupt_batch(images, name, severity=3, seeds=SEEDS, return_drawn=True, drawn=drawn)
    np.testing.assert_array_equal(again, out)
    assert drawn_again == drawn


@pytest.mark.parametrize("name", ["motion_blur", "color_shift", "chromatic_aberration"])
def test_the_drawn_values_alone_reproduce_a_corruption_whose_only_randomness_they_are(images, name):
    out, drawn = corruptions.corrupt_batch(images, name, severity=5, seeds=SEEDS, return_drawn=True)
    other_seeds = [101, 102, 103]
    free = corruptions.corrupt_batch(images, name, severity=5, seeds=other_seeds)
    fixed, drawn_fixed = corruptions.corrupt_batch(images, name, severity=5, seeds=other_seeds, return_drawn=True, drawn=drawn)
    assert not np.array_equal(free, out)  # other seeds draw other values ...
    np.testing.assert_array_equal(fixed, out)  # ... unless the drawn values are fixed
    assert drawn_fixed == drawn


def test_motion_blur_angle_drawn_from_its_interval_and_applied(images):
    _, drawn = corruptions.corrupt_batch(images, "motion_blur", severity=3, seeds=list(range(40, 43)), return_drawn=True)
    assert all(-45.0 <= a < 45.0 for a in drawn["angle"])  # ImageNet-C's interval
    horizontal = corruptions.corrupt_batch(images, "motion_blur", severity=5, seeds=SEEDS, drawn={"angle": [0.0, 0.0, 0.0]})
    vertical = corruptions.corrupt_batch(images, "motion_blur", severity=5, seeds=SEEDS, drawn={"angle": [45.0, 45.0, 45.0]})
    # a horizontal streak leaves rows smooth, a diagonal one smooths columns too
    row_var = lambda x: np.abs(np.diff(x[0].astype(float), axis=1)).mean()  # noqa: E731
    col_var = lambda x: np.abs(np.diff(x[0].astype(float), axis=0)).mean()  # noqa: E731
    assert row_var(horizontal) < row_var(vertical) and col_var(vertical) < col_var(horizontal)


def test_partly_fixed_values_draw_the_rest(images):
    out, drawn = corruptions.corrupt_batch(images, "motion_blur", severity=3, seeds=SEEDS, return_drawn=True)
    mixed, mixed_drawn = corruptions.corrupt_batch(
        images, "motion_blur", severity=3, seeds=SEEDS, return_drawn=True, drawn={"angle": [None, 30.0, None]}
    )
    assert mixed_drawn["angle"] == [drawn["angle"][0], 30.0, drawn["angle"][2]]
    np.testing.assert_array_equal(mixed[[0, 2]], out[[0, 2]])


def test_kernels_without_recorded_draws_give_an_empty_dict(images):
    for name in ("gaussian_noise", "fog", "gaussian_blur", "horizontal_flip"):
        out, drawn = corruptions.corrupt_batch(images, name, severity=2, seeds=1, return_drawn=True)
        assert drawn == {} and out.shape == images.shape


def test_bad_fixed_values_name_the_problem(images):
    with pytest.raises(CorruptionError, match="draws no 'angel'; it draws: angle"):
        corruptions.corrupt_batch(images, "motion_blur", severity=1, drawn={"angel": [1.0, 2.0, 3.0]})
    with pytest.raises(CorruptionError, match="draws no 'angle'; it draws: nothing"):
        corruptions.corrupt_batch(images, "gaussian_noise", severity=1, drawn={"angle": [1.0, 2.0, 3.0]})
    with pytest.raises(CorruptionError, match="one value per image"):
        corruptions.corrupt_batch(images, "motion_blur", severity=1, drawn={"angle": [1.0]})
    with pytest.raises(CorruptionError, match=r"outside the interval \[-45, 45\]"):
        corruptions.corrupt_batch(images, "motion_blur", severity=1, drawn={"angle": [1.0, 200.0, 3.0]})


def test_a_kernel_must_declare_what_it_records(images):
    def kernel(img, p, rng):
        corruptions.record(rng, "secret", float(rng.random()))
        return img.copy()

    spec = corruptions.CorruptionSpec(
        name="undeclared_draw", family="digital", description="Copies.", situations=["tests"],
        params_model=corruptions.Params, ladder={s: {} for s in range(1, 6)}, apply=kernel, ordinal=False,
    )
    corruptions.register(spec)
    try:
        with pytest.raises(RuntimeError, match="recorded \\['secret'\\]"):
            corruptions.corrupt_batch(images, "undeclared_draw", severity=1)
    finally:
        corruptions.unregister("undeclared_draw")


def test_record_outside_the_api_just_returns_the_value():
    rng = np.random.default_rng(0)
    assert corruptions.record(rng, "angle", 12.5) == 12.5

from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest
from pydantic import Field

from domainbench import corruptions
from domainbench.corruptions import CorruptionError, CorruptionSpec, Params, named_registry, registry

PRODUCT_PAPER = [  # the product paper's 15 corruptions
    "gaussian_blur", "rotation", "gaussian_noise", "salt_and_pepper", "color_shift", "contrast", "brightness",
    "horizontal_flip", "vertical_flip", "rain", "shadow", "motion_blur", "grid_distortion", "elastic",
    "perspective", "cloud_overlay",
]
IMAGENET_C = [
    "jpeg_compression", "brightness", "contrast", "defocus_blur", "elastic", "fog", "frost", "gaussian_noise",
    "glass_blur", "shot_noise", "impulse_noise", "speckle_noise", "zoom_blur", "snow", "pixelate", "saturate",
]


def test_catalogue_covers_both_references_and_all_families():
    names = corruptions.names()
    assert names == sorted(names) and len(names) == len(set(names)) >= 28
    assert set(PRODUCT_PAPER) <= set(names)
    assert set(IMAGENET_C) <= set(names)
    assert {corruptions.get(n).family for n in names} == set(corruptions.FAMILIES)


@pytest.mark.parametrize("name", corruptions.names())
def test_spec_metadata(name):
    spec = corruptions.get(name)
    assert spec.name == name
    assert spec.description.strip().endswith(".") and len(spec.description) < 200
    assert len(spec.situations) >= 3 and len(set(spec.situations)) == len(spec.situations)
    assert sorted(spec.ladder) == [1, 2, 3, 4, 5]
    for s in range(1, 6):
        assert spec.severity_params(s) == spec.validate(spec.ladder[s])
    if spec.ordinal:
        assert spec.ranges, f"{name}: an ordinal corruption needs a continuous domain"
        assert len({json.dumps(spec.ladder[s], sort_keys=True) for s in range(1, 6)}) == 5


@pytest.mark.parametrize("name", [n for n in corruptions.names() if corruptions.get(n).ranges])
def test_continuous_params_are_equally_spaced_from_weakest_to_strongest(name):
    spec = corruptions.get(name)
    points = spec.continuous_params(5)
    assert len(points) == 5
    for key, (weak, strong) in spec.ranges.items():
        values = np.array([p[key] for p in points], dtype=float)
        assert values[0] == pytest.approx(weak) and values[-1] == pytest.approx(strong)
        if spec.params_model.model_fields[key].annotation is float:
            np.testing.assert_allclose(np.diff(values), (strong - weak) / 4, rtol=1e-5, atol=1e-6)
    for p in points:  # every point is a valid parameter set that can be applied
        assert corruptions.validate_params(name, p) == p


def test_catalogue_is_json_and_names_ranges_with_suffix():
    cat = corruptions.catalogue()
    assert [c["name"] for c in cat] == corruptions.names()
    text = json.dumps(cat)
    assert "situations" in text
    blur = next(c for c in cat if c["name"] == "gaussian_blur")
    assert blur["ranges"] == {"sigma_range": [0.5, 7.0]}
    assert blur["parameters"]["sigma"]["min"] == 0.1 and blur["parameters"]["sigma"]["max"] == 20.0
    assert blur["ladder"]["5"] == {"sigma": 6.0}


def test_unknown_name_suggests_close_names():
    with pytest.raises(CorruptionError, match="did you mean 'gaussian_noise'") as info:
        corruptions.get("gausian_noise")
    assert isinstance(info.value, ValueError)
    with pytest.raises(CorruptionError, match="unknown corruption 'zzzz'"):
        corruptions.corrupt(np.zeros((16, 16), np.uint8), "zzzz", severity=1)
    assert corruptions.get("Gaussian-Noise").name == "gaussian_noise"


class _InvertParams(Params):
    amount: float = Field(1.0, ge=0.0, le=1.0)


def _invert(img, p, rng):
    return np.clip(np.rint(img * (1 - p.amount) + (255 - img.astype(float)) * p.amount), 0, 255).astype(np.uint8)


def _ladder():
    return {s: {"amount": s / 5} for s in range(1, 6)}


def test_register_decorator_and_duplicate_protection():
    try:
        corruptions.register(
            name="test_invert", family="digital", description="Inverts the image.", situations=["negative film"],
            params_model=_InvertParams, ladder=_ladder(), ranges={"amount": (0.1, 1.0)},
        )(_invert)
        img = np.full((16, 16), 10, np.uint8)
        assert (corruptions.corrupt(img, "test_invert", severity=5) == 245).all()
        assert "test_invert" in corruptions.names()
        with pytest.raises(CorruptionError, match="already registered"):
            corruptions.register(CorruptionSpec(
                name="test_invert", family="digital", description="x.", situations=["y"],
                params_model=_InvertParams, ladder=_ladder(), apply=_invert,
            ))
    finally:
        corruptions.unregister("test_invert")
    assert "test_invert" not in corruptions.names()


def test_batch_only_spec_gets_a_single_image_apply():
    calls = []

    def invert_batch(imgs, p, rngs):
        calls.append(len(rngs))
        return np.stack([_invert(img, p, rng) for img, rng in zip(imgs, rngs)])

    spec = CorruptionSpec(name="x", family="digital", description="d.", situations=["s"],
                          params_model=_InvertParams, ladder=_ladder(), apply_batch=invert_batch)
    img = np.arange(16 * 16 * 3, dtype=np.uint8).reshape(16, 16, 3)
    params = _InvertParams(amount=0.6)
    out = spec.apply(img, params, np.random.default_rng(0))
    np.testing.assert_array_equal(out, _invert(img, params, None))
    assert out.shape == img.shape and calls == [1]
    with pytest.raises(CorruptionError, match="needs a kernel"):
        CorruptionSpec(name="x", family="digital", description="d.", situations=["s"],
                       params_model=_InvertParams, ladder=_ladder())


def test_spec_rejects_bad_definitions():
    with pytest.raises(CorruptionError, match="snake_case"):
        CorruptionSpec(name="Bad Name", family="noise", description="d.", situations=["s"],
                       params_model=_InvertParams, ladder=_ladder(), apply=_invert)
    with pytest.raises(CorruptionError, match="family"):
        CorruptionSpec(name="x", family="weird", description="d.", situations=["s"],  # type: ignore[arg-type]
                       params_model=_InvertParams, ladder=_ladder(), apply=_invert)
    with pytest.raises(CorruptionError, match="severities 1..5"):
        CorruptionSpec(name="x", family="noise", description="d.", situations=["s"],
                       params_model=_InvertParams, ladder={1: {}}, apply=_invert)
    with pytest.raises(CorruptionError, match="'amount' = 2"):
        CorruptionSpec(name="x", family="noise", description="d.", situations=["s"],
                       params_model=_InvertParams, ladder={**_ladder(), 5: {"amount": 2}}, apply=_invert)


def test_load_module_from_file_registers_user_corruptions(tmp_path):
    path = tmp_path / "my_corruptions.py"
    path.write_text(textwrap.dedent('''
        import numpy as np
        from pydantic import Field
        from domainbench import corruptions
        class P(corruptions.Params):
            level: int = Field(3, ge=0, le=255)

        @corruptions.register(name="user_fill", family="occlusion", description="Fills the image.",
                              situations=["lens cap left on"], params_model=P,
                              ladder={s: {"level": s} for s in range(1, 6)}, ranges={"level": (1, 5)})
        def fill(img, p, rng):
            return np.full_like(img, p.level)
    '''))
    try:
        assert corruptions.load_module(str(path)) == ["user_fill"]
        out = corruptions.corrupt(np.zeros((20, 20, 3), np.uint8), "user_fill", params={"level": 7})
        assert (out == 7).all()
    finally:
        corruptions.unregister("user_fill")
    with pytest.raises(CorruptionError, match="cannot import"):
        corruptions.load_module("no_such_module_xyz")


def test_entry_points_are_loaded_lazily(monkeypatch, tmp_path):
    spec = CorruptionSpec(name="ep_invert", family="digital", description="Inverts.", situations=["negatives"],
                          params_model=_InvertParams, ladder=_ladder(), apply=_invert)

    class FakeEntryPoint:
        name, value = "ep", "pkg:specs"

        def load(self):
            return lambda: [spec]

    seen = []
    monkeypatch.setattr(named_registry, "entry_points", lambda group: seen.append(group) or [FakeEntryPoint()])
    registry.REGISTRY.reset_plugins()
    try:
        assert "ep_invert" in corruptions.names()
        assert seen == ["domainbench.corruptions"]
        corruptions.names()
        assert seen == ["domainbench.corruptions"]  # loaded once
        assert registry.REGISTRY.origin("ep_invert") == "entry point 'ep'"
    finally:
        registry.REGISTRY.reset_plugins()
    monkeypatch.undo()
    assert "ep_invert" not in corruptions.names()

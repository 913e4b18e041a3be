"""The New domain page's preview: per chosen corruption its reason, its severity ladder with the SSIM
of each severity, and a warning where it leaves the sample image unchanged; the measures themselves."""

from __future__ import annotations

import numpy as np
import pytest
from skimage.metrics import structural_similarity
from test_new_domain import page, texts

from domainbench.records.config import CorruptionChoice, DomainConfig, PlannerProvenance
from domainbench.store import Store
from domainbench.frontend import data, ladder


def test_ladder_ssim_equals_scikit_image_and_no_effect_is_measured() -> None:
    rng = np.random.default_rng(0)
    clean = rng.integers(0, 256, size=(40, 40), dtype=np.uint8)
    noisy = [np.clip(clean + rng.normal(0, s * 20, clean.shape), 0, 255).astype(np.uint8) for s in (1, 2)]
    got = ladder.ladder_ssim(clean, noisy)
    ref = [structural_similarity(clean, x, data_range=255, gaussian_weights=True, sigma=1.5,
                                 use_sample_covariance=False) for x in noisy]
    assert got == pytest.approx(ref, abs=1e-9) and got[0] > got[1]
    almost = clean.copy()
    almost[0, :10] ^= 1  # ten pixels off by one: unchanged to the eye
    assert ladder.pixel_change(clean, almost) == pytest.approx(10 / 1600)
    assert ladder.no_effect([clean], [almost]) and not ladder.no_effect([clean], [noisy[0]])
    assert ladder.no_effect_severities(clean, [almost, noisy[0]], [1, 2]) == [1]
    # one bright drop on a flat background: under half a grey level on average, but visible, and SSIM says so
    flat = np.full((40, 40), 30, dtype=np.uint8)
    drop = flat.copy()
    drop[18:21, 18:21] += 60
    assert ladder.pixel_change(flat, drop) == pytest.approx(9 * 60 / 1600) and 9 * 60 / 1600 < ladder.NO_EFFECT_PIXELS
    assert ladder.ladder_ssim(flat, [drop])[0] < ladder.NO_EFFECT_SSIM
    assert not ladder.no_effect([flat], [drop]) and ladder.no_effect([flat], [flat.copy()])


def test_saturate_does_nothing_to_the_grayscale_sample_at_low_severities() -> None:
    clean = data.preview_image(0)
    assert clean.ndim == 2  # the bundled sample is grayscale
    flat = ladder.no_effect_severities(clean, data.gallery(clean, "saturate"), range(1, 6))
    assert flat == [1, 2, 3]
    assert ladder.no_effect_severities(clean, data.gallery(clean, "gaussian_noise"), range(1, 6)) == []


def test_preview_shows_reasons_ssim_and_flags_a_corruption_without_effect(store: Store,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    def plan_with_colour(text: str, provider: str = "offline", samples: int = 10) -> DomainConfig:
        return DomainConfig(domain=text[:100], corruptions=[
            CorruptionChoice(name="gaussian_noise", severities=[1, 3], reason="high ISO at night"),
            CorruptionChoice(name="saturate", severities=[1, 2], reason="washed-out colours"),
        ], planner=PlannerProvenance(provider=provider, model="fake", samples=samples, frequencies={},
                                     created_at="2025-02-01T00:00:00+00:00"))

    at = page()
    monkeypatch.setattr(data, "plan_domain", plan_with_colour)
    at.text_area(key="domain-text").set_value("dash-cam footage at night")
    next(b for b in at.button if b.label == "Plan").click().run()
    assert not at.exception and not at.error, texts(at.error)
    assert "why: high ISO at night" in texts(at.text) and "why: washed-out colours" in texts(at.text)
    warning = texts(at.warning)
    assert "saturate has no effect on this image at severities 1, 2, 3" in warning
    assert "the plan evaluates 1, 2, cells that measure nothing" in warning and "gaussian_noise has no" not in warning
    captions = [c.caption for img in at.get("image") for c in img.proto.imgs]
    _, _, labels = data.sample_images()
    clean = data.preview_image(int(np.flatnonzero(labels == 0)[0]))  # the page opens on the first class
    expected = ladder.ladder_ssim(clean, data.gallery(clean, "gaussian_noise"))
    assert f"s1 · SSIM {expected[0]:.2f}" in captions and f"s5 · SSIM {expected[4]:.2f} (not run)" in captions

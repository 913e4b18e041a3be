"""``domainbench plan --preview``: the expected SSIM of each chosen severity (and each composition) on the sample
image the UI's New domain page opens on, computed by the function the page uses, equal to scikit-image's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from skimage.metrics import structural_similarity

from domainbench import corruptions
from domainbench.records.config import Composition, CompositionStep, CorruptionChoice, DomainConfig
from domainbench.data import load_sample
from domainbench.frontend import data
from domainbench.metrics import ladder
from tests.cli_runner import run_cli

PLAN = DomainConfig(domain="night dash cam", corruptions=[
    CorruptionChoice(name="gaussian_noise", severities=[1, 4], reason="high ISO"),
    CorruptionChoice(name="saturate", severities=[2], reason="washed-out colours")],
    compositions=[Composition(name="dark and noisy", reason="night",
                              steps=[CompositionStep(corruption="brightness", severity=2),
                                     CompositionStep(corruption="gaussian_noise", severity=3)])])


def _ssim(a: np.ndarray, b: np.ndarray) -> float:
    return float(structural_similarity(a, b, gaussian_weights=True, sigma=1.5, use_sample_covariance=False, data_range=255))


def test_expected_damage_equals_scikit_image_on_the_ui_preview_image() -> None:
    ds = load_sample()
    index = int(np.flatnonzero(ds.labels == 0)[0])
    image = ladder.sample_image(index)
    assert ladder.first_of_each_class()[ds.classes[0]] == index
    np.testing.assert_array_equal(image, data.preview_image(index))  # the page's image, the same pixels
    rows = ladder.expected_damage(PLAN, image)
    assert [(r.cell, r.severity) for r in rows] == [("gaussian_noise", 1), ("gaussian_noise", 4), ("saturate", 2),
                                                    ("compose:dark and noisy", 1)]
    for r in rows[:3]:
        by_hand = corruptions.corrupt(image, r.cell, severity=r.severity, seed=0)
        assert r.ssim == pytest.approx(_ssim(image, by_hand), abs=1e-9)
    # the page's gallery gives the same numbers
    assert rows[1].ssim == pytest.approx(ladder.ladder_ssim(image, data.gallery(image, "gaussian_noise"))[3], abs=1e-12)
    dark = corruptions.corrupt(image, "brightness", severity=2, seed=corruptions.derive_seed(0, 0))
    both = corruptions.corrupt(dark, "gaussian_noise", severity=3, seed=corruptions.derive_seed(0, 1))
    assert rows[3].ssim == pytest.approx(_ssim(image, both), abs=1e-9)
    assert rows[0].ssim > rows[1].ssim and not rows[1].no_effect
    assert rows[2].ssim == 1.0 and rows[2].no_effect  # a colour corruption on the grayscale sample


def test_plan_preview_prints_the_expected_ssim(home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setattr("domainbench.planner.plan", lambda text, **kw: PLAN)
    code, out, err = run_cli(["plan", "night dash cam", "--provider", "offline", "--preview", "-o",
                              str(tmp_path / "p.toml")], capsys, monkeypatch)
    assert code == 0, err
    rows = ladder.expected_damage(PLAN, ladder.sample_image(next(iter(ladder.first_of_each_class().values()))))
    lines = err.splitlines()
    assert any("expected damage on a sample image" in x for x in lines)
    # --preview prints even with --quiet (asked for); without --quiet the plan's tables list the compositions too
    code, _, err = run_cli(["plan", "night dash cam", "--provider", "offline", "-o", str(tmp_path / "r.toml")],
                           capsys, monkeypatch, quiet=False)
    assert code == 0 and "proposed compositions" in err
    assert any("compose:dark and noisy" in x and "brightness s2 → gaussian_noise s3" in x for x in err.splitlines()), err
    for r in rows:
        text = f"{r.ssim:.2f}" + (" (no effect)" if r.no_effect else "")
        assert any(x.split() == [*r.cell.split(), str(r.severity), *text.split()] for x in lines), (r, err)
    code, _, err = run_cli(["plan", "night dash cam", "--provider", "offline", "-o", str(tmp_path / "q.toml")],
                           capsys, monkeypatch)
    assert code == 0 and "expected damage" not in err

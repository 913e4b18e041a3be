"""The planner, given the dataset, leaves out corruptions (and severities) that do not change its images
(issue 27, item 13): measured as the plan preview measures it, named in the plan's notes; ``plan --dataset``
and the New domain page's dataset field."""

from __future__ import annotations

import tomllib

import numpy as np
import pytest
from skimage.metrics import structural_similarity

from domainbench import corruptions
from domainbench.records.config import CorruptionChoice, DomainConfig, PlannerProvenance
from domainbench.metrics.ladder import NO_EFFECT_PIXELS, NO_EFFECT_SSIM
from domainbench.planner.image_fit import PROBE_IMAGES, fit_to_images, pixel_changes, probe_images, unchanged_cells
from tests.cli_runner import run_cli

LONG = ("supermarket shelf photos under flickering colour-tinted lights, oversaturated phone camera colours and "
        "chromatic aberration from cheap lenses")


def plan_of(*choices: tuple[str, list[int]]) -> DomainConfig:
    return DomainConfig(domain=LONG, corruptions=[CorruptionChoice(name=n, severities=s, reason="r") for n, s in choices],
                        planner=PlannerProvenance(provider="offline", frequencies={n: 1.0 for n, _ in choices}))


def by_hand(images: np.ndarray, name: str, severity: int) -> float:
    """Mean absolute difference of every pixel, written out without the module's helper."""
    total, count = 0.0, 0
    for x in images:
        y = np.asarray(corruptions.corrupt(x, name, severity=severity, seed=0)).astype(np.int64)
        total += float(np.abs(y - x.astype(np.int64)).sum())
        count += x.size
    return total / count


def test_grayscale_sample_loses_the_colour_severities_that_change_nothing() -> None:
    images, name = probe_images("sample")
    assert images.shape[0] == PROBE_IMAGES and images.ndim == 3  # grayscale
    cfg = plan_of(("saturate", [1, 2, 3, 4, 5]), ("gaussian_noise", [1, 3]), ("chromatic_aberration", [1]))
    changes = pixel_changes(cfg, images)
    for (n, s), v in changes.items():
        assert v == pytest.approx(by_hand(images, n, s))
    flat = unchanged_cells(cfg, images)
    for (n, s), v in changes.items():  # both measures, by hand: mean pixel change and SSIM
        corrupted = [corruptions.corrupt(x, n, severity=s, seed=0) for x in images]
        ssim = np.mean([structural_similarity(x, np.asarray(y), data_range=255, gaussian_weights=True, sigma=1.5,
                                              use_sample_covariance=False) for x, y in zip(images, corrupted, strict=True)])
        assert ((n, s) in flat) == (v < NO_EFFECT_PIXELS and ssim >= NO_EFFECT_SSIM), (n, s, v, ssim)
    assert ("saturate", 1) in flat and ("gaussian_noise", 1) not in flat
    fitted = fit_to_images(cfg, images, name)
    kept = {c.name: c.severities for c in fitted.corruptions}
    assert kept["saturate"] == [s for s in range(1, 6) if ("saturate", s) not in flat]
    assert kept["gaussian_noise"] == [1, 3] and "chromatic_aberration" not in kept
    notes = fitted.planner.violations
    assert any(n.startswith("left out chromatic_aberration: no effect on 6 images of sample[:6]") for n in notes)
    assert any(n.startswith("left out saturate severities 1, 2, 3") for n in notes)
    assert fitted.planner.frequencies == cfg.planner.frequencies  # the vote is kept as it was


def test_colour_images_keep_every_colour_corruption() -> None:
    rgb = np.random.default_rng(0).integers(0, 256, size=(4, 32, 32, 3), dtype=np.uint8)
    cfg = plan_of(("saturate", [1, 5]), ("chromatic_aberration", [3]))
    fitted = fit_to_images(cfg, rgb, "colour")
    assert fitted.corruptions == cfg.corruptions and fitted.planner.violations == cfg.planner.violations
    from domainbench.planner.audit import digest_pixels

    assert fitted.planner.inputs == {"dataset": digest_pixels(rgb)}  # the pixels it rests on are recorded


def test_a_plan_that_would_be_empty_is_kept_and_says_so() -> None:
    gray = np.full((3, 16, 16), 128, dtype=np.uint8)
    cfg = plan_of(("saturate", [1]))
    fitted = fit_to_images(cfg, gray, "flat")
    assert fitted.corruptions == cfg.corruptions
    assert fitted.planner.violations[-1].startswith("every chosen corruption has no effect")


def test_plan_dataset_on_the_command_line(home, capsys, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    import domainbench.planner

    monkeypatch.setattr(domainbench.planner, "plan", lambda *a, **k: plan_of(("saturate", [1, 4]), ("gaussian_noise", [2])))
    code, out, err = run_cli(["plan", LONG, "--dataset", "sample"], capsys, monkeypatch)
    assert code == 0, err
    planned = tomllib.loads(out)  # the TOML on stdout is whole: a long domain line is not folded
    assert planned["domain"] == LONG
    assert [(c["name"], c["severities"]) for c in planned["corruptions"]] == [("saturate", [4]), ("gaussian_noise", [2])]
    assert "left out saturate severity 1" in err and "left out saturate severity 1" in str(planned["planner"]["violations"])
    # a dataset that does not exist: one line naming it, status 2, nothing planned or stored
    called = []
    monkeypatch.setattr(domainbench.planner, "plan", lambda *a, **k: called.append(1))
    code, out, err = run_cli(["plan", LONG, "--dataset", str(home / "nope")], capsys, monkeypatch)
    assert code == 2 and "does not exist" in err and not called and out == ""

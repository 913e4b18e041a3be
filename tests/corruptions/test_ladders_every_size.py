"""Severity ladders stay monotone at every image size: damage (1 - SSIM against the clean photo, mean
over a fixed few photos) rises from each severity to the next at 32, 64, 128, 224, 512 and 1024 px.

Size-dependent parameters are given at a 224-pixel short side and scaled with the image
(``corruptions.spec.side_scale``), so a ladder that is monotone at 224 should stay so at any size.
Exempt are the steps where ImageNet-C's own ladder does not rise by 0.02 (measured on the reference,
``imagecorruptions`` 1.1.2, in ``data/imagenet_c_reference.json``: glass_blur 1-2 and 3-4, snow
2-3 and 4-5, zoom_blur 2-3 and 4-5, spatter 3-4, frost 3-4, fog 3-4); saturate 2-3 (it desaturates
at 1-2 and saturates at 3-5: two directions whose damage order depends on the photo; the reference
falls there too on these photos: 0.190 -> 0.171); and steps where both severities leave the photo
untouched at that size (a blur below a tenth of a pixel). Below 224 px the corruptions whose
parameters are pixel lengths (defocus radius, glass displacement) are also held to the reference's
224 px output shrunk to the size (``data/imagenet_c_small_sizes.json``, from
``benchmarks/imagenet_c_small_sizes.py``). 512 and 1024 px are marked
``slow`` (still part of ``make test``).
"""

from __future__ import annotations

import json
import sys
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

from domainbench import corruptions

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from imagenet_c_fidelity import IMAGENET_C, SSIM_TOL, ssim  # noqa: E402
from imagenet_c_small_sizes import NAMES as PIXEL_LENGTH_LADDERS  # noqa: E402
from imagenet_c_small_sizes import photos as small_size_photos  # noqa: E402

DATA = Path(__file__).parent / "data"
SIZES = (32, 64, 128, 224, 512, 1024)
SLOW = {512, 1024}
#: our names of ImageNet-C's corruptions, where they differ
OURS = {"elastic_transform": "elastic", "spatter": "lens_spatter"}
#: a reference step that rises by less than this is a plateau of ImageNet-C's ladder, not a rise
REFERENCE_RISE = 0.02
#: damage below this at both ends of a step: the photo is untouched at this size (uint8 rounding)
UNTOUCHED = 0.002
#: steps (s, s + 1) exempt beyond the reference's plateaus, with the reason in the module docstring
EXTRA_EXEMPT = {"saturate": {(2, 3)}}
ORDINAL = [n for n in corruptions.names(temporal=False) if corruptions.get(n).ordinal]


@lru_cache
def reference_plateaus() -> dict[str, set[tuple[int, int]]]:
    cells = json.loads((DATA / "imagenet_c_reference.json").read_text())["cells"]
    out: dict[str, set[tuple[int, int]]] = {}
    for name in IMAGENET_C:
        damage = [1 - np.mean([row[0] for row in cells[f"{name}/{s}"]]) for s in range(1, 6)]
        out[OURS.get(name, name)] = {(s, s + 1) for s in range(1, 5) if damage[s] - damage[s - 1] < REFERENCE_RISE}
    return out


@lru_cache
def photos(size: int) -> tuple[np.ndarray, ...]:
    """Square centre crops of scikit-learn's two sample photographs."""
    return tuple(small_size_photos(size))


def damage_curve(name: str, size: int) -> np.ndarray:
    """Mean 1 - SSIM by severity; each photo keeps its seed across severities (common random numbers)."""
    imgs = photos(size)
    return np.array([
        np.mean([1 - ssim(img, corruptions.corrupt(img, name, severity=s, seed=k)) for k, img in enumerate(imgs)])
        for s in range(1, 6)
    ])


def test_the_exemptions_are_the_references_plateaus() -> None:
    plateaus = reference_plateaus()
    assert plateaus["glass_blur"] == {(1, 2), (3, 4)} and plateaus["snow"] == {(2, 3), (4, 5)}
    assert plateaus["lens_spatter"] == {(3, 4)} and plateaus["gaussian_noise"] == set()
    assert (2, 3) not in plateaus["saturate"]  # on the reference's own photos it rises: the exemption is ours


@pytest.mark.parametrize("size", [pytest.param(s, marks=pytest.mark.slow) if s in SLOW else s for s in SIZES])
def test_every_ladder_rises_at_every_size(size: int) -> None:
    plateaus = reference_plateaus()
    failures = []
    for name in ORDINAL:
        d = damage_curve(name, size)
        exempt = plateaus.get(name, set()) | EXTRA_EXEMPT.get(name, set())
        for s in range(1, 5):
            if (s, s + 1) in exempt or max(d[s - 1], d[s]) < UNTOUCHED:
                continue
            if not d[s] > d[s - 1]:
                failures.append(f"{name} {s}->{s + 1}: {np.round(d, 4)}")
        if not d[4] > d[0] + UNTOUCHED:
            failures.append(f"{name} does not rise overall: {np.round(d, 4)}")
    assert not failures, f"at {size} px:\n" + "\n".join(failures)


@pytest.mark.parametrize("size", [32, 64, 128])
def test_pixel_length_ladders_below_224_follow_the_references_shrunk_output(size: int) -> None:
    """Below 224 px defocus_blur's radii and glass_blur's displacements shrink with the image: damage at
    each severity within the fidelity tolerance of the reference's 224 px output shrunk to the size
    (the reference run at the size itself, with its unscaled 224 px lengths, damages 0.3-0.7)."""
    curves = json.loads((DATA / "imagenet_c_small_sizes.json").read_text())["curves"]
    for name in PIXEL_LENGTH_LADDERS:
        shrunk = np.array(curves[f"{name}/{size}"]["shrunk"])
        ours = damage_curve(name, size)
        assert np.abs(ours - shrunk).max() <= SSIM_TOL, (name, np.round(ours, 3), shrunk)
    # glass_blur's reference ladder, shrunk, has the plateaus it has at 224 px (1-2, 3-4), and rises at 2-3 and 4-5
    glass = np.array(curves[f"glass_blur/{size}"]["shrunk"])
    assert glass[2] > glass[1] + REFERENCE_RISE and glass[4] > glass[3] + REFERENCE_RISE
    assert glass[1] - glass[0] < REFERENCE_RISE and glass[3] - glass[2] < REFERENCE_RISE


@pytest.mark.parametrize("sigma", [0.6, 1.0, 2.0, 4.0, 9.0])
def test_smoothed_noise_spread_matches_a_sampled_field(sigma: float) -> None:
    """The spread left of white noise after the kernel's Gaussian, against scipy's filter on a sampled field."""
    from scipy.ndimage import gaussian_filter

    from domainbench.corruptions.kernels.occlusion import _smoothed_noise_sd

    noise = np.random.default_rng(3).normal(0.0, 1.0, (600, 600))
    sampled = gaussian_filter(noise, sigma, mode="nearest", truncate=4.0)[50:-50, 50:-50].std()
    assert _smoothed_noise_sd(sigma) == pytest.approx(sampled, rel=0.03)


@pytest.mark.parametrize("size", [64, 448])
def test_lens_spatter_changes_any_image_as_much_as_a_224_pixel_one(size: int) -> None:
    """The same severity adds as much water (or mud) to a 64 or a 448 px grey image as to a 224 px one
    (mean change within 15%); above 224 the wetted share is the same too (below, shrinking spreads it)."""
    def stats(side: int, severity: int) -> tuple[float, float]:
        grey = np.full((side, side, 3), 90, np.uint8)
        outs = [corruptions.corrupt(grey, "lens_spatter", severity=severity, seed=k).astype(np.float64) for k in range(3)]
        return float(np.mean([np.abs(o - 90).mean() for o in outs])), float(np.mean([(o != 90).any(-1).mean() for o in outs]))

    for severity in (2, 3, 5):
        (change, share), (change_224, share_224) = stats(size, severity), stats(224, severity)
        assert change == pytest.approx(change_224, rel=0.15), (severity, change, change_224)
        if size > 224:
            assert share == pytest.approx(share_224, abs=0.03), (severity, share, share_224)

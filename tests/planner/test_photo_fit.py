"""Plans fitted to deployment photos (issue 39, Deliver 3): the estimators against independent
computations, continuous severities, and the recovery of known corruptions given as --photos."""

from __future__ import annotations

import io
import tomllib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from scipy import ndimage

from domainbench import corruptions
from domainbench.planner import photo_fit as pf
from tests.cli_runner import run_cli


def smooth(h: int = 96, w: int = 96) -> np.ndarray:
    yy, xx = np.mgrid[0:h, 0:w]
    return 60.0 + 100.0 * (xx / w) + 30.0 * np.sin(yy / 17.0)


def immerkaer(g: np.ndarray) -> float:
    """Immerkaer (1996) fast noise variance estimation: an independent estimator of σ."""
    n = np.array([[1, -2, 1], [-2, 4, -2], [1, -2, 1]], dtype=np.float64)
    conv = ndimage.convolve(g, n)[1:-1, 1:-1]
    h, w = g.shape
    return float(np.sqrt(np.pi / 2) * np.abs(conv).sum() / (6.0 * (w - 2) * (h - 2)))


@pytest.mark.parametrize("sigma", [3.0, 10.0, 25.0])
def test_noise_sigma_matches_the_truth_and_an_independent_estimator(sigma: float) -> None:
    rng = np.random.default_rng(0)
    g = smooth(128, 128) + rng.normal(0, sigma, (128, 128))
    est = pf.noise_sigma(g)
    assert est == pytest.approx(sigma, rel=0.08)
    assert est == pytest.approx(immerkaer(g), rel=0.08)
    # the Haar diagonal detail written out per 2x2 block
    hh = [(g[i, j] - g[i, j + 1] - g[i + 1, j] + g[i + 1, j + 1]) / 2 for i in range(0, 128, 2) for j in range(0, 128, 2)]
    assert est == pytest.approx(np.median(np.abs(hh)) / 0.6745, rel=1e-12)


def test_jpeg_quality_from_quantisation_tables(tmp_path: Path) -> None:
    img = Image.fromarray(smooth().astype(np.uint8))
    for q in (20, 50, 75, 90):
        path = tmp_path / f"q{q}.jpg"
        img.save(path, quality=q)
        assert pf.jpeg_quality(path) == pytest.approx(q, abs=1.5), q
    img.save(tmp_path / "x.png")
    assert pf.jpeg_quality(tmp_path / "x.png") is None
    # the continuous jpeg_compression severity of a quality on its ladder: severity 3 is quality 15
    assert pf.quality_severity(15) == pytest.approx(3.0) and pf.quality_severity(95) is None


def test_blockiness_dark_channel_and_impulses_by_hand() -> None:
    img = smooth().astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(img).save(buf, format="JPEG", quality=5)
    blocky = np.asarray(Image.open(buf))
    assert pf.blockiness(blocky) > 1.3 > pf.blockiness(img) * 1.1
    x = np.zeros((30, 30), dtype=np.uint8)
    x[:, 15:] = 200
    # dark channel: a 3x3 minimum (size max(3, 30/15)=3, odd) then the mean
    assert pf.dark_channel(x) == pytest.approx(ndimage.minimum_filter(x.astype(float), 3).mean() / 255)
    y = np.full((20, 20), 120, dtype=np.uint8)
    y[5, 5], y[10, 12] = 255, 0
    assert pf.impulses(y) == pytest.approx(2 / 400)


def test_continuous_severity_interpolates_the_ladder() -> None:
    s2, s3 = (corruptions.resolve_params("gaussian_noise", severity=s)["sigma"] for s in (2, 3))
    assert pf.params_at("gaussian_noise", 2.5)["sigma"] == pytest.approx((s2 + s3) / 2)
    assert pf.params_at("gaussian_noise", 3.0) == corruptions.resolve_params("gaussian_noise", severity=3)
    q1, q2 = (corruptions.resolve_params("jpeg_compression", severity=s)["quality"] for s in (1, 2))
    assert pf.params_at("jpeg_compression", 1.5)["quality"] == round((q1 + q2) / 2)  # an integer parameter stays one
    assert pf.levels(2.6) == [2, 3] and pf.levels(1.0) == [1] and pf.levels(5.0) == [5]


@pytest.fixture(scope="module")
def clean() -> np.ndarray:
    return pf.probe_clean("sample", n=24)[0]


def test_known_corruptions_are_recovered_from_other_images(clean: np.ndarray) -> None:
    """Other images of the dataset, corrupted at a known severity: the fit names it in its top 3, within 0.75."""
    photos = pf.probe_clean("sample", n=12, offset=500)[0]
    # (fog at 2.6 is fitted near 4 on these 28-pixel images: the benchmark lists such misses)
    names = ["gaussian_noise", "contrast", "brightness", "pixelate", "motion_blur", "low_light"]
    rec = pf.recovery(clean, photos, severities=(2.6,), names=names)
    missed = [t for t in rec.trials if not t.recovered]
    assert not missed, missed
    assert {t.name for t in rec.trials} == set(names) and "color_shift (the clean images are greyscale)" in rec.unmeasurable


def _write(images: np.ndarray, folder: Path, size: int | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for i, x in enumerate(images):
        im = Image.fromarray(x)
        (im.resize((size, size)) if size else im).save(folder / f"{i}.png")
    return folder


def test_plan_photos_on_the_command_line(home, tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    monkeypatch.setattr(pf, "REFERENCE_IMAGES", 24)
    shots = pf.corrupt_at(pf.probe_clean("sample", n=12, offset=500)[0], "gaussian_noise", 2.6, seed=3)
    folder = _write(shots, tmp_path / "photos")
    (folder / "broken.jpg").write_text("not an image")
    code, out, err = run_cli(["plan", "--photos", str(folder)], capsys, monkeypatch)
    assert code == 0, err
    planned = tomllib.loads(out)
    got = {c["name"]: c for c in planned["corruptions"]}
    noise = got["gaussian_noise"]  # measured, at the severity the photos show (2.6 -> levels 2 and 3)
    assert noise["reason"].startswith("Measured in the deployment photos: measured ") and "-> gaussian_noise 2." in noise["reason"]
    assert noise["severities"] in ([2, 3], [3]), noise
    assert "skipped broken.jpg: not a decodable image" in err
    assert any(v.startswith("measured 12 photos against 24 clean images") for v in planned["planner"]["violations"])
    # with a description: the text's plan and the photos' measurement combined, disagreements stated
    import domainbench.planner
    from domainbench.records.config import CorruptionChoice, DomainConfig, PlannerProvenance

    text_plan = DomainConfig(domain="Studio photos of shoes.", planner=PlannerProvenance(provider="offline", model="m"),
                             corruptions=[CorruptionChoice(name=n, severities=[1, 2], reason=f"{n} by the text.")
                                          for n in ("brightness", "contrast", "gaussian_blur")])
    monkeypatch.setattr(domainbench.planner, "plan", lambda *a, **k: text_plan)
    code, out, err = run_cli(["plan", "Studio photos of shoes.", "--photos", str(folder), "--provider", "offline"],
                             capsys, monkeypatch)
    assert code == 0, err
    planned = tomllib.loads(out)
    notes = planned["planner"]["violations"]
    assert any(n.startswith("disagreement: the photos measure gaussian_noise 2.") and n.endswith("does not call for; added")
               for n in notes), notes
    assert ("disagreement: the description calls for gaussian_blur but the photos show no sign of it (it is not among "
            "the corruptions that explain them); kept") in notes
    assert [c["name"] for c in planned["corruptions"]][:3] == ["brightness", "contrast", "gaussian_blur"]
    assert planned["planner"]["model"] == "m+photo-fit"


def test_photos_of_another_size_and_bad_folders(home, tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch, clean) -> None:  # noqa: ANN001
    big = _write(pf.probe_clean("sample", n=4, offset=500)[0], tmp_path / "big", size=112)
    shots, warnings, files = pf.load_photos(big, like=clean)
    assert shots.shape == (4, *clean.shape[1:]) and not warnings and len(files) == 4  # measured at the dataset's size
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "a.jpg").write_bytes(b"\xff\xd8 truncated")
    for folder, says in ((empty, "none of its 1 image files could be decoded"), (tmp_path / "nope", "not a folder")):
        code, out, err = run_cli(["plan", "--photos", str(folder)], capsys, monkeypatch)
        assert code == 2 and says in err and err.count("error:") == 1 and out == "", err
    code, out, err = run_cli(["plan"], capsys, monkeypatch)
    assert code == 2 and "needs a domain description, --photos DIR, or both" in err

"""An identity cell (a corruption that leaves the pixels as they were): SSIM 1 and an infinite PSNR, shown as
"∞" by ``show``, null in the JSON export and empty in the CSV, never a made-up large number; ``show`` lists
the cells most damaged first, by SSIM, whatever their severity numbers."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest
from skimage.metrics import structural_similarity

from domainbench import corruptions
from domainbench.metrics.damage_report import INFINITE, cell_damage, identical, psnr_text
from domainbench.data import open_dataset
from domainbench.engine.jobs import image_seeds
from domainbench.metrics.damage import damage_sums, luminance
from domainbench.records.unit_sums import DamageSums
from tests.cli_runner import run_cli

# saturate leaves the bundled grayscale sample untouched at severity 1 (the plan preview warns of it)
DOMAIN = ('domain = "x"\n[[corruptions]]\nname = "saturate"\nseverities = [1]\n'
          '[[corruptions]]\nname = "gaussian_noise"\nseverities = [1, 3]\n')
N = 24


def test_psnr_text_tells_identical_from_unmeasured() -> None:
    clean = np.random.default_rng(0).integers(0, 256, (2, 16, 16), dtype=np.uint8)
    same = damage_sums(clean, clean.copy())
    assert identical(same) and same.psnr_db is None and psnr_text(same) == INFINITE
    assert psnr_text(None) == "n/a" and psnr_text(DamageSums()) == "n/a" and not identical(DamageSums())
    noisy = damage_sums(clean, clean ^ 1)  # every pixel off by one: MSE 1
    assert psnr_text(noisy) == f"{10 * np.log10(255**2):.1f}" and not identical(noisy)


def test_identity_cell_in_show_and_both_exports(home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "300")
    (tmp_path / "d.toml").write_text(DOMAIN)
    code, _, err = run_cli(["run", str(tmp_path / "d.toml"), "--limit", str(N), "--no-stability", "--no-threat",
                            "--run-id", "id1", "--seed", "2", "--workers", "0"], capsys, monkeypatch)
    assert code == 0, err
    code, show, err = run_cli(["show", "id1", "--details"], capsys, monkeypatch)
    assert code == 0, err
    code, csv_text, err = run_cli(["export", "id1", "--format", "csv"], capsys, monkeypatch)
    assert code == 0, err
    code, json_text, err = run_cli(["export", "id1", "--format", "json"], capsys, monkeypatch)
    assert code == 0, err

    batch = open_dataset("sample").subset(N).load(np.arange(N))
    ssim = {}
    for sev in (1, 3):
        noisy = corruptions.corrupt_batch(batch.images, "gaussian_noise", severity=sev,
                                          seeds=image_seeds(2, "gaussian_noise", sev, batch.indices))
        ssim[sev] = np.mean([structural_similarity(a, b, gaussian_weights=True, sigma=1.5, use_sample_covariance=False,
                                                   data_range=255)
                             for a, b in zip(luminance(batch.images).numpy(), luminance(noisy).numpy())])
    line = next(x for x in show.splitlines() if x.startswith("damage"))
    # most damaged first: severity 3 of the noise, then severity 1, then the untouched cell
    assert f"gaussian_noise@3 {ssim[3]:.2f}/" in line and f"gaussian_noise@1 {ssim[1]:.2f}/" in line
    order = [part.split()[0] for part in line.split(": ", 1)[1].split(", ")]
    assert order == ["gaussian_noise@3", "gaussian_noise@1", "saturate@1"]
    assert "saturate@1 1.00/∞" in line

    rows = [r for r in csv.DictReader(io.StringIO(csv_text)) if r["corruption"] == "saturate"]
    assert len(rows) == 2 and all(float(r["ssim"]) == 1.0 and r["psnr_db"] == "" for r in rows)
    cells = json.loads(json_text)["cells"]
    saturate = [c for c in cells if c["corruption"] == "saturate"]
    assert len(saturate) == 2 and all(c["ssim"] == 1.0 and c["psnr_db"] is None for c in saturate)
    noise = {(c["model"], c["severity"]): c for c in cells if c["corruption"] == "gaussian_noise"}
    assert all(c["ssim"] == pytest.approx(ssim[k[1]], abs=1e-9) and c["psnr_db"] > 0 for k, c in noise.items())
    # the JSON rows are the CSV's, column for column
    assert [list(c) for c in cells] == [["model", "corruption", "severity", *list(c)[3:]] for c in cells]
    assert set(cells[0]) <= set(csv.DictReader(io.StringIO(csv_text)).fieldnames)


def test_cell_damage_is_read_once_per_cell(home: Path) -> None:
    from domainbench.records.config import CorruptionChoice, DomainConfig, RunConfig
    from domainbench.engine.runner import Engine
    from domainbench.query import report
    from domainbench.store import open_store

    store = open_store()
    domain = DomainConfig(domain="d", corruptions=[CorruptionChoice(name="gaussian_noise", severities=[2, 4])])
    run = Engine(store).start(domain, RunConfig(models=["embedded:fmnist-plain", "embedded:fmnist-augmented"],
                                                limit=16, workers=0, device="cpu", stability=False, threat=False))
    cells = cell_damage(report(store, run))
    assert [(c.corruption, c.severity) for c in cells] == [("gaussian_noise", 4), ("gaussian_noise", 2)]
    assert cells[0].ssim < cells[1].ssim < 1 and all(c.psnr_db is not None for c in cells)

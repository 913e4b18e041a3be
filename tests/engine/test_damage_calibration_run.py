"""A run's per-cell SSIM/PSNR and ECE/NLL, recomputed independently from what the run evaluated.

SSIM and PSNR from scikit-image on the pixels rebuilt by hand (the sample's images and the
corruption with each image's seed); ECE and NLL from a plain loop over the exported per-image
predictions and confidences.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import pytest
from skimage.metrics import peak_signal_noise_ratio, structural_similarity

from domainbench import corruptions
from domainbench.data import open_dataset
from domainbench.engine.jobs import image_seeds
from domainbench.metrics.damage import luminance
from tests.cli_runner import run_cli

DOMAIN = 'domain = "x"\n[[corruptions]]\nname = "gaussian_noise"\nseverities = [1, 3]\n[[corruptions]]\nname = "brightness"\nseverities = [2]\n'
N = 48


def _run(tmp_path: Path, capsys, monkeypatch) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    (tmp_path / "d.toml").write_text(DOMAIN)
    code, _, err = run_cli(["run", str(tmp_path / "d.toml"), "--limit", str(N), "--no-stability", "--no-threat",
                            "--run-id", "r1", "--seed", "3", "--workers", "0"], capsys, monkeypatch)
    assert code == 0, err
    code, _, err = run_cli(["export", "r1", "--format", "csv", "-o", str(tmp_path / "r.csv")], capsys, monkeypatch)
    assert code == 0, err
    code, _, err = run_cli(["export", "r1", "--predictions", "--format", "csv", "-o", str(tmp_path / "p.csv")],
                           capsys, monkeypatch)
    assert code == 0, err
    return list(csv.DictReader((tmp_path / "r.csv").open())), list(csv.DictReader((tmp_path / "p.csv").open()))


def _plain_ece(rows: list[dict[str, str]]) -> float:
    conf = [float(r["confidence"]) for r in rows]
    correct = [r["correct"] in ("1", "True", "true") for r in rows]
    total = 0.0
    for b in range(15):
        members = [i for i, c in enumerate(conf) if b / 15 <= c < (b + 1) / 15 or (b == 14 and c == 1.0)]
        if members:
            acc = sum(correct[i] for i in members) / len(members)
            total += len(members) / len(conf) * abs(acc - sum(conf[i] for i in members) / len(members))
    return total


def test_cells_carry_damage_and_calibration_equal_to_independent_computations(home: Path, tmp_path: Path, capsys,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    cells, preds = _run(tmp_path, capsys, monkeypatch)
    batch = open_dataset("sample").subset(N).load(np.arange(N))
    for row in cells:
        if row["corruption"] == "clean":
            assert row["ssim"] == "" and row["psnr_db"] == ""  # undamaged: no number, never a fake 1 / ∞
        else:
            sev = int(row["severity"])
            seeds = image_seeds(3, row["corruption"], sev, batch.indices)
            corrupted = corruptions.corrupt_batch(batch.images, row["corruption"], severity=sev, seeds=seeds)
            y0, y1 = luminance(batch.images).numpy(), luminance(corrupted).numpy()
            ssim = np.mean([structural_similarity(a, b, gaussian_weights=True, sigma=1.5, use_sample_covariance=False,
                                                  data_range=255) for a, b in zip(y0, y1)])
            mse = np.mean((batch.images.astype(float) - corrupted.astype(float)) ** 2)
            assert float(row["ssim"]) == pytest.approx(ssim, abs=1e-9)
            assert float(row["psnr_db"]) == pytest.approx(10 * math.log10(255**2 / mse), abs=1e-6)
            assert float(row["psnr_db"]) == pytest.approx(
                peak_signal_noise_ratio(batch.images, corrupted, data_range=255), abs=1e-6)
        mine = [p for p in preds if (p["model"], p["corruption"], p["severity"]) ==
                (row["model"], row["corruption"], row["severity"])]
        assert len(mine) == N
        # confidences are exported as float32: the loop's ECE agrees to their precision
        assert float(row["ece"]) == pytest.approx(_plain_ece(mine), abs=1e-6)
        # NLL_i = -log p(true) is -log(confidence) where the prediction is right and larger where it is wrong
        floor = np.mean([-math.log(float(p["confidence"])) for p in mine])
        assert floor - 1e-6 <= float(row["nll"]) < floor + 10
    noisy = {int(r["severity"]): float(r["ssim"]) for r in cells if r["corruption"] == "gaussian_noise"
             and r["model"] == cells[0]["model"]}
    assert noisy[3] < noisy[1] < 1.0  # more noise, more damage


COMPOSED = DOMAIN + ('[[compositions]]\nname = "dark and noisy"\nreason = "night"\n'
                     'steps = [{corruption = "brightness", severity = 2}, {corruption = "gaussian_noise", severity = 3}]\n')


def _composed_run(tmp_path: Path, run_id: str, shard: int, capsys, monkeypatch) -> dict[tuple[str, str], dict]:
    (tmp_path / "c.toml").write_text(COMPOSED)
    (tmp_path / f"{run_id}-run.toml").write_text(f"shard_size = {shard}\n")
    code, _, err = run_cli(["run", str(tmp_path / "c.toml"), "--limit", str(N), "--no-stability", "--no-threat",
                            "--run-id", run_id, "--seed", "5", "--workers", "0",
                            "--run-config", str(tmp_path / f"{run_id}-run.toml")], capsys, monkeypatch)
    assert code == 0, err
    out = tmp_path / f"{run_id}.csv"
    code, _, err = run_cli(["export", run_id, "--format", "csv", "-o", str(out)], capsys, monkeypatch)
    assert code == 0, err
    return {(r["model"], r["corruption"]): r for r in csv.DictReader(out.open()) if r["corruption"].startswith("compose:")}


def test_a_composed_cell_is_its_steps_applied_in_order_and_independent_of_shards(
        home: Path, tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    rows = _composed_run(tmp_path, "c1", 16, capsys, monkeypatch)
    assert {c for _, c in rows} == {"compose:dark and noisy"} and len(rows) == 2
    batch = open_dataset("sample").subset(N).load(np.arange(N))
    seeds = image_seeds(5, "compose:dark and noisy", 1, batch.indices)
    by_hand = batch.images
    for k, (name, severity) in enumerate([("brightness", 2), ("gaussian_noise", 3)]):
        by_hand = corruptions.corrupt_batch(by_hand, name, severity=severity,
                                            seeds=[corruptions.derive_seed(s, k) for s in seeds])
    y0, y1 = luminance(batch.images).numpy(), luminance(by_hand).numpy()
    ssim = np.mean([structural_similarity(a, b, gaussian_weights=True, sigma=1.5, use_sample_covariance=False,
                                          data_range=255) for a, b in zip(y0, y1)])
    for row in rows.values():
        assert row["severity"] == "1" and int(row["n_images"]) == N
        assert float(row["ssim"]) == pytest.approx(ssim, abs=1e-9)
    # pure per image: other shards (as a resumed run would cut them) give the same numbers to the last digit
    again = _composed_run(tmp_path, "c2", 48, capsys, monkeypatch)
    assert {k: {c: v for c, v in r.items() if c != "run_id"} for k, r in again.items()} == \
        {k: {c: v for c, v in r.items() if c != "run_id"} for k, r in rows.items()}

"""``finetune --lambda 0,1,5``: one model per λ on the same split, one held-out run, one trade-off table."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from PIL import Image

from domainbench.data import load_sample
from domainbench.tuning.sweep import parse_lambdas
from tests.cli_runner import run_cli

PLAN = """domain = "noise and blur"

[[corruptions]]
name = "gaussian_noise"
severities = [4]

[[corruptions]]
name = "gaussian_blur"
severities = [4]
"""
BASE = "embedded:fmnist-plain"


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("sweep")
    ds = load_sample()
    for i in range(40):
        folder = root / "images" / f"c{ds.labels[i] % 2}"
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray(ds.arrays[i]).save(folder / f"{i:03d}.png")
    (root / "plan.toml").write_text(PLAN)
    return root / "images", root / "plan.toml"


def test_lambda_sweep_trains_one_model_each_and_prints_one_table(data: tuple[Path, Path], tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str],
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    images, plan = data
    out = tmp_path / "sweep"
    monkeypatch.setenv("DOMAINBENCH_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("COLUMNS", "250")
    code, stdout, err = run_cli(["finetune", BASE, "--plan", str(plan), "--dataset", str(images), "-o", str(out), "--epochs", "1",
                                 "--batch-size", "8", "--image-size", "28", "--lr", "1e-3", "--lambda", "0,5"], capsys, monkeypatch)
    assert code == 0, err
    states = {lam: json.loads((out / f"lambda-{lam}" / "finetune.json").read_text()) for lam in ("0", "5")}
    assert [s["options"]["lam"] for s in states.values()] == [0.0, 5.0]
    assert states["0"]["train_indices"] == states["5"]["train_indices"]  # λ is the only difference
    from domainbench import api

    run_id = stdout.split("domainbench show ")[1].split("`")[0]
    run = api.load_run(run_id, store=tmp_path / "home")
    tuned = {lam: f"local:{(out / f'lambda-{lam}').resolve()}" for lam in ("0", "5")}
    assert run.record.config.models == [BASE, tuned["0"], tuned["5"]]
    summary = run.summary().set_index("model")
    radius = {(s.model, s.corruption): s.divergence_radius for s in run.report.stability}
    # each printed row holds the stored run's numbers for its model
    for label, model in (("base", BASE), ("0", tuned["0"]), ("5", tuned["5"])):
        line = next(ln for ln in stdout.splitlines() if re.search(rf"\s{re.escape(label)}\s+\d\.\d{{3}} \[", ln))
        r = summary.loc[model]
        want = [f"{r['clean_accuracy']:.3f} [{r['clean_accuracy_ci_low']:.3f}, {r['clean_accuracy_ci_high']:.3f}]",
                f"{r['mean_corrupted_accuracy']:.3f} [{r['mean_corrupted_accuracy_ci_low']:.3f}, "
                f"{r['mean_corrupted_accuracy_ci_high']:.3f}]",
                f"{radius[(model, 'gaussian_noise')]:.3f}", f"{radius[(model, 'gaussian_blur')]:.3f}"]
        assert all(w in line for w in want), (line, want)
    assert run.report.model(BASE).clean.n == 8


def test_lambda_list_parsing() -> None:
    assert parse_lambdas("0, 1,5") == [0.0, 1.0, 5.0]


@pytest.mark.parametrize(("value", "message"), [
    ("0,x", "'x' is not a number"),
    ("1,-1", "-1 is not a finite number ≥ 0"),
    ("1,1", "a value repeats"),
])
def test_bad_lambda_lists_are_one_error_line(data: tuple[Path, Path], tmp_path: Path, value: str, message: str,
                                             capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    images, plan = data
    code, _, err = run_cli(["finetune", BASE, "--plan", str(plan), "--dataset", str(images), "-o", str(tmp_path / "o"),
                            "--lambda", value], capsys, monkeypatch)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and message in lines[0], err
    assert not (tmp_path / "o").exists()

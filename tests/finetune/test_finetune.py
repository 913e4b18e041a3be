"""Robustness fine-tuning: the objective, seeding, resume, divergence, the output folder and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from PIL import Image
from safetensors.torch import load_file

from domainbench.records.config import load_domain
from domainbench.data import load_sample
from domainbench.errors import UserInputError
from domainbench.tuning import FinetuneDiverged, resume, train
from domainbench.tuning.train import corrupt_step, plan_cells, _losses, _split
from domainbench.models import create_model
from tests.cli_runner import run_cli

BASE = "embedded:fmnist-plain"
PLAN = """domain = "noise and blur"

[[corruptions]]
name = "gaussian_noise"
severities = [4, 5]

[[corruptions]]
name = "gaussian_blur"
severities = [4]

[[compositions]]
name = "blur-then-noise"
steps = [{corruption = "gaussian_blur", severity = 2}, {corruption = "gaussian_noise", severity = 3}]
"""
FAST = {"epochs": 1, "batch_size": 8, "lr": 1e-3, "image_size": 28}


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """40 sample images as PNG files in two class folders, and the plan."""
    root = tmp_path_factory.mktemp("ft")
    ds = load_sample()
    for i in range(40):
        folder = root / "images" / f"c{ds.labels[i] % 2}"
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray(ds.arrays[i]).save(folder / f"{i:03d}.png")
    plan = root / "plan.toml"
    plan.write_text(PLAN)
    return root / "images", plan


def _weights(out: Path) -> dict[str, torch.Tensor]:
    return load_file(str(out / "model.safetensors"))


def test_losses_are_the_papers_cosines() -> None:
    # L1 = −mean cos(f′(x), f′(P(x))), L2 = −mean cos(f(x), f′(x)), against a hand computation
    torch.manual_seed(0)
    tower, frozen = torch.nn.Linear(5, 3), torch.nn.Linear(5, 3)
    x, xc = torch.randn(4, 5), torch.randn(4, 5)
    l1, l2 = _losses(tower, frozen, x, xc)
    z, zc, z0 = tower(x).detach().numpy(), tower(xc).detach().numpy(), frozen(x).detach().numpy()
    cos = lambda a, b: (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)  # noqa: E731
    assert l1.item() == pytest.approx(-cos(z, zc).mean(), abs=1e-6)
    assert l2.item() == pytest.approx(-cos(z0, z).mean(), abs=1e-6)
    # f′ = f: L2 is exactly −1 (the start of the paper's optimisation)
    assert _losses(frozen, frozen, x, xc)[1].item() == pytest.approx(-1.0, abs=1e-6)


def test_split_is_by_file_seeded_and_disjoint() -> None:
    a, b = _split(50, 0.8, 3)
    assert len(a) == 40 and len(b) == 10 and set(a).isdisjoint(b) and sorted({*a, *b}) == list(range(50))
    assert np.array_equal(_split(50, 0.8, 3)[0], a) and not np.array_equal(_split(50, 0.8, 4)[0], a)


def test_each_step_corrupts_with_the_engines_kernels(data: tuple[Path, Path]) -> None:
    from domainbench.engine.jobs import run_job

    cells = plan_cells(load_domain(data[1]))
    assert [c.corruption for c in cells] == ["gaussian_noise", "gaussian_noise", "gaussian_blur", "compose:blur-then-noise"]
    imgs = np.repeat(load_sample().arrays[:16, ..., None], 3, axis=-1)
    idx = np.arange(100, 116)
    out = corrupt_step(imgs, idx, cells, seed=0, epoch=1, step=0)
    assert np.array_equal(out, corrupt_step(imgs, idx, cells, seed=0, epoch=1, step=0))  # seeded
    assert not np.array_equal(out, corrupt_step(imgs, idx, cells, seed=0, epoch=2, step=0))  # a new draw each epoch
    # every image equals the engine's job for some cell of the plan, run alone on that image
    from domainbench.tuning.train import _epoch_seed

    for i in range(16):
        matches = [c for c in cells if np.array_equal(out[i], run_job(c.job(0), imgs[i:i + 1], idx[i:i + 1], _epoch_seed(0, 1)).images[0])]
        assert matches, i


def test_trains_writes_a_local_model_and_resumes_bit_identically(data: tuple[Path, Path], tmp_path: Path) -> None:
    images, plan = data
    whole = train(BASE, plan, images, tmp_path / "whole", **{**FAST, "epochs": 2})
    half = train(BASE, plan, images, tmp_path / "half", **FAST)
    assert half.state.epochs_done == 1
    resumed = resume(tmp_path / "half", epochs=2)
    a, b = _weights(tmp_path / "whole"), _weights(tmp_path / "half")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert resumed.state.history == whole.state.history and len(whole.state.history) == 2
    # training moved the weights and lowered the corruption loss below its value on the base model
    base = load_file(str(Path(__file__).parents[2] / "backend/models/weights/fmnist-plain.safetensors"))
    assert not torch.equal(a["image_tower.head.3.weight"], base["image_tower.head.3.weight"])
    # the folder is a local: model that embeds like the tower it saved
    m = create_model(whole.model, "cpu")
    assert m.name == f"local:{tmp_path / 'whole'}"
    x = load_sample().arrays[:4]
    ref = create_model(BASE, "cpu")
    ref.tower.load_state_dict({k.removeprefix("image_tower."): v for k, v in a.items() if k.startswith("image_tower.")})
    assert torch.allclose(m.embed_images(x), ref.embed_images(x))
    state = json.loads((tmp_path / "whole" / "finetune.json").read_text())
    assert len(state["train_indices"]) == 32 and len(state["heldout_indices"]) == 8
    card = (tmp_path / "whole" / "MODEL_CARD.md").read_text()
    assert BASE in card and "| 2 |" in card and "compose:blur-then-noise" in card and "λ 1" in card


def test_last_n_trains_only_the_last_layers(data: tuple[Path, Path], tmp_path: Path) -> None:
    images, plan = data
    train(BASE, plan, images, tmp_path / "o", trainable="last-1", **FAST)
    w = _weights(tmp_path / "o")
    base = load_file(str(Path(__file__).parents[2] / "backend/models/weights/fmnist-plain.safetensors"))
    changed = sorted(k for k in w if not torch.equal(w[k], base[k]))
    assert changed == ["image_tower.head.3.bias", "image_tower.head.3.weight"]


def test_a_diverging_loss_stops_and_keeps_the_last_good_checkpoint(data: tuple[Path, Path], tmp_path: Path) -> None:
    images, plan = data
    with pytest.raises(FinetuneDiverged, match=r"non-finite .* epoch 1 step \d+; stopped, .* last good checkpoint \(epoch 0\)"):
        train(BASE, plan, images, tmp_path / "o", **{**FAST, "lr": 1e36})
    base = load_file(str(Path(__file__).parents[2] / "backend/models/weights/fmnist-plain.safetensors"))
    kept = _weights(tmp_path / "o")
    assert all(torch.equal(kept[k], base[k]) for k in base)
    assert json.loads((tmp_path / "o" / "finetune.json").read_text())["epochs_done"] == 0


@pytest.mark.parametrize(("extra", "message"), [
    (["--lambda", "-1"], "--lambda -1.0: Input should be greater than or equal to 0"),
    (["--lambda", "one"], "--lambda 'one' is not a number"),
    (["--train-split", "0"], "--train-split 0.0: Input should be greater than 0"),
    (["--train-split", "1.5"], "--train-split 1.5: Input should be less than 1"),
    (["--batch-size", "17"], "32 training images (of 40, --train-split 0.8) is fewer than two batches of 17"),
    (["--plan", "EMPTY"], "--plan lists no corruption"),
    (["-o", "EXISTS"], "already exists; choose a new folder, or add --overwrite"),
])
def test_bad_input_is_one_error_line_and_writes_nothing(data: tuple[Path, Path], tmp_path: Path, extra: list[str], message: str,
                                                        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    images, plan = data
    empty = tmp_path / "empty.toml"
    empty.write_text('domain = "nothing"\ncorruptions = []\n')
    exists = tmp_path / "exists"
    exists.mkdir()
    (exists / "keep.txt").write_text("mine")
    extra = [str(empty) if e == "EMPTY" else str(exists) if e == "EXISTS" else e for e in extra]
    args = ["finetune", BASE, "--plan", str(plan), "--dataset", str(images), "-o", str(tmp_path / "out"), "--image-size", "28", *extra]
    code, out, err = run_cli(args, capsys, monkeypatch)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], err
    assert not (tmp_path / "out").exists()
    assert sorted(p.name for p in exists.iterdir()) == ["keep.txt"]


def test_overwrite_refuses_a_folder_that_is_not_a_finetune(data: tuple[Path, Path], tmp_path: Path) -> None:
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / "x").write_text("x")
    with pytest.raises(UserInputError, match="not a fine-tuned model folder"):
        train(BASE, data[1], data[0], tmp_path / "o", overwrite=True, **FAST)
    assert (tmp_path / "o" / "x").read_text() == "x"


def test_the_cli_trains_and_prints_the_model_name(data: tuple[Path, Path], tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    images, plan = data
    out = tmp_path / "ft"
    monkeypatch.setenv("DOMAINBENCH_HOME", str(tmp_path / "home"))
    code, stdout, err = run_cli(["finetune", BASE, "--plan", str(plan), "--dataset", str(images), "-o", str(out), "--epochs", "1",
                                 "--batch-size", "16", "--image-size", "28", "--lambda", "5"], capsys, monkeypatch)
    assert code == 0, err
    assert f"--models local:{out}" in stdout
    # the built-in evaluation ran on the 8 held-out images and printed base beside fine-tuned
    assert "held-out evaluation" in stdout and "verdict: corrupted accuracy" in stdout
    from domainbench import api

    run_id = stdout.split("domainbench show ")[1].split("`")[0]
    run = api.load_run(run_id, store=tmp_path / "home")
    assert run.record.config.models == [BASE, f"local:{out.resolve()}"]
    assert run.report.model(BASE).clean.n == 8
    assert json.loads((out / "finetune.json").read_text())["options"]["lam"] == 5.0


def test_lambda_trades_robustness_for_closeness_to_the_base(data: tuple[Path, Path], tmp_path: Path) -> None:
    # the paper's λ trade-off on the training losses: λ = 0 ends more stable under corruption (lower L1)
    # and further from the base (higher L2) than λ = 5
    images, plan = data
    free = train(BASE, plan, images, tmp_path / "l0", **{**FAST, "epochs": 2, "lam": 0.0}).state.history[-1]
    tied = train(BASE, plan, images, tmp_path / "l5", **{**FAST, "epochs": 2, "lam": 5.0}).state.history[-1]
    assert free["l1"] < tied["l1"] and free["l2"] > tied["l2"]
    assert free["loss"] == pytest.approx(free["l1"]) and tied["loss"] == pytest.approx(tied["l1"] + 5 * tied["l2"])

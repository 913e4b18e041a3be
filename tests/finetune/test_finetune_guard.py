"""A run that would score a fine-tuned model on its own training images is refused in one line."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from PIL import Image

from domainbench.data import load_sample, open_dataset
from domainbench.data.fingerprint import dataset_fingerprint
from domainbench.errors import UserInputError
from domainbench.tuning import train
from domainbench.models.finetune_guard import check_not_training_images
from domainbench.tuning.train import FinetuneOptions, FinetuneState
from tests.cli_runner import run_cli

PLAN = 'domain = "noise"\n\n[[corruptions]]\nname = "gaussian_noise"\nseverities = [4]\n'


@pytest.fixture(scope="module")
def tuned(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    root = tmp_path_factory.mktemp("guard")
    ds = load_sample()
    for i in range(40):
        folder = root / "images" / f"c{ds.labels[i] % 2}"
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray(ds.arrays[i]).save(folder / f"{i:03d}.png")
    (root / "plan.toml").write_text(PLAN)
    train("embedded:fmnist-plain", root / "plan.toml", root / "images", root / "ft", epochs=1, batch_size=8, image_size=28)
    return root / "images", root / "plan.toml", root / "ft"


def _manifest(path: Path, files: list[str]) -> Path:
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["path", "label"])
        w.writerows([(p, Path(p).parent.name) for p in files])
    return path


def test_a_run_on_the_training_folder_is_refused_and_writes_nothing(tuned: tuple[Path, Path, Path], tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str],
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    images, plan, ft = tuned
    monkeypatch.setenv("DOMAINBENCH_HOME", str(tmp_path / "home"))
    code, _, err = run_cli(["run", str(plan), "--models", f"embedded:fmnist-plain,local:{ft}", "--dataset", str(images)],
                           capsys, monkeypatch)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), err
    assert f"local:{ft} was fine-tuned on 32 of this dataset's 40 images" in lines[0]
    assert "heldout/manifest.csv" in lines[0]
    from domainbench import api

    assert api.list_runs(store=tmp_path / "home") == []


def test_overlap_is_counted_by_file_and_held_out_files_pass(tuned: tuple[Path, Path, Path], tmp_path: Path) -> None:
    images, _, ft = tuned
    state = json.loads((ft / "finetune.json").read_text())
    files = [str(p) for p in open_dataset(str(images), image_size=28).paths]
    trained = [files[i] for i in state["train_indices"][:2]]
    held = [files[i] for i in state["heldout_indices"]]
    mixed = open_dataset(str(_manifest(tmp_path / "mixed.csv", [*trained, held[0]])), image_size=28)
    with pytest.raises(UserInputError, match=r"fine-tuned on 2 of this dataset's 3 images \(e\.g\. .*\.png\)"):
        check_not_training_images(["embedded:fmnist-plain", f"local:{ft}"], mixed)
    check_not_training_images([f"local:{ft}"], open_dataset(str(_manifest(tmp_path / "held.csv", held)), image_size=28))


def test_the_bundled_sample_is_recognised_by_its_fingerprint(tmp_path: Path) -> None:
    ds = open_dataset("sample", image_size=28)
    state = FinetuneState(base="embedded:fmnist-plain", dataset="sample", fingerprint=dataset_fingerprint(ds).model_dump(mode="json"),
                          n_images=len(ds), train_indices=[3, 5, 7], heldout_indices=[0, 1], options=FinetuneOptions())
    (tmp_path / "ft").mkdir()
    (tmp_path / "ft" / "finetune.json").write_text(state.model_dump_json())
    with pytest.raises(UserInputError, match=r"fine-tuned on 3 of this dataset's 1000 images \(e\.g\. image 3 of sample\)"):
        check_not_training_images([f"local:{tmp_path / 'ft'}"], ds)
    check_not_training_images(["embedded:fmnist-plain", f"local:{tmp_path}"], ds)  # not a fine-tune: nothing to check


def test_an_identical_copy_of_the_training_folder_is_recognised(tuned: tuple[Path, Path, Path], tmp_path: Path) -> None:
    import shutil

    images, _, ft = tuned
    copy = shutil.copytree(images, tmp_path / "copy")
    with pytest.raises(UserInputError, match=r"fine-tuned on 32 of this dataset's 40 images \(e\.g\. .*/copy/"):
        check_not_training_images([f"local:{ft}"], open_dataset(str(copy), image_size=28))


def test_the_guard_reads_the_file_training_writes() -> None:
    from domainbench.models import finetune_guard
    from domainbench.tuning.train import STATE_FILE

    assert finetune_guard.STATE_FILE == STATE_FILE

"""Real-shift cells (``run --shift NAME=PATH``): the user's own images scored as ``shift:NAME``.

The reference is independent of the shift code path: the same image files opened as the run's
dataset itself (their clean pass), and scikit-image's SSIM on the paired pixels.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from skimage.metrics import structural_similarity

from domainbench.data import open_dataset
from tests.cli_runner import run_cli

DOMAIN = 'domain = "x"\n[[corruptions]]\nname = "gaussian_noise"\nseverities = [2]\n'
N = 30
SAME = ("n_images", "balanced_accuracy", "top1_accuracy", "top1_accuracy_ci_low", "top1_accuracy_ci_high", "ece", "nll")


def _inverted_sample(root: Path, class_folders: bool) -> np.ndarray:
    """The first N images of the sample's class-interleaved subset, inverted, named by their sample index."""
    ds = open_dataset("sample").subset(N)
    for img, label, index in zip(ds.arrays, ds.labels, ds.origin, strict=True):
        folder = root / ds.classes[label].replace(" ", "_") if class_folders else root
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray(255 - img).save(folder / f"{index:04d}.png")
    return ds.arrays


def _cli_ok(args: list[str], capsys, monkeypatch) -> str:
    code, out, err = run_cli(args, capsys, monkeypatch)
    assert code == 0, err
    return out


def _export(run_id: str, tmp_path: Path, capsys, monkeypatch, predictions: bool = False) -> list[dict[str, str]]:
    out = tmp_path / f"{run_id}-{predictions}.csv"
    _cli_ok(["export", run_id, "-f", "csv", "-o", str(out), *(["--predictions"] if predictions else [])], capsys, monkeypatch)
    return list(csv.DictReader(out.open()))


def _run(args: list[str], tmp_path: Path, capsys, monkeypatch) -> None:
    (tmp_path / "d.toml").write_text(DOMAIN)
    _cli_ok(["run", str(tmp_path / "d.toml"), "--no-stability", "--no-threat", "--workers", "0", *args], capsys, monkeypatch)


def test_a_shift_of_class_folders_scores_as_the_same_images_opened_as_the_dataset(home: Path, tmp_path: Path, capsys,
                                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    clean = _inverted_sample(tmp_path / "inv", class_folders=True)
    _run(["--limit", str(N), "--run-id", "withshift", "--shift", f"inv={tmp_path / 'inv'}"], tmp_path, capsys, monkeypatch)
    (tmp_path / "run.toml").write_text("image_size = 28\n")  # the sample's size, which a shift is decoded at
    _run(["--dataset", str(tmp_path / "inv"), "--run-config", str(tmp_path / "run.toml"), "--run-id", "asdataset"],
         tmp_path, capsys, monkeypatch)
    shifted = {r["model"]: r for r in _export("withshift", tmp_path, capsys, monkeypatch) if r["corruption"] == "shift:inv"}
    itself = {r["model"]: r for r in _export("asdataset", tmp_path, capsys, monkeypatch) if r["corruption"] == "clean"}
    assert len(shifted) == 2 and shifted.keys() == itself.keys()
    for model, row in shifted.items():
        assert row["severity"] == "1"
        for col in SAME:
            assert row[col] != "" and float(row[col]) == pytest.approx(float(itself[model][col]), abs=1e-6), col
    # per image: the same prediction with the same confidence; flips count the paired clean images' changes
    preds = _export("withshift", tmp_path, capsys, monkeypatch, predictions=True)
    ref = {(p["model"], Path(p["path"]).stem): p for p in _export("asdataset", tmp_path, capsys, monkeypatch, predictions=True)
           if p["corruption"] == "clean"}
    origin = open_dataset("sample").subset(N).origin
    clean_pred = {(p["model"], p["image"]): p["prediction"] for p in preds if p["corruption"] == "clean"}
    for model, row in shifted.items():
        mine = [p for p in preds if p["model"] == model and p["corruption"] == "shift:inv"]
        assert len(mine) == N
        for p in mine:
            r = ref[(model, f"{origin[int(p['image'])]:04d}")]
            assert Path(p["path"]).stem == Path(r["path"]).stem and Path(p["path"]).parents[1] == tmp_path / "inv"
            assert (p["label"], p["prediction"], p["correct"]) == (r["label"], r["prediction"], r["correct"])
            # the label set in another order (the folder's sorted names) moves float32 sums in the last bits
            assert float(p["confidence"]) == pytest.approx(float(r["confidence"]), abs=1e-6)
        assert int(row["label_flips"]) == sum(p["prediction"] != clean_pred[(model, p["image"])] for p in mine)
        assert row["label_flip_probability_ci_low"] != ""
    # show says which synthetic cell behaves like the shift (one here), in words
    out = _cli_ok(["show", "withshift"], capsys, monkeypatch)
    assert (f"On your {N} real `inv` images, balanced accuracy (95 % CI)" in " ".join(out.split())
            and "the synthetic cell that behaves most like them (closest accuracy): `gaussian_noise s2` for every model"
            in " ".join(out.split()))
    # paired: damage against the clean image, as scikit-image measures it (greyscale: its own luminance)
    ssim = np.mean([structural_similarity(a.astype(float), (255 - a).astype(float), gaussian_weights=True, sigma=1.5,
                                          use_sample_covariance=False, data_range=255) for a in clean])
    assert float(next(iter(shifted.values()))["ssim"]) == pytest.approx(ssim, abs=1e-9)


def test_an_unlabelled_folder_pairs_by_file_name_and_gets_label_free_metrics(home: Path, tmp_path: Path, capsys,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    _inverted_sample(tmp_path / "flat", class_folders=False)
    _run(["--limit", str(N), "--run-id", "r", "--shift", f"flat={tmp_path / 'flat'}"], tmp_path, capsys, monkeypatch)
    rows = [r for r in _export("r", tmp_path, capsys, monkeypatch) if r["corruption"] == "shift:flat"]
    preds = _export("r", tmp_path, capsys, monkeypatch, predictions=True)
    clean_pred = {(p["model"], p["image"]): p["prediction"] for p in preds if p["corruption"] == "clean"}
    for row in rows:
        assert int(row["n_images"]) == N
        assert row["balanced_accuracy"] == row["top1_accuracy"] == row["ece"] == ""  # label-free only
        mine = [p for p in preds if p["model"] == row["model"] and p["corruption"] == "shift:flat"]
        assert all(p["label"] == "" and p["correct"] == "" for p in mine)
        assert all(Path(p["path"]).parent == tmp_path / "flat" for p in mine)  # the shifted file, not the clean one
        flips = sum(p["prediction"] != clean_pred[(row["model"], p["image"])] for p in mine)
        assert int(row["label_flips"]) == flips and flips > 0
        assert float(row["label_flip_probability"]) == pytest.approx(flips / N)


def test_resume_refuses_a_changed_shift_folder(home: Path, tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    _inverted_sample(tmp_path / "inv", class_folders=True)
    _run(["--limit", str(N), "--run-id", "r", "--shift", f"inv={tmp_path / 'inv'}"], tmp_path, capsys, monkeypatch)
    _cli_ok(["run", "--resume", "r"], capsys, monkeypatch)  # unchanged: nothing to do, no complaint
    victim = next((tmp_path / "inv").rglob("*.png"))
    Image.fromarray(np.zeros((28, 28), np.uint8)).save(victim)
    code, _, err = run_cli(["run", "--resume", "r"], capsys, monkeypatch)
    assert code == 2 and "shift 'inv'" in err and "changed" in err


@pytest.mark.parametrize("option, expected", [
    ("night", "expected NAME=PATH"),
    ("=somewhere", "expected NAME=PATH"),
    ("fog={tmp}/inv", "also a corruption's name"),
    ("a b={tmp}/inv", "must be a word"),
    ("night={tmp}/missing", "does not exist"),
    ("night={tmp}/empty", "holds no images"),
    ("night={tmp}/broken", "can be decoded"),
    ("night={tmp}/wrongclass", "spaceship are not among the dataset's classes"),
    ("night={tmp}/unnamed", "named like an evaluated image"),
    # issue 36, item 6: two files paired with one clean image were both scored (n = 22 from 20 images)
    ("night={tmp}/zeros", "both pair with the same clean image"),
    ("night={tmp}/twoext", "both pair with the same clean image"),
])
def test_bad_shift_input_is_one_line_exit_2_and_nothing_written(option: str, expected: str, home: Path, tmp_path: Path,
                                                                capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    _inverted_sample(tmp_path / "inv", class_folders=True)
    (tmp_path / "empty").mkdir()
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "1.png").write_bytes(b"not an image")
    (tmp_path / "wrongclass" / "spaceship").mkdir(parents=True)
    Image.fromarray(np.zeros((28, 28), np.uint8)).save(tmp_path / "wrongclass" / "spaceship" / "a.png")
    (tmp_path / "unnamed").mkdir()
    Image.fromarray(np.zeros((28, 28), np.uint8)).save(tmp_path / "unnamed" / "photo.png")
    for folder, twin in (("zeros", lambda p: p.with_name(f"{int(p.stem)}.png")), ("twoext", lambda p: p.with_suffix(".bmp"))):
        _inverted_sample(tmp_path / folder, class_folders=False)
        first = sorted((tmp_path / folder).iterdir())[3]
        Image.open(first).save(twin(first))
    (tmp_path / "d.toml").write_text(DOMAIN)
    code, out, err = run_cli(["run", str(tmp_path / "d.toml"), "--limit", str(N), "--workers", "0", "--run-id", "bad",
                              "--shift", option.format(tmp=tmp_path)], capsys, monkeypatch)
    assert code == 2 and expected in err, err
    assert len(err.strip().splitlines()) == 1 and err.startswith("error:")
    code, _, err = run_cli(["show", "bad"], capsys, monkeypatch)
    assert code == 2 and "no run 'bad'" in err


@pytest.mark.parametrize("folder, expected", [("missing", "does not exist"), ("empty", "holds no images")])
def test_a_bad_shift_folder_of_a_plan_names_its_table_and_the_fix(folder: str, expected: str, home: Path,
                                                                   tmp_path: Path, capsys,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 36: an error in a plan's [[shift]] said only "give --shift NAME=PATH", a flag the user never gave."""
    (tmp_path / "empty").mkdir()
    (tmp_path / "d.toml").write_text(DOMAIN + f'[[shift]]\nname = "night"\npath = "{folder}"\n')
    code, _, err = run_cli(["run", str(tmp_path / "d.toml"), "--limit", str(N), "--workers", "0", "--run-id", "bad"],
                           capsys, monkeypatch)
    assert code == 2 and expected in err and len(err.strip().splitlines()) == 1, err
    assert 'the path of the plan\'s [[shift]] table with name = "night"' in err, err
    assert "a folder of class folders named like the dataset's classes" in err


def test_plan_files_hold_shifts_and_older_plans_keep_their_version_and_id(tmp_path: Path) -> None:
    from domainbench.records.config import DomainConfig, dumps, load_domain
    from domainbench.engine.shift_cells import with_shifts
    from domainbench.store.repositories import domain_id

    plain = DomainConfig(domain="x", corruptions=[{"name": "fog"}])
    assert plain.schema_version == 1 and "shift" not in dumps(plain)
    (tmp_path / "plan.toml").write_text(dumps(plain) + '\n[[shift]]\nname = "night"\npath = "photos/night"\n')
    loaded = load_domain(tmp_path / "plan.toml")
    assert loaded.schema_version == 3 and loaded.shift[0].cell_name == "shift:night"
    pinned = with_shifts(loaded, [], plan_dir=tmp_path)
    assert pinned.shift[0].path == str(tmp_path / "photos" / "night")  # relative to the plan file
    assert "shift" not in plain.model_dump() and domain_id(pinned) != domain_id(plain)
    # the id of a plan without shifts is what it was before shifts existed (the hash of its other fields)
    import hashlib
    import json
    blob = json.dumps(plain.model_dump(mode="json", exclude={"planner": {"created_at"}, "compositions": True}), sort_keys=True)
    assert domain_id(plain) == hashlib.sha256(blob.encode()).hexdigest()[:16]
    (tmp_path / "pinned.toml").write_text(dumps(pinned))
    assert load_domain(tmp_path / "pinned.toml") == pinned


def test_a_run_with_a_shift_and_a_composition_shows_both_in_show_and_both_exports(home: Path, tmp_path: Path, capsys,
                                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    _inverted_sample(tmp_path / "inv", class_folders=True)
    (tmp_path / "c.toml").write_text(DOMAIN + '[[compositions]]\nname = "dark noise"\n'
                                     'steps = [{corruption = "brightness", severity = 2}, {corruption = "gaussian_noise", severity = 1}]\n')
    _cli_ok(["run", str(tmp_path / "c.toml"), "--no-stability", "--no-threat", "--workers", "0", "--limit", str(N),
             "--run-id", "both", "--shift", f"inv={tmp_path / 'inv'}"], capsys, monkeypatch)
    shown = " ".join(_cli_ok(["show", "both"], capsys, monkeypatch).split())
    assert "behaves most like them (closest accuracy): `gaussian_noise s2` for every model" in shown  # no composition
    cells = {(r["model"], r["corruption"]) for r in _export("both", tmp_path, capsys, monkeypatch)}
    assert {c for _, c in cells} == {"clean", "gaussian_noise", "compose:dark noise", "shift:inv"}
    preds = {p["corruption"] for p in _export("both", tmp_path, capsys, monkeypatch, predictions=True)}
    assert {"compose:dark noise", "shift:inv"} <= preds
    out = tmp_path / "both.json"
    _cli_ok(["export", "both", "-f", "json", "-o", str(out)], capsys, monkeypatch)
    doc = json.loads(out.read_text())
    assert {c["corruption"] for c in doc["cells"]} >= {"compose:dark noise", "shift:inv"}
    (match,) = doc["shift_matches"]
    assert match["shift"] == "shift:inv" and {p["corruption"] for p in match["per_model"]} == {"gaussian_noise"}
    (real,) = doc["real_shift"]
    assert {m["closest"]["corruption"] for m in real["models"]} == {"gaussian_noise"}
    assert " ".join(real["sentence"].split()) in shown  # show prints the sentence the export holds
    assert doc["run"]["domain"]["shift"] == [{"name": "inv", "path": str(tmp_path / "inv")}]


def test_shifts_refuse_adaptive_runs_and_executors_the_kind_has_no_part_for(home: Path, tmp_path: Path, capsys,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    # shift cells run on the local and the Ray executor (tests/engine/test_ray_executor.py); an executor the
    # corruption kind has no part for is refused by its declared capabilities before anything is stored
    from domainbench.records.config import DomainConfig, RunConfig
    from domainbench.engine.runner import Engine
    from domainbench.errors import UserInputError
    from domainbench.store import open_store

    _inverted_sample(tmp_path / "inv", class_folders=True)
    (tmp_path / "d.toml").write_text(DOMAIN)
    code, _, err = run_cli(["run", str(tmp_path / "d.toml"), "--limit", str(N), "--workers", "0", "--run-id", "x",
                            "--adaptive", "--shift", f"inv={tmp_path / 'inv'}"], capsys, monkeypatch)
    assert code == 2 and "leave out --adaptive" in err and len(err.strip().splitlines()) == 1
    domain = DomainConfig(domain="x", corruptions=[{"name": "fog"}], shift=[{"name": "inv", "path": str(tmp_path / "inv")}])
    store = open_store()
    try:
        class Elsewhere:
            name = "dask"

        with pytest.raises(UserInputError, match=r"^--executor dask: corruption runs execute on local or ray; "
                                                 r"choose --executor local$"):
            Engine(store, executor=Elsewhere()).start(domain, RunConfig(limit=N), run_id="y")  # type: ignore[arg-type]
        assert store.get_run("y") is None
    finally:
        store.close()


def test_a_paired_shift_has_embedding_stability_against_its_clean_image(home: Path, tmp_path: Path, capsys,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from domainbench import query
    from domainbench.engine.scoring import load_models
    from domainbench.store import open_store

    clean = _inverted_sample(tmp_path / "flat", class_folders=False)
    (tmp_path / "d.toml").write_text(DOMAIN)
    (tmp_path / "run.toml").write_text("stability_images = 8\nstability_points = 2\n")
    _cli_ok(["run", str(tmp_path / "d.toml"), "--no-threat", "--workers", "0", "--limit", str(N), "--run-id", "s",
             "--run-config", str(tmp_path / "run.toml"), "--shift", f"flat={tmp_path / 'flat'}"], capsys, monkeypatch)
    store = open_store()
    try:
        records = [r for r in store.stability("s") if r.corruption == "shift:flat"]
        means = {m.model: m for m in query.report(store, "s").stability if m.corruption == "shift:flat"}
    finally:
        store.close()
    assert {r.model for r in records} == set(means) == {"embedded:fmnist-plain", "embedded:fmnist-augmented"}
    ds = open_dataset("sample").subset(N)
    for r in records:
        assert r.points == 1 and len(r.indices) == 8  # the shard's first stability_images images
        (ms,) = load_models([r.model], ds.classes, "cpu", 64, None)
        with torch.no_grad():
            a = ms.model.encode_image(ms.model.preprocess(clean[r.indices])).double().numpy()
            shifted = np.repeat((255 - clean[r.indices])[..., None], 3, axis=-1)  # the PNGs decode as RGB
            b = ms.model.encode_image(ms.model.preprocess(shifted)).double().numpy()
        cos = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
        # two points: cosine robustness (1 - cos) / 2 and Euclidean its square root
        assert np.asarray(r.cosine) == pytest.approx((1 - cos) / 2, abs=1e-5)
        assert np.asarray(r.euclidean) == pytest.approx(np.sqrt(np.asarray(r.cosine)), abs=1e-12)


def test_with_three_models_the_match_and_rho_follow_from_the_exported_accuracies(home: Path, tmp_path: Path, capsys,
                                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    from scipy.stats import spearmanr

    _inverted_sample(tmp_path / "inv", class_folders=True)
    (tmp_path / "p.toml").write_text('domain = "x"\n[[corruptions]]\nname = "gaussian_noise"\nseverities = [1, 3]\n'
                                     '[[corruptions]]\nname = "brightness"\nseverities = [4]\n')
    _cli_ok(["run", str(tmp_path / "p.toml"), "--no-stability", "--no-threat", "--workers", "0", "--limit", str(N),
             "--run-id", "three", "-m", "embedded:fmnist-plain,embedded:fmnist-augmented,fake:a",
             "--shift", f"inv={tmp_path / 'inv'}"], capsys, monkeypatch)
    rows = _export("three", tmp_path, capsys, monkeypatch)
    acc = {(r["model"], r["corruption"], int(r["severity"])): float(r["balanced_accuracy"]) for r in rows}
    models = sorted({r["model"] for r in rows})
    cells = sorted({(c, s) for _, c, s in acc if c not in ("clean", "shift:inv")})
    drop = {(m, c, s): 100 * (acc[(m, "clean", 0)] - acc[(m, c, s)]) for m, c, s in acc}
    real = [drop[(m, "shift:inv", 1)] for m in models]
    out = tmp_path / "three.json"
    _cli_ok(["export", "three", "-f", "json", "-o", str(out)], capsys, monkeypatch)
    doc = json.loads(out.read_text())
    (match,) = doc["shift_matches"]
    (result,) = doc["real_shift"]
    # per model, the cell whose drop is closest to the real one: the sentence's and the table's one definition
    for m in models:
        closest = min(cells, key=lambda k: round(abs(drop[(m, *k)] - drop[(m, "shift:inv", 1)]), 9))
        (row,) = [r for r in result["models"] if r["model"] == m]
        assert (row["closest"]["corruption"], row["closest"]["severity"]) == closest
        assert row["real_value"] == pytest.approx(drop[(m, "shift:inv", 1)])
        assert row["closest_value"] == pytest.approx(drop[(m, *closest)])
    rho = {k: spearmanr([drop[(m, *k)] for m in models], real).statistic for k in cells}
    best = match["ranking"]
    assert best["rho"] == pytest.approx(max(r for r in rho.values() if r == r))
    assert rho[(best["corruption"], best["severity"])] == pytest.approx(best["rho"])
    plan = spearmanr([np.mean([drop[(m, *k)] for k in cells]) for m in models], real).statistic
    assert match["plan_rho"] == pytest.approx(plan)
    shown = " ".join(_cli_ok(["show", "three"], capsys, monkeypatch).split())
    assert f"(ρ = {plan:.2f})" in shown and "Holm-adjusted over 3 model pairs" in shown


def test_an_undecodable_shift_file_is_refused_unless_skipped(home: Path, tmp_path: Path, capsys,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    _inverted_sample(tmp_path / "inv", class_folders=True)
    broken = tmp_path / "inv" / "bag" / "-broken.png"  # sorts first in its class: --limit keeps it
    broken.write_bytes(b"\x89PNG truncated")
    (tmp_path / "d.toml").write_text(DOMAIN)
    args = ["run", str(tmp_path / "d.toml"), "--no-stability", "--no-threat", "--workers", "0", "--limit", str(N),
            "--shift", f"inv={tmp_path / 'inv'}"]
    code, _, err = run_cli([*args, "--run-id", "strict"], capsys, monkeypatch)
    assert code == 2 and "-broken.png: cannot decode" in err and len(err.strip().splitlines()) == 1
    _cli_ok([*args, "--run-id", "lenient", "--skip-unreadable"], capsys, monkeypatch)
    rows = [r for r in _export("lenient", tmp_path, capsys, monkeypatch) if r["corruption"] == "shift:inv"]
    # 31 files, --limit keeps 30 with the broken one: 29 images scored; named like no sample image, so not paired
    assert {int(r["n_images"]) for r in rows} == {N - 1} and {r["label_flip_probability"] for r in rows} == {""}


def test_files_named_like_sample_images_that_limit_left_out_still_pair(home: Path, tmp_path: Path, capsys,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 37, defect 11: the first N sample images, darkened and named by index, under --limit N showed no flips
    and no SSIM ("—"): the class-interleaved --limit subset leaves some of them out, and a class folder shift paired
    only when every file named an evaluated image. They now pair with the whole sample's images.

    The reference is independent of the shift code path: the clean images themselves, opened as a run's dataset (their
    predictions), and scikit-image's SSIM on the pairs."""
    full = open_dataset("sample")
    left_out = sorted(set(range(N)) - set(full.subset(N).origin.tolist()))
    assert left_out  # the case: some of the files name images --limit N does not evaluate
    for folder, pixels in (("dark", lambda a: a // 2), ("asis", lambda a: a)):
        for i in range(N):
            where = tmp_path / folder / full.classes[full.labels[i]].replace(" ", "_")
            where.mkdir(parents=True, exist_ok=True)
            Image.fromarray(pixels(full.arrays[i]).astype(np.uint8)).save(where / f"{i:03d}.png")
    _run(["--limit", str(N), "--run-id", "limited", "--shift", f"dark={tmp_path / 'dark'}"], tmp_path, capsys, monkeypatch)
    (tmp_path / "run.toml").write_text("image_size = 28\n")  # the sample's size, which a shift is decoded at
    _run(["--dataset", str(tmp_path / "asis"), "--run-config", str(tmp_path / "run.toml"), "--run-id", "cleanref"],
         tmp_path, capsys, monkeypatch)
    clean_pred = {(p["model"], Path(p["path"]).stem): p["prediction"]
                  for p in _export("cleanref", tmp_path, capsys, monkeypatch, predictions=True) if p["corruption"] == "clean"}
    rows = {r["model"]: r for r in _export("limited", tmp_path, capsys, monkeypatch) if r["corruption"] == "shift:dark"}
    preds = [p for p in _export("limited", tmp_path, capsys, monkeypatch, predictions=True) if p["corruption"] == "shift:dark"]
    ssim = np.mean([structural_similarity(full.arrays[i].astype(float), (full.arrays[i] // 2).astype(float),
                                          gaussian_weights=True, sigma=1.5, use_sample_covariance=False, data_range=255)
                    for i in range(N)])
    assert len(rows) == 2
    for model, row in rows.items():
        mine = [p for p in preds if p["model"] == model]
        assert len(mine) == N and {Path(p["path"]).parent.parent for p in mine} == {tmp_path / "dark"}
        flips = sum(p["prediction"] != clean_pred[(model, Path(p["path"]).stem)] for p in mine)
        assert int(row["n_images"]) == N and int(row["label_flips"]) == flips
        assert float(row["label_flip_probability"]) == pytest.approx(flips / N)
        assert row["label_flip_probability_ci_low"] != ""
        assert float(row["ssim"]) == pytest.approx(ssim, abs=1e-9)
    # the clean pass is still the --limit images: the shift's partners never enter the clean accuracy
    clean_rows = {r["model"]: r for r in _export("limited", tmp_path, capsys, monkeypatch) if r["corruption"] == "clean"}
    assert {int(r["n_images"]) for r in clean_rows.values()} == {N}

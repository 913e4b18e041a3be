"""The Python API (``import domainbench``): a run from Python stores and reports what the CLI does.

One small plan runs twice on the bundled sample with both embedded models, same settings and seed:
once through ``domainbench.run`` into one store, once through ``domainbench run`` into another. Their
exports, ``show`` output and paired comparisons must be equal, and the handle's tables must hold the
export's values (checked against the per-image predictions by scikit-learn).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import balanced_accuracy_score

import domainbench
from domainbench.errors import UserInputError
from tests.cli_runner import run_cli

RUN_ID = "api-vs-cli"
MODELS = ["embedded:fmnist-plain", "embedded:fmnist-augmented"]

DOMAIN_TOML = """\
domain = "api test: shaken, noisy photos"

[[corruptions]]
name = "motion_blur"
severities = [2, 5]
reason = "hand shake"

[[corruptions]]
name = "gaussian_noise"
severities = [3]
reason = "sensor noise"
"""

RUN_TOML = """\
dataset = "sample"
limit = 48
seed = 3
device = "cpu"
corrupt_on = "cpu"
workers = 0
stability = false
threat = true
threat_anchors = 8
"""


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("api")
    (root / "domain.toml").write_text(DOMAIN_TOML)
    (root / "run.toml").write_text(RUN_TOML)
    return {"root": root, "api": root / "api-home", "cli": root / "cli-home"}


@pytest.fixture(scope="module")
def api_run(runs: dict[str, Path]) -> domainbench.Run:
    return domainbench.run(runs["root"] / "domain.toml", MODELS, run_config=runs["root"] / "run.toml",
                           run_id=RUN_ID, store=runs["api"])


def _cli(args: list[str], home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("DOMAINBENCH_HOME", str(home))
    code, out, err = run_cli(args, capsys, monkeypatch)
    assert code == 0, err
    return out


@pytest.fixture
def cli_run(runs: dict[str, Path], api_run: domainbench.Run, capsys: pytest.CaptureFixture[str],
            monkeypatch: pytest.MonkeyPatch) -> Path:
    """The same plan, settings and seed through `domainbench run` (once per module: a stored run is reused)."""
    if not (runs["cli"] / "domainbench.sqlite").exists():
        _cli(["run", str(runs["root"] / "domain.toml"), "--run-config", str(runs["root"] / "run.toml"),
              "--models", ",".join(MODELS), "--run-id", RUN_ID], runs["cli"], capsys, monkeypatch)
    return runs["cli"]


def test_run_from_python_stores_and_reports_what_the_cli_does(
        api_run: domainbench.Run, cli_run: Path, runs: dict[str, Path],
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    assert api_run.id == RUN_ID and api_run.status == "done"
    assert api_run.stats is not None and api_run.stats.computed_units > 0 and api_run.stats.skipped_units == 0
    for fmt in ("csv", "json"):
        cli_text = _cli(["export", RUN_ID, "--format", fmt], cli_run, capsys, monkeypatch)
        api_text = _cli(["export", RUN_ID, "--format", fmt], runs["api"], capsys, monkeypatch)
        if fmt == "json":  # the run record says when and where it ran
            cli_doc, api_doc = json.loads(cli_text), json.loads(api_text)
            assert cli_doc.pop("run")["config"] == api_doc.pop("run")["config"]
            assert api_doc == cli_doc
        else:
            assert api_text == cli_text
    # the summary `show` prints, read from either store (the stage timings' seconds differ by design)
    show = [_cli(["show", RUN_ID], home, capsys, monkeypatch) for home in (cli_run, runs["api"])]
    cut = [s.split("time per stage")[0] for s in show]
    assert cut[0] == cut[1] and "baseline embedded:fmnist-plain" in cut[0]
    # the handle's own exports are the CLI's
    assert api_run.to_csv() == _cli(["export", RUN_ID, "--format", "csv"], cli_run, capsys, monkeypatch)


def test_to_pandas_is_the_csv_export(api_run: domainbench.Run, cli_run: Path, capsys: pytest.CaptureFixture[str],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    cli_csv = _cli(["export", RUN_ID, "--format", "csv"], cli_run, capsys, monkeypatch)
    expected = pd.read_csv(io.StringIO(cli_csv), float_precision="round_trip")
    got = api_run.to_pandas()
    assert list(got.columns) == list(expected.columns)
    # 2 models (in name order) x (clean + 3 corrupted cells)
    assert len(got) == 8 and got["model"].tolist() == [MODELS[1]] * 4 + [MODELS[0]] * 4
    pd.testing.assert_frame_equal(got, expected, check_dtype=False)


def test_the_handle_holds_the_numbers_of_the_per_image_predictions(
        api_run: domainbench.Run, runs: dict[str, Path], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    preds = pd.read_csv(io.StringIO(_cli(["export", RUN_ID, "--predictions"], runs["api"], capsys, monkeypatch)))
    cells = api_run.to_pandas().set_index(["model", "corruption", "severity"])
    summary = api_run.summary().set_index("model")
    for (model, corruption, severity), rows in preds.groupby(["model", "corruption", "severity"]):
        assert len(rows) == 48
        cell = cells.loc[(model, corruption, severity)]
        assert cell["top1_accuracy"] == pytest.approx(float(np.mean(rows["label"] == rows["prediction"])), abs=1e-12)
        assert cell["balanced_accuracy"] == pytest.approx(balanced_accuracy_score(rows["label"], rows["prediction"]), abs=1e-12)
    for model in MODELS:
        clean = preds[(preds["model"] == model) & (preds["corruption"] == "clean")]
        corrupted = [balanced_accuracy_score(r["label"], r["prediction"])
                     for (m, c, _), r in preds.groupby(["model", "corruption", "severity"]) if m == model and c != "clean"]
        assert summary.loc[model, "clean_accuracy"] == pytest.approx(balanced_accuracy_score(clean["label"], clean["prediction"]), abs=1e-12)
        assert summary.loc[model, "mean_corrupted_accuracy"] == pytest.approx(np.mean(corrupted), abs=1e-12)
        low, high = summary.loc[model, "clean_accuracy_ci_low"], summary.loc[model, "clean_accuracy_ci_high"]
        assert low < summary.loc[model, "clean_accuracy"] < high
    # the baseline is the first model: its mCE is 1 by definition; the other's is its errors over the baseline's
    assert summary["baseline"].to_dict() == {MODELS[0]: True, MODELS[1]: False}
    assert summary.loc[MODELS[0], "mce"] == pytest.approx(1.0)
    # mCE: per corruption the errors (1 - balanced accuracy) summed over severities, over the baseline's, averaged
    err = {(m, c): 0.0 for m in MODELS for c in ("motion_blur", "gaussian_noise")}
    for (m, c, _), r in preds[preds["corruption"] != "clean"].groupby(["model", "corruption", "severity"]):
        err[(m, c)] += 1 - balanced_accuracy_score(r["label"], r["prediction"])
    expected_mce = np.mean([err[(MODELS[1], c)] / err[(MODELS[0], c)] for c in ("motion_blur", "gaussian_noise")])
    assert summary.loc[MODELS[1], "mce"] == pytest.approx(expected_mce, rel=1e-12)


def test_load_run_and_compare(api_run: domainbench.Run, cli_run: Path, runs: dict[str, Path],
                              capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    loaded = domainbench.load_run(RUN_ID, store=runs["api"])
    assert loaded.report == api_run.report and loaded.stats is None
    assert domainbench.list_runs(store=runs["api"]) == [RUN_ID]
    rebased = loaded.with_baseline(MODELS[1])
    assert rebased.report.baseline == MODELS[1] and rebased.summary().set_index("model").loc[MODELS[1], "mce"] == pytest.approx(1.0)
    comparison = domainbench.compare([RUN_ID], store=runs["api"])
    cli = json.loads(_cli(["compare", RUN_ID, "--format", "json"], cli_run, capsys, monkeypatch))
    assert comparison.model_dump(mode="json") == cli
    assert len(comparison.verdicts) == 1 and comparison.pairs
    assert domainbench.compare(loaded).model_dump() == comparison.model_dump()  # a handle names its store
    with pytest.raises(UserInputError, match="domainbench ls"):
        domainbench.load_run("no-such-run", store=runs["api"])


def test_list_models_and_corruptions(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                                     tmp_path: Path) -> None:
    assert domainbench.list_models("embedded:*") == ["embedded:fmnist-augmented", "embedded:fmnist-plain"]
    assert domainbench.list_models("embedded:*") == _cli(["models", "embedded:*"], tmp_path, capsys, monkeypatch).split()
    assert domainbench.list_corruptions("*blur*") == ["defocus_blur", "gaussian_blur", "glass_blur", "motion_blur", "zoom_blur"]
    assert domainbench.list_corruptions("no_such_*") == []


def test_plan_is_the_cli_plan(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from domainbench.records.config import load_domain

    text = "dash-cam footage at night, rain on the windscreen"
    plan = domainbench.plan(text, provider="offline", output=tmp_path / "api.toml")
    _cli(["plan", text, "--provider", "offline", "-o", str(tmp_path / "cli.toml")], tmp_path / "home", capsys, monkeypatch)
    cli = load_domain(tmp_path / "cli.toml")
    assert [c.model_dump() for c in plan.corruptions] == [c.model_dump() for c in cli.corruptions]
    assert plan.corruptions and "motion_blur" in [c.name for c in plan.corruptions]
    assert [c.name for c in load_domain(tmp_path / "api.toml").corruptions] == [c.name for c in plan.corruptions]


def test_bad_input_raises_one_clear_error_and_stores_nothing(tmp_path: Path) -> None:
    domain = domainbench.plan("product photos", provider="offline")
    with pytest.raises(UserInputError, match="nope:x"):
        domainbench.run(domain, ["nope:x"], limit=8, store=tmp_path)
    with pytest.raises(UserInputError, match="--batch-size"):
        domainbench.run(domain, MODELS, batch_size=0, store=tmp_path)
    with pytest.raises(UserInputError, match="--executor 'spark'"):
        domainbench.run(domain, MODELS, executor="spark", store=tmp_path)
    assert domainbench.list_runs(store=tmp_path) == []


def test_no_subpackage_shadows_an_api_name() -> None:
    """``domainbench.NAME`` stays the API's function after every subpackage is imported: a subpackage named like
    an API function (a ``domainbench/finetune/`` beside ``domainbench.finetune()``) would replace it on first import."""
    import importlib
    import pkgutil

    import domainbench
    from domainbench import api

    for info in pkgutil.iter_modules(domainbench.__path__):
        assert info.name not in domainbench.API, f"domainbench.{info.name} is a module and an API name"
        importlib.import_module(f"domainbench.{info.name}")
    assert all(getattr(domainbench, name) is getattr(api, name) for name in domainbench.API)

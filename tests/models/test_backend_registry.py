"""Backends declare what they are: capabilities, an options schema and a loader; per-model options travel
with the model (``--model-arg NAME:key=value``, ``[models.NAME]``) into runs and FMR alike."""

from __future__ import annotations

import io
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
import pytest
import tomllib

from domainbench.app.cli import _model_args
from domainbench.records.config import RunConfig, dumps, load_run
from domainbench.errors import UserInputError
from domainbench.records.model_backends import (
    MODEL_BACKENDS,
    Capabilities,
    ModelOptions,
    capabilities_of,
    has_image_embeddings,
    kind_of,
    option_keys,
    register_model,
)
from domainbench.store import open_store
from tests.cli_runner import run_cli

DOMAIN_TOML = """\
domain = "backend test: blurred photos"

[[corruptions]]
name = "gaussian_blur"
severities = [2]
reason = "focus"
"""


class TinyOptions(ModelOptions):
    """What the test backend takes: which embedded weights to wrap, and its logit scale."""

    variant: Literal["fmnist-plain", "fmnist-augmented"] = "fmnist-plain"
    logit_scale: float = 100.0


CALLS: list[dict[str, Any]] = []


@pytest.fixture
def tiny_backend() -> Iterator[str]:
    """A plug-in backend registered from a test: an embedded model chosen by its options."""

    @register_model("tinyopt", capabilities=Capabilities("contrastive", open_ended=True), options=TinyOptions)
    def create(spec: str, device: Any, **options: Any) -> Any:
        from domainbench.models.embedded import EmbeddedModel

        CALLS.append(dict(options))
        opts = TinyOptions(**options)
        model = EmbeddedModel(opts.variant, device)
        model.name, model.logit_scale = f"tinyopt:{spec}", opts.logit_scale
        return model

    CALLS.clear()
    yield "tinyopt"
    MODEL_BACKENDS.unregister("tinyopt")


def test_the_built_in_backends_answer_capability_queries() -> None:
    assert kind_of("embedded:fmnist-plain") == "contrastive" and kind_of("hf-vlm:x/y") == "generative"
    assert kind_of("torchvision:cfg.json") == kind_of("py:m:f") == "classifier"
    assert capabilities_of("openai-vlm:m@http://h:1/v1").remote and not has_image_embeddings("openai-vlm:m@http://h:1/v1")
    assert not has_image_embeddings("py:m:f") and has_image_embeddings("hf-vlm:x/y")
    assert not capabilities_of("py:m:f").zero_shot and capabilities_of("hf-vlm:x/y").zero_shot
    assert capabilities_of("open_clip:ViT-B-32/openai").differentiable and not capabilities_of("hf:a/b").differentiable
    assert capabilities_of("openai-vlm:m@http://h:1/v1").devices == ("cpu",)
    assert not capabilities_of("embedded:x").open_ended and capabilities_of("local:/x").open_ended
    # a stored run's model whose plug-in is not installed here reads as contrastive, as it always did
    assert kind_of("gone-plugin:model") == "contrastive" and option_keys("gone-plugin:model") == ()
    assert option_keys("hf-vlm:x") == ("questions", "mode", "score", "dtype")
    assert "concurrency" in option_keys("openai-vlm:m@http://h:1/v1") and option_keys("embedded:fmnist-plain") == ()


def test_model_arg_flags_parse_names_with_colons_and_collect_lists() -> None:
    url = "openai-vlm:llava:7b@http://localhost:11434/v1"
    got = _model_args([f"{url}:concurrency=4", f"{url}:questions=What is it?", f"{url}:questions=Name: the object=?",
                       "hf-vlm:llava-hf/llava-1.5-7b-hf:mode=generate"])
    assert got == {url: {"concurrency": "4", "questions": ["What is it?", "Name: the object=?"]},
                   "hf-vlm:llava-hf/llava-1.5-7b-hf": {"mode": "generate"}}
    with pytest.raises(UserInputError, match="write NAME:key=value"):
        _model_args(["embedded:fmnist-plain"])
    with pytest.raises(UserInputError, match="given twice"):
        _model_args(["hf-vlm:a:mode=generate", "hf-vlm:a:mode=loglik"])


def test_options_are_checked_against_the_schema_and_coerced() -> None:
    cfg = RunConfig(models=["openai-vlm:m@http://h:1/v1"], model_args={"openai-vlm:m@http://h:1/v1": {"concurrency": "4"}})
    assert cfg.model_args == {"openai-vlm:m@http://h:1/v1": {"concurrency": 4}}
    cases = {("embedded:fmnist-plain", "mode", "x"): "'mode' is not an option of the embedded backend (it takes: none)",
             ("hf-vlm:a", "mode", "shout"): "hf-vlm:a: mode: Input should be 'loglik', 'generate' or 'choice'; fix the value of mode",
             ("openai-vlm:m@http://h:1/v1", "concurrency", "0"): "concurrency: Input should be greater than or equal to 1"}
    for (model, key, value), expect in cases.items():
        with pytest.raises(UserInputError, match=None) as e:
            RunConfig.from_sources(None, {"models": [model], "model_args": {model: {key: value}}})
        assert str(e.value).startswith(f"--model-arg {model}") and expect in str(e.value), str(e.value)


def test_a_models_table_holds_the_options_and_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "run.toml"
    path.write_text('device = "cpu"\n\n[models."hf-vlm:a/b"]\nmode = "generate"\nquestions = ["What?", "Which?"]\n\n'
                    '[models."embedded:fmnist-plain"]\n')
    cfg = load_run(path)
    assert cfg.models == ["hf-vlm:a/b", "embedded:fmnist-plain"]
    assert cfg.model_args == {"hf-vlm:a/b": {"mode": "generate", "questions": ["What?", "Which?"]}}
    assert cfg.options_of("hf-vlm:a/b") == {"mode": "generate", "questions": ["What?", "Which?"]}
    assert RunConfig.model_validate(tomllib.loads(dumps(cfg))) == cfg
    # a flag's option over the file's, key by key
    over = RunConfig.from_sources(path, {"model_args": {"hf-vlm:a/b": {"mode": "loglik"}}})
    assert over.model_args == {"hf-vlm:a/b": {"mode": "loglik", "questions": ["What?", "Which?"]}}
    path.write_text('[models."hf-vlm:a/b"]\nmood = "generate"\n')
    with pytest.raises(UserInputError, match=r"^config file .*run.toml: \[models\] hf-vlm:a/b: 'mood' is not an option of the hf-vlm backend \(it takes: questions, mode, score, dtype\); fix the key or leave it out$"):
        RunConfig.from_sources(path)
    # without options a run config dumps as it did: the golden run's stored config is unchanged
    assert "model_args" not in RunConfig().model_dump() and "[models" not in dumps(RunConfig())


def test_old_backend_family_fields_load_as_per_model_options_with_a_note(tmp_path: Path) -> None:
    models = ["hf-vlm:a/b", "openai-vlm:m@http://h:1/v1", "embedded:fmnist-plain"]
    path = tmp_path / "old.toml"
    path.write_text(f'models = {models!r}\nvlm_mode = "generate"\nconcurrency = 3\nquestions = ["Q1?", "Q2?"]\n'.replace("'", '"'))
    notes: list[str] = []
    cfg = RunConfig.from_sources(path, notes=notes)
    assert cfg.model_args == {"hf-vlm:a/b": {"mode": "generate", "questions": ["Q1?", "Q2?"]},
                              "openai-vlm:m@http://h:1/v1": {"mode": "generate", "concurrency": 3, "questions": ["Q1?", "Q2?"]}}
    assert sorted(n.split(": ")[2].split(" ")[0] for n in notes) == ["concurrency", "questions", "vlm_mode"]
    assert all(n.startswith(f"warning: run config {path}: ") and "deprecated" in n for n in notes)
    # a stored run's record, written before per-model options, reads the same way
    stored = RunConfig.model_validate({"models": models, "vlm_score": "mean", "retry_budget": 60.0})
    assert stored.model_args == {"hf-vlm:a/b": {"score": "mean"}, "openai-vlm:m@http://h:1/v1": {"retry_budget": 60.0}}
    # the old flags are checked as they were, and win over the file's options
    with pytest.raises(UserInputError, match="^--concurrency: Input should be greater than or equal to 1$"):
        RunConfig.from_sources(path, {"concurrency": 0})
    assert RunConfig.from_sources(path, {"concurrency": 5}).model_args["openai-vlm:m@http://h:1/v1"]["concurrency"] == 5


def test_a_registered_backend_gets_its_options_in_a_run(tiny_backend: str, tmp_path: Path, home: Path,
                                                        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "domain.toml").write_text(DOMAIN_TOML)
    models = "embedded:fmnist-augmented,tinyopt:aug"
    args = ["run", str(tmp_path / "domain.toml"), "--models", models, "--limit", "20", "--device", "cpu", "--workers", "0",
            "--no-stability", "--no-threat", "--run-id", "opts", "--model-arg", "tinyopt:aug:variant=fmnist-augmented",
            "--model-arg", "tinyopt:aug:logit_scale=50"]
    code, _, err = run_cli(args, capsys, monkeypatch)
    assert code == 0, err
    assert CALLS == [{"variant": "fmnist-augmented", "logit_scale": 50.0}]  # coerced by the schema, given as keywords
    run = open_store().get_run("opts")
    assert run is not None and run.config.model_args == {"tinyopt:aug": {"variant": "fmnist-augmented", "logit_scale": 50.0}}
    code, out, err = run_cli(["export", "opts", "--predictions"], capsys, monkeypatch)
    assert code == 0, err
    preds = pd.read_csv(io.StringIO(out))
    by = {m: g.sort_values(["corruption", "severity", "image"]) for m, g in preds.groupby("model")}
    # the same weights: the same predictions; half the logit scale: the softmax of half the logits
    assert by["tinyopt:aug"]["prediction"].tolist() == by["embedded:fmnist-augmented"]["prediction"].tolist()
    assert not np.allclose(by["tinyopt:aug"]["confidence"], by["embedded:fmnist-augmented"]["confidence"])


def test_a_bad_model_arg_is_one_error_line_and_stores_nothing(tmp_path: Path, home: Path, capsys: pytest.CaptureFixture[str],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "domain.toml").write_text(DOMAIN_TOML)
    base = ["run", str(tmp_path / "domain.toml"), "--models", "embedded:fmnist-plain", "--limit", "10", "--device", "cpu"]
    cases = {"embedded:fmnist-plain:mode=generate": "error: --model-arg embedded:fmnist-plain: 'mode' is not an option of "
                                                    "the embedded backend (it takes: none); fix the key or leave it out",
             "hf-vlm:a/b:mode=generate": "error: --model-arg hf-vlm:a/b: 'hf-vlm:a/b' is not among the run's models",
             "embedded:fmnist-plain": "error: --model-arg embedded:fmnist-plain: write NAME:key=value"}
    for arg, expect in cases.items():
        code, _, err = run_cli([*base, "--model-arg", arg], capsys, monkeypatch)
        lines = [ln for ln in err.strip().splitlines() if ln.strip()]
        assert code == 2 and len(lines) == 1 and lines[0].startswith(expect), err
    assert open_store().list_runs() == []


CLASSIFIER = '''
import numpy as np

CENTRES = np.linspace(0, 255, {n})


def classify(images):
    """Nearest centre to each image's mean brightness: logits are minus the distances."""
    means = images.reshape(len(images), -1).astype(np.float64).mean(axis=1)
    return -np.abs(means[:, None] - CENTRES[None, :])
'''


def test_a_python_classifier_is_a_model_of_a_corruption_run(tmp_path: Path, home: Path, capsys: pytest.CaptureFixture[str],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from domainbench.data import open_dataset

    (tmp_path / "domain.toml").write_text(DOMAIN_TOML)
    (tmp_path / "bright_mod.py").write_text(CLASSIFIER.format(n=10))
    monkeypatch.syspath_prepend(str(tmp_path))
    code, out, err = run_cli(["run", str(tmp_path / "domain.toml"), "--models", "embedded:fmnist-plain,py:bright_mod:classify",
                              "--limit", "20", "--device", "cpu", "--workers", "0", "--no-threat", "--run-id", "plain"],
                             capsys, monkeypatch)
    assert code == 0, err
    assert "stability: n/a for py:bright_mod:classify: a plain classifier gives no image embeddings" in " ".join(out.split())
    store = open_store()
    assert {r.model for r in store.stability.find(run_id="plain")} == {"embedded:fmnist-plain"}
    code, out, err = run_cli(["export", "plain", "--predictions"], capsys, monkeypatch)
    assert code == 0, err
    preds = pd.read_csv(io.StringIO(out))
    clean = preds[(preds["model"] == "py:bright_mod:classify") & (preds["corruption"] == "clean")].sort_values("image")
    # independently: the callable on the run's images, its argmax, and the softmax of its logits at that class
    ds = open_dataset("sample").subset(20)
    batch = ds.load(clean["image"].to_numpy())
    sys.path.insert(0, str(tmp_path))
    try:
        import bright_mod
    finally:
        sys.path.remove(str(tmp_path))
    logits = bright_mod.classify(batch.images)
    assert clean["prediction"].tolist() == [ds.classes[k] for k in logits.argmax(axis=1)]
    assert clean["label"].tolist() == [ds.classes[k] for k in batch.labels]
    soft = np.exp(logits - logits.max(axis=1, keepdims=True))
    np.testing.assert_allclose(clean["confidence"], (soft / soft.sum(axis=1, keepdims=True)).max(axis=1), rtol=1e-5)
    cells = pd.read_csv(io.StringIO(run_cli(["export", "plain", "--format", "csv"], capsys, monkeypatch)[1]))
    row = cells[(cells["model"] == "py:bright_mod:classify") & (cells["corruption"] == "clean")].iloc[0]
    assert row["top1_accuracy"] == pytest.approx(float(np.mean(clean["prediction"] == clean["label"])), abs=1e-12)


def test_a_classifier_over_other_classes_is_refused_in_a_run(tmp_path: Path, home: Path, capsys: pytest.CaptureFixture[str],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "domain.toml").write_text(DOMAIN_TOML)
    (tmp_path / "three_mod.py").write_text(CLASSIFIER.format(n=3) + "\nclassify.classes = ['a', 'b', 'c']\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    code, _, err = run_cli(["run", str(tmp_path / "domain.toml"), "--models", "py:three_mod:classify", "--limit", "10",
                            "--device", "cpu", "--workers", "0"], capsys, monkeypatch)
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and "classifies over ['a', 'b', 'c']" in lines[0], err
    assert open_store().list_runs() == []


def test_fmr_loads_its_models_with_the_runs_options(tiny_backend: str) -> None:
    from domainbench.data import open_dataset
    from domainbench.fmr.oracle import load_oracle
    from domainbench.fmr.tested import load_tested

    ds = open_dataset("sample").subset(30)
    images = ds.load(np.arange(30)).images
    options = {"tinyopt:x": {"variant": "fmnist-augmented"}}
    oracle = load_oracle(["tinyopt:x", "embedded:fmnist-augmented"], ds.classes, "cpu", 16, None, options=options)
    votes = oracle.votes(images)
    assert votes[:, 0].tolist() == votes[:, 1].tolist()  # the option chose the augmented weights
    default = load_oracle(["tinyopt:x", "embedded:fmnist-augmented"], ds.classes, "cpu", 16, None)
    assert default.votes(images)[:, 0].tolist() != votes[:, 1].tolist()  # without it: the plain weights
    tested = load_tested("tinyopt:x", ds.classes, "cpu", 16, None, images, options={"variant": "fmnist-augmented",
                                                                                      "logit_scale": 10.0})
    reference = load_tested("embedded:fmnist-augmented", ds.classes, "cpu", 16, None, images)
    # the same cosine similarities, at the logit scale the options gave (the embedded weights carry their own)
    scale = reference.state.model.logit_scale
    assert scale != 10.0
    np.testing.assert_allclose(tested.logits(images).numpy(), reference.logits(images).numpy() * 10.0 / scale, rtol=1e-5, atol=1e-6)

"""`domainbench run --task vqa|retrieval` end to end (issue 38): stored, listed, shown and exported; the exported
answers re-scored independently give the stored numbers; bad input is one `error:` line with nothing stored."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest

import domainbench
from domainbench.records.config import CorruptionChoice, DomainConfig, RunConfig
from domainbench.data.task_samples import write_sample_manifests
from domainbench.engine.task_eval import evaluate_task
from domainbench.errors import UserInputError
from domainbench.metrics.task_report import RETRIEVAL_COLUMNS, VQA_COLUMNS
from domainbench.store import open_store
from domainbench.query.task_output import VQA_PREDICTION_COLUMNS
from tests.cli_runner import run_cli
from tests.engine.test_task_eval import _independent_normalise
from tests.models.tiny_vlms import save_tiny_llava

DOMAIN = DomainConfig(domain="dim and noisy", corruptions=[CorruptionChoice(name="gaussian_noise", severities=[5])])
EMBEDDED = ["embedded:fmnist-plain", "embedded:fmnist-augmented"]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("task_runs")
    vqa, retrieval = write_sample_manifests(root / "m", images=6, seed=0)
    (root / "plan.toml").write_text('domain = "dim and noisy"\n[[corruptions]]\nname = "gaussian_noise"\n'
                                    "severities = [5]\n")
    (root / "run.toml").write_text("image_size = 32\n")
    return {"root": root, "vqa": vqa, "retrieval": retrieval, "plan": root / "plan.toml", "run": root / "run.toml",
            "llava": save_tiny_llava(root / "llava")}


def _cli(args: list[str], home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
         code: int = 0) -> tuple[str, str]:
    monkeypatch.setenv("DOMAINBENCH_HOME", str(home))
    got, out, err = run_cli(args, capsys, monkeypatch)
    assert got == code, err
    return out, err


def _csv(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def test_vqa_run_is_listed_shown_and_exported_and_the_answers_rescore(
        inputs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    model = f"hf-vlm:{inputs['llava']}"
    out, _ = _cli(["run", str(inputs["plan"]), "--task", "vqa", "--dataset", str(inputs["vqa"]), "--models", model,
                   "--run-config", str(inputs["run"]), "--max-new-tokens", "4", "--run-id", "vqa-1"],
                  tmp_path, capsys, monkeypatch)
    assert "VQA%" in out and "vqa_accuracy" in out and "gauss" in out
    shown, _ = _cli(["show", "vqa-1"], tmp_path, capsys, monkeypatch)
    assert shown == out  # `show` prints the stored table that `run` printed
    listed, _ = _cli(["ls"], tmp_path, capsys, monkeypatch)
    assert "vqa-1" in listed and "done" in listed

    rows = _csv(_cli(["export", "vqa-1", "--format", "csv"], tmp_path, capsys, monkeypatch)[0])
    assert tuple(rows[0]) == VQA_COLUMNS and len(rows) == 2
    as_json = json.loads(_cli(["export", "vqa-1", "--format", "json"], tmp_path, capsys, monkeypatch)[0])
    assert as_json["task"] == "vqa" and [tuple(r) for r in as_json["rows"]] == [VQA_COLUMNS] * 2
    preds = _csv(_cli(["export", "vqa-1", "--predictions"], tmp_path, capsys, monkeypatch)[0])
    assert tuple(preds[0]) == VQA_PREDICTION_COLUMNS and len(preds) == 2 * 18
    for row, jrow in zip(rows, as_json["rows"]):
        mine = [p for p in preds if p["corruption"] == row["corruption"]]
        right = []
        for p in mine:
            refs = {_independent_normalise(r) for r in json.loads(p["references"])}
            answer = _independent_normalise(p["answer"])
            right.append(float(bool(answer) and answer in refs))
        assert float(row["vqa_accuracy"]) == pytest.approx(np.mean(right), abs=1e-12)
        assert jrow["vqa_accuracy"] == pytest.approx(np.mean(right), abs=1e-12)
        flips = [_independent_normalise(p["answer"]) != _independent_normalise(p["clean_answer"]) for p in mine]
        if row["corruption"] == "clean":
            assert row["answer_flip_rate"] == "" and jrow["answer_flip_rate"] is None
        else:
            assert float(row["answer_flip_rate"]) == pytest.approx(np.mean(flips), abs=1e-12)
            assert sum(p["flipped"] == "True" for p in mine) == sum(flips)
        assert float(row["vqa_accuracy_ci_low"]) <= float(row["vqa_accuracy"]) <= float(row["vqa_accuracy_ci_high"])
    # the stored run evaluates exactly as the library does in memory (same seed, same cells)
    direct = evaluate_task(DOMAIN, "vqa", inputs["vqa"], [model], image_size=32, max_new_tokens=4)
    assert [r["vqa_accuracy"] for r in direct.rows] == [r["vqa_accuracy"] for r in as_json["rows"]]
    # a finished task run resumed computes nothing and prints what it stored
    capsys.readouterr()  # the direct evaluation's weight-loading bars
    code, resumed, err = run_cli(["run", "--resume", "vqa-1"], capsys, monkeypatch, quiet=False)
    assert code == 0, err
    assert "0 units computed, 2 already stored" in err and shown.splitlines()[0] in resumed


def test_retrieval_from_python_equals_the_library_and_exports_its_columns(
        inputs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    done = domainbench.run(inputs["plan"], EMBEDDED, dataset=inputs["retrieval"], task="retrieval",
                           run_config={"image_size": 32}, store=tmp_path, run_id="ret-1")
    direct = evaluate_task(DOMAIN, "retrieval", inputs["retrieval"], EMBEDDED, image_size=32)
    from domainbench.engine.task_kind import load_task_run

    stored = load_task_run(done.store, done.id)
    assert stored.rows == direct.rows
    assert stored.paired == direct.paired
    assert stored.run.config.task == "retrieval" and stored.run.kind == "retrieval"
    rows = _csv(_cli(["export", "ret-1"], tmp_path, capsys, monkeypatch)[0])
    assert tuple(rows[0]) == RETRIEVAL_COLUMNS and len(rows) == 4
    noisy = [r for r in direct.rows if r["corruption"] == "gaussian_noise"]
    assert [float(r["top1_change_rate"]) for r in rows if r["corruption"] == "gaussian_noise"] == \
        [r["top1_change_rate"] for r in noisy]
    preds = _csv(_cli(["export", "ret-1", "--predictions", "--format", "csv"], tmp_path, capsys, monkeypatch)[0])
    # one row per query (12 captions + 6 images) per model x cell, the rank of its first correct item
    assert len(preds) == 4 * 18
    clean_plain = [p for p in preds if p["model"] == EMBEDDED[0] and p["corruption"] == "clean" and p["query"] == "caption"]
    clean_row = next(r for r in direct.rows if r["model"] == EMBEDDED[0] and r["corruption"] == "clean")
    assert np.mean([int(p["rank"]) <= 1 for p in clean_plain]) == pytest.approx(clean_row["image_retrieval_recall@1"])
    shown, _ = _cli(["show", "ret-1"], tmp_path, capsys, monkeypatch)
    assert "iR@1%" in shown and "paired verdicts" in shown
    at90, _ = _cli(["show", "ret-1", "--confidence", "0.9"], tmp_path, capsys, monkeypatch)
    assert "(90% intervals)" in at90 and "(95% intervals)" in shown


def test_classification_configs_dump_as_before() -> None:
    dumped = RunConfig().model_dump()
    assert "task" not in dumped and "max_new_tokens" not in dumped
    assert RunConfig(task="vqa").model_dump()["task"] == "vqa"


def _bad_jsonl(root: Path, rows: list[dict[str, object]]) -> Path:
    p = root / "bad.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return p


def test_bad_input_is_one_error_line_and_nothing_is_stored(
        inputs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    image = "images/" + sorted(p.name for p in (inputs["vqa"].parent / "images").iterdir())[0]
    bad_root = inputs["vqa"].parent
    base = ["run", str(inputs["plan"]), "--run-config", str(inputs["run"])]
    llava = f"hf-vlm:{inputs['llava']}"
    cases = [
        (["--task", "vqa", "--dataset", str(inputs["vqa"]), "--models", "embedded:fmnist-plain"],
         "embedded:fmnist-plain is a contrastive model"),
        (["--task", "retrieval", "--dataset", str(inputs["retrieval"]), "--models", llava], "is a generative model"),
        (["--task", "vqa", "--dataset", str(_bad_jsonl(bad_root, [{"image": image}])), "--models", llava],
         "line 1"),
        (["--task", "vqa", "--dataset", "sample", "--models", llava], "needs a vqa manifest"),
        (["--task", "vqa", "--dataset", str(inputs["vqa"]), "--models", llava, "--executor", "ray"],
         "--executor ray"),
        (["--task", "vqa", "--dataset", str(inputs["vqa"]), "--models", llava, "--max-new-tokens", "0"],
         "--max-new-tokens"),
        (["--task", "retrieval", "--dataset", str(inputs["retrieval"]), "--models", "embedded:fmnist-plain",
          "--max-new-tokens", "8"], "--max-new-tokens"),
        (["--task", "vqa", "--dataset", str(inputs["vqa"]), "--models", llava, "--adaptive"], "--adaptive"),
        (["--task", "poetry", "--dataset", str(inputs["vqa"]), "--models", llava], "task"),
        (["--task", "vqa", "--dataset", str(_bad_jsonl(bad_root, [{"image": image, "question": "Is it?",
                                                                    "answers": [1, 2]}])), "--models", llava],
         "line 1"),
        (["--task", "vqa", "--dataset", str(_bad_jsonl(bad_root, [{"image": image, "question": "Which?",
                                                                    "choices": ["a", "b"], "answers": ["c"]}])),
          "--models", llava], "line 1"),
    ]
    monkeypatch.setenv("DOMAINBENCH_HOME", str(tmp_path))
    for args, says in cases:
        code, out, err = run_cli(base + args, capsys, monkeypatch)
        assert code == 2, (args, err)
        assert err.startswith("error: ") and err.count("\n") == 1 and says in err, (args, err)
    latin = bad_root / "latin.csv"
    latin.write_bytes(f"image,question\n{image},Est-ce une chaussure \xe9t\xe9 ?\n".encode("latin-1"))
    code, _, err = run_cli(base + ["--task", "vqa", "--dataset", str(latin), "--models", llava], capsys, monkeypatch)
    assert code == 2 and "UTF-8" in err and err.count("\n") == 1, err
    missing = _bad_jsonl(bad_root, [{"image": "images/nope.png", "question": "Is this a shoe?"}])
    code, _, err = run_cli(base + ["--task", "vqa", "--dataset", str(missing), "--models", llava], capsys, monkeypatch)
    assert code == 2 and "nope.png" in err and err.count("\n") == 1
    assert open_store(home=tmp_path).list_runs() == []


def test_demo_vqa_answers_the_closed_questions_with_the_embedded_models(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    # the demo's planned domain has dozens of cells; its flow (manifests, the closed questions, the run, the
    # table) is the same on one cell, which keeps this test fast
    monkeypatch.setattr("domainbench.api.plan", lambda text, provider: DOMAIN)
    out, _ = _cli(["demo", "--task", "vqa", "--limit", "4"], tmp_path, capsys, monkeypatch)
    assert "VQA%" in out
    (run,) = open_store(home=tmp_path).list_runs()
    from domainbench.engine.task_kind import load_task_run

    result = load_task_run(open_store(home=tmp_path), run.run_id)
    assert run.kind == "vqa" and sorted(run.config.models) == sorted(EMBEDDED)
    questions = {p["question"] for p in result.predictions}
    assert "What kind of garment is this?" not in questions and "Is this a shoe?" in questions
    clean = [p for p in result.predictions if p["model"] == EMBEDDED[0] and p["corruption"] == "clean"
             and p["question"] == "Is this a shoe?"]
    row = next(r for r in result.rows if r["model"] == EMBEDDED[0] and r["corruption"] == "clean")
    assert len(clean) == 4 and row["yes_no_accuracy"] == pytest.approx(np.mean([p["correct"] for p in clean]))

"""`domainbench export RUN --predictions`: one row per (model, cell, image) with the true and
predicted class names and the softmax confidence, checked against an independent per-image
computation with the model; CSV and JSON agree; bad input writes nothing."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest
import torch

import domainbench
from domainbench import corruptions
from domainbench.records.config import CorruptionChoice, DomainConfig, RunConfig
from domainbench.data import load_sample
from domainbench.engine.jobs import image_seeds
from domainbench.models import build_classifier, create_model
from domainbench.store import open_store
from tests.cli_runner import run_cli

DOMAIN = DomainConfig(domain="export test", corruptions=[
    CorruptionChoice(name="gaussian_noise", severities=[1, 3], reason="sensor"),
    CorruptionChoice(name="brightness", severities=[2], reason="exposure")])
N = 30


@pytest.fixture
def run_id(home: Path) -> str:
    cfg = RunConfig(models=["fake:a", "fake:b"], limit=N, shard_size=12, workers=0, stability=False, threat=False)
    return domainbench.run(DOMAIN, run_config=cfg).id  # into $DOMAINBENCH_HOME, as the CLI's run


def read_csv(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def test_rows_are_images_times_cells_times_models_and_match_the_model(run_id: str, capsys, monkeypatch) -> None:
    code, out, err = run_cli(["export", run_id, "--predictions"], capsys, monkeypatch)
    assert code == 0, err
    rows = read_csv(out)
    cells = [("clean", 0), ("brightness", 2), ("gaussian_noise", 1), ("gaussian_noise", 3)]
    assert len(rows) == N * len(cells) * 2
    assert list(rows[0]) == ["model", "corruption", "severity", "image", "path", "label", "prediction", "correct", "confidence"]

    stored = {(u.model, u.corruption, u.severity, int(i)): float(c)
              for u in open_store().units(run_id) for i, c in zip(u.indices, u.confidence)}
    ds = load_sample().subset(N)
    for name in ("fake:a", "fake:b"):
        model = create_model(name, "cpu")
        clf = build_classifier(model, ds.classes)
        for corr, sev in cells:
            if corr == "clean":
                images = ds.arrays
            else:
                seeds = image_seeds(0, corr, sev, np.arange(N))
                images = np.stack([corruptions.corrupt(im, corr, severity=sev, seed=s) for im, s in zip(ds.arrays, seeds)])
            with torch.inference_mode():
                sims = model.embed_images(images) @ clf.T
                prob = torch.softmax(sims * model.logit_scale, dim=1)
            mine = [r for r in rows if (r["model"], r["corruption"], int(r["severity"])) == (name, corr, sev)]
            assert [int(r["image"]) for r in mine] == list(range(N))
            for r, s, pr, y in zip(mine, sims, prob, ds.labels):
                p = int(s.argmax())
                assert (r["label"], r["prediction"], r["correct"]) == (ds.classes[y], ds.classes[p], str(p == y))
                # written at full precision: the stored float32 exactly; the independent forward pass (a batch
                # of 30, the run's shards hold 12) to float32 precision, since float32 kernels may round another
                # batch size differently (measured on an AVX-512 EPYC: 2e-7 relative)
                assert float(r["confidence"]) == stored[(name, corr, sev, int(r["image"]))]
                assert float(r["confidence"]) == pytest.approx(float(pr[p]), rel=1e-5)
                assert r["path"] == ""  # the sample is in memory


def test_json_holds_the_same_rows(run_id: str, tmp_path: Path, capsys, monkeypatch) -> None:
    code, out, _ = run_cli(["export", run_id, "--predictions"], capsys, monkeypatch)
    code, _, err = run_cli(["export", run_id, "--predictions", "--format", "json", "-o", str(tmp_path / "p.json")],
                           capsys, monkeypatch)
    assert code == 0, err
    doc = json.loads((tmp_path / "p.json").read_text())
    assert doc["run_id"] == run_id and list(doc["columns"]) == list(read_csv(out)[0])
    as_text = [{k: "" if v is None else str(v) for k, v in r.items()} for r in doc["rows"]]
    assert as_text == read_csv(out)


def test_unknown_run_is_one_line_and_writes_nothing(home: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    code, _, err = run_cli(["export", "nope", "--predictions", "-o", str(tmp_path / "p.csv")], capsys, monkeypatch)
    assert code == 2 and err.startswith("error: no run 'nope'") and err.count("\n") == 1
    assert not [p for p in tmp_path.iterdir() if p.name != "home"]


def test_an_answer_that_named_no_class_exports_an_empty_prediction(home: Path) -> None:
    from domainbench.query.predictions import prediction_rows
    from domainbench.models.generative import UNPARSED

    store = open_store()
    run_id = domainbench.run(DOMAIN, ["fake:a"], limit=4, workers=0, stability=False, threat=False, store=store).id
    unit = store.units.get(run_id=run_id, model="fake:a", corruption="brightness", severity=2, shard=0)
    preds = np.asarray(unit.preds).copy()
    preds[1] = UNPARSED  # as a generative model's unparsed answer is stored
    store.units.put(unit.model_copy(update={"preds": preds, "hits": None}))
    rows = [r for r in prediction_rows(store, run_id) if r["corruption"] == "brightness"]
    assert rows[1]["prediction"] == "" and rows[1]["correct"] is False
    assert rows[0]["prediction"] == unit.classes[int(unit.preds[0])]

"""FMR runs through the store and the CLI: resumable units, stored images valid, one-line bad input."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest

from domainbench.records.config import CorruptionChoice, DomainConfig, FmrSettings, RunConfig, save
from domainbench.engine.tasks import SilentEvents
from domainbench.fmr.images import from_png_b64
from domainbench.fmr.oracle import load_oracle
from domainbench.fmr.runner import FmrRunner
from domainbench.store import open_store
from tests.cli_runner import run_cli

from .conftest import AUGMENTED, FAMILY, PLAIN

DOMAIN = DomainConfig(domain="fmr test", corruptions=[CorruptionChoice(name=n, reason="r") for n in FAMILY])
CFG = RunConfig(models=[PLAIN], limit=12, device="cpu", stability=False, threat=False)
SETTINGS = FmrSettings(oracle=[PLAIN, AUGMENTED], budget=2, candidates=3, step_size=0.3, shard_size=4)


class KillAfter(SilentEvents):
    """Interrupts the run like Ctrl-C once ``n`` units are stored."""

    def __init__(self, n: int) -> None:
        self.n, self.seen = n, 0

    def advance(self, units: int, images: int) -> None:
        self.seen += units
        if self.seen >= self.n:
            raise KeyboardInterrupt


def test_killed_fmr_run_resumes_without_recomputing_stored_units(home: Path) -> None:
    store = open_store()
    with pytest.raises(KeyboardInterrupt):
        FmrRunner(store, KillAfter(2)).start(DOMAIN, CFG, SETTINGS, run_id="fmr-kill")
    assert store.get_run("fmr-kill").status == "interrupted"
    before = {r.shard: r for r in store.find("fmr", run_id="fmr-kill")}
    assert sorted(before) == [0, 1]
    # the UI counts an FMR run's cells as one search per model (not the domain's severities)
    from domainbench.frontend.data import done_cells, expected_cells

    run = store.get_run("fmr-kill")
    assert (done_cells(store, run), expected_cells(run)) == (1, 1)
    runner = FmrRunner(store)
    runner.resume("fmr-kill")
    assert (runner.skipped_units, runner.computed_units) == (2, 1)
    after = {r.shard: r for r in store.find("fmr", run_id="fmr-kill")}
    assert sorted(after) == [0, 1, 2]
    for shard in (0, 1):  # untouched: the very same documents
        assert after[shard] == before[shard]
    # a fresh, uninterrupted run gives the same outcomes: resuming changed nothing
    FmrRunner(store).start(DOMAIN, CFG, SETTINGS, run_id="fmr-whole")
    whole = {r.shard: r for r in store.find("fmr", run_id="fmr-whole")}
    for shard in (0, 1, 2):
        a, b = after[shard], whole[shard]
        assert (a.final_preds, a.steps, a.ops, a.images) == (b.final_preds, b.steps, b.ops, b.images)
    report = store.get_report("fmr-kill")
    assert report is not None and report.fmr is not None
    m = report.fmr.models[0]
    labels = np.concatenate([after[s].labels for s in (0, 1, 2)])
    final = np.concatenate([after[s].final_preds for s in (0, 1, 2)])
    clean = np.concatenate([after[s].clean_preds for s in (0, 1, 2)])
    assert m.n == 12 and m.pa == pytest.approx((final == labels).mean()) and m.sa == pytest.approx((clean == labels).mean())
    assert m.fmr == pytest.approx(100 * m.pa / m.sa)
    # SA is the same clean accuracy the run's ordinary clean units give
    assert report.model(PLAIN).clean is not None


def test_every_stored_image_is_one_the_oracle_accepts(home: Path) -> None:
    store = open_store()
    FmrRunner(store).start(DOMAIN, CFG, SETTINGS.model_copy(update={"oracle": [AUGMENTED, PLAIN]}), run_id="fmr-valid")
    records = store.find("fmr", run_id="fmr-valid")
    run = store.get_run("fmr-valid")
    oracle = load_oracle(run.fmr.oracle, run.dataset.classes, "cpu", 64, None)
    stored = [(from_png_b64(img), lab, votes) for r in records for img, lab, votes in zip(r.images, r.labels, r.oracle_final) if img]
    assert stored, "the search perturbed no image"
    images = np.stack([s[0] for s in stored])
    votes = oracle.votes(images)
    assert oracle.agrees(votes, np.array([s[1] for s in stored])).all()
    assert votes.tolist() == [s[2] for s in stored]  # the stored votes are the oracle's on the stored pixels


_cli = run_cli


def test_cli_fmr_then_show_and_export(home: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    cfg = save(DOMAIN, tmp_path / "domain.toml")
    code, out, err = _cli(["fmr", str(cfg), "--models", PLAIN, "--oracle", f"{PLAIN},{AUGMENTED}", "--budget", "1",
                           "--limit", "6", "--run-id", "cli-fmr", "--device", "cpu"], capsys, monkeypatch)
    assert code == 0, err
    assert "FMR" in out and "oracle: majority of 2" in out
    code, out, _ = _cli(["show", "cli-fmr"], capsys, monkeypatch)
    assert code == 0 and "FMR" in out and PLAIN in out
    code, out, _ = _cli(["export", "cli-fmr"], capsys, monkeypatch)
    rows = [ln.split(",") for ln in out.strip().splitlines()]
    assert rows[0][-4:] == ["sa", "fmr", "validation_rate", "mean_steps"]
    fmr_rows = list(csv.DictReader(io.StringIO(out)))
    code, js, _ = _cli(["export", "cli-fmr", "--format", "json"], capsys, monkeypatch)
    (model,) = json.loads(js)["report"]["fmr"]["models"]
    (row,) = [r for r in fmr_rows if r["corruption"] == "fmr"]
    # the row carries the model's image count and PA (they were written under names the CSV does not have, and lost)
    assert (row["model"], row["severity"]) == (PLAIN, "0") and int(row["n_images"]) == model["n"] == 6
    assert float(row["top1_accuracy"]) == model["pa"] and float(row["sa"]) == model["sa"]



def test_interrupted_fmr_run_points_to_fmr_resume(home: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    from domainbench.engine.runner import Engine

    monkeypatch.setattr(Engine, "start", interrupted)  # `domainbench fmr` starts through the API's engine
    cfg = save(DOMAIN, tmp_path / "domain.toml")
    code, _, err = _cli(["fmr", str(cfg), "--models", PLAIN, "--oracle", f"{PLAIN},{AUGMENTED}", "--limit", "6",
                         "--device", "cpu"], capsys, monkeypatch)
    assert code == 130
    assert "continue with `domainbench fmr --resume RUN`" in err


WRONG_CLASSES = """
import numpy as np
def classify(images):
    return np.zeros((len(images), 2))
classify.classes = ["cat", "dog"]
def wide(images):
    return np.zeros((len(images), 3))
"""


@pytest.mark.parametrize("case", ["one_oracle", "wrong_classes", "wrong_width", "oracle_not_zero_shot"])
def test_fmr_bad_input_is_one_line_exit_2_and_stores_nothing(case: str, home: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    (tmp_path / "fmr_models_mod.py").write_text(WRONG_CLASSES)
    monkeypatch.syspath_prepend(str(tmp_path))
    cfg = save(DOMAIN, tmp_path / "domain.toml")
    models, oracle, expect = PLAIN, f"{PLAIN},{AUGMENTED}", ""
    if case == "one_oracle":
        oracle, expect = PLAIN, "at least 2 zero-shot models"
    elif case == "wrong_classes":
        models, expect = "py:fmr_models_mod:classify", "FMR needs the same classes"
    elif case == "wrong_width":
        models, expect = "py:fmr_models_mod:wide", "expected (N, 10)"
    else:
        oracle, expect = f"{PLAIN},py:fmr_models_mod:classify", "not zero-shot capable"
    code, _, err = _cli(["fmr", str(cfg), "--models", models, "--oracle", oracle, "--limit", "4", "--device", "cpu"],
                        capsys, monkeypatch)
    assert code == 2, err
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and expect in lines[0], err
    store = open_store()
    assert store.list_runs() == [] and store.find("fmr") == [] and store.find("units") == []

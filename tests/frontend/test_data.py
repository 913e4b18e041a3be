"""The UI's data layer against a temporary SQLite store holding synthetic runs."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import fe_synthetic as syn
import numpy as np
import pytest
from sklearn.metrics import balanced_accuracy_score

import corruptions
from backend.config import DomainConfig
from backend.engine.reports import build_report
from backend.errors import UserInputError
from backend.report import Versions
from backend.store import Store
from frontend import data

DONE = "20250101-000000-night-abcd"
LIVE = "20250103-000000-live-1234"


def expand(cm: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    y, p = [], []
    for i, row in enumerate(cm):
        for j, k in enumerate(row):
            y += [i] * k
            p += [j] * k
    return np.array(y), np.array(p)


def test_runs_frame_lists_newest_first(populated: Store) -> None:
    f = data.runs_frame(populated)
    assert f["run"].tolist() == [LIVE, "20250102-000000-xray-ef01", DONE]
    assert f["status"].tolist() == ["running", "done", "done"]
    assert f.loc[0, "models"] == ", ".join(syn.MODELS)
    assert f.loc[0, "images"] == syn.PER_CLASS * len(syn.CLASSES) * 2


def test_runs_frame_of_an_empty_store_is_empty(store: Store) -> None:
    assert data.runs_frame(store).empty


def test_summary_table_matches_hand_computation(populated: Store) -> None:
    view = data.load_run_view(populated, DONE)
    assert not view.partial and view.done_cells == view.total_cells == 2 * (1 + 3 + 2)
    t = data.summary_frame(view.report).set_index("model")
    for m in syn.MODELS:
        y, p = expand(syn.confusion(syn.correct(m, 0)))
        assert t.loc[m, "clean acc %"] == pytest.approx(100 * balanced_accuracy_score(y, p))
    # errors: good (1+s)/10, weak (2+2s)/10 -> every CE, rCE and FR of weak vs good is 2
    assert t.loc["embedded:good", "mCE"] == pytest.approx(1.0)
    assert t.loc["embedded:weak", "mCE"] == pytest.approx(2.0)
    assert t.loc["embedded:weak", "rCE"] == pytest.approx(2.0)
    assert t.loc["embedded:weak", "mFR"] == pytest.approx(2.0)
    assert t.loc["embedded:weak", "corr(acc, LFP)"] == pytest.approx(-1.0)
    # safe cells: noise s1, s2 (threat 0.5, 1.0) and brightness s1, s2
    safe = [("gaussian_noise", 1), ("gaussian_noise", 2), ("brightness", 1), ("brightness", 2)]
    for m in syn.MODELS:
        expect = np.mean([syn.correct(m, s) / syn.PER_CLASS for _, s in safe])
        assert t.loc[m, "safe-cell acc %"] == pytest.approx(100 * expect)
    assert bool(t.loc["embedded:good", "baseline"]) and not bool(t.loc["embedded:weak", "baseline"])


def test_changing_the_baseline_recomputes_relative_metrics(populated: Store) -> None:
    view = data.load_run_view(populated, DONE, baseline="embedded:weak")
    t = data.summary_frame(view.report).set_index("model")
    assert view.report.baseline == "embedded:weak"
    assert t.loc["embedded:good", "mCE"] == pytest.approx(0.5)
    assert t.loc["embedded:weak", "mCE"] == pytest.approx(1.0)
    with pytest.raises(UserInputError, match="not a model"):
        data.load_run_view(populated, DONE, baseline="embedded:nope")


def test_a_finished_run_uses_its_stored_report(populated: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    marked = build_report(populated, DONE).model_copy(update={"versions": Versions(domainbench="stored")})
    populated.put_report(marked)
    rebuilt = build_report(populated, DONE, baseline="embedded:weak")
    # neither the run's own baseline nor another one reads a unit document: the stored report holds the cell sums
    monkeypatch.setattr(populated, "units", lambda *a, **k: pytest.fail("the units were read"))
    assert data.load_run_view(populated, DONE).report.versions.domainbench == "stored"
    other = data.load_run_view(populated, DONE, baseline="embedded:weak").report
    assert other.baseline == "embedded:weak" and other.versions.domainbench == "stored"
    assert other.classification == rebuilt.classification  # the same numbers as a rebuild from the units


def test_a_resumed_run_does_not_trust_its_old_report(populated: Store) -> None:
    populated.put_report(build_report(populated, DONE).model_copy(update={"versions": Versions(domainbench="stored")}))
    populated.update_run(DONE, status="running")
    assert data.load_run_view(populated, DONE).report.versions.domainbench != "stored"


def test_partial_run_is_labelled_and_summarised_from_stored_units(populated: Store) -> None:
    view = data.load_run_view(populated, LIVE)
    assert view.partial and view.status == "running"
    assert (view.done_cells, view.total_cells) == (2 * 4, 2 * 6)
    cells = {(c.corruption, c.severity) for c in view.report.models[0].cells}
    assert cells == {("gaussian_noise", 1), ("gaussian_noise", 2), ("gaussian_noise", 3)}


def test_running_run_without_units_has_no_summary_but_a_reason(store: Store) -> None:
    run = syn.populate(store, run_id="r-empty", status="running")
    store.delete("units", run_id="r-empty")
    view = data.load_run_view(store, run.run_id)
    assert view.report is None and "just started" in view.error
    with pytest.raises(UserInputError, match="no run 'missing'"):
        data.load_run_view(store, "missing")


def test_cells_frame_and_csv_export(populated: Store) -> None:
    s = data.load_run_view(populated, DONE).report
    f = data.cells_frame(s)
    assert len(f) == 2 * 6
    row = f[(f.model == "embedded:weak") & (f.corruption == "gaussian_noise") & (f.severity == 3)].iloc[0]
    assert row["accuracy"] == pytest.approx(syn.correct("embedded:weak", 3) / syn.PER_CLASS)
    assert row["mean_threat"] == pytest.approx(1.5) and not row["safe"]
    rows = list(csv.DictReader(io.StringIO(data.export_csv(s))))
    assert len(rows) == 12 and {r["run_id"] for r in rows} == {DONE}
    clean = next(r for r in rows if r["model"] == "embedded:good" and r["corruption"] == "clean")
    assert float(clean["accuracy"]) == pytest.approx(0.9) and clean["mean_threat"] == ""
    doc = json.loads(data.export_json(populated.get_run(DONE), s))
    assert doc["run"]["run_id"] == DONE and doc["report"]["baseline"] == "embedded:good"


def test_confusion_of_returns_the_summed_matrix(populated: Store) -> None:
    s = data.load_run_view(populated, DONE).report
    cm = data.confusion_of(s, "embedded:weak", "brightness", 2)
    assert np.array_equal(cm, 2 * np.array(syn.confusion(syn.correct("embedded:weak", 2))))  # two shards
    with pytest.raises(UserInputError, match="no cell"):
        data.confusion_of(s, "embedded:weak", "brightness", 5)


def test_stability_frame_holds_every_image_and_matches_summary_means(populated: Store) -> None:
    f = data.stability_frame(populated, DONE)
    assert len(f) == 2 * 2 * 2 * 5  # models × corruptions × shards × images
    docs = populated.find("stability", run_id=DONE)
    for m in syn.MODELS:
        vals = [v for d in docs if d.model == m and d.corruption == "brightness" for v in d.divergence_radius]
        got = f[(f.model == m) & (f.corruption == "brightness")]["divergence_radius"]
        assert sorted(got) == pytest.approx(sorted(vals))
    means = {(r.model, r.corruption): r.cosine for r in data.load_run_view(populated, DONE).report.stability}
    grouped = f.groupby(["model", "corruption"])["cosine"].mean()
    for key, v in grouped.items():
        assert means[key] == pytest.approx(v)


def test_compare_frame_across_domains_with_a_shared_baseline(populated: Store) -> None:
    ids = [DONE, "20250102-000000-xray-ef01", LIVE]
    assert data.shared_models(populated, ids) == syn.MODELS
    frame, problems = data.compare_frame(populated, ids, baseline="embedded:weak")
    assert problems == [] and len(frame) == 6
    good = frame[frame.model == "embedded:good"]
    assert np.allclose(good["mce"], 0.5) and set(frame["baseline"]) == {"embedded:weak"}
    assert frame.loc[frame.run == LIVE, "partial"].all() and not frame.loc[frame.run == DONE, "partial"].any()
    frame, problems = data.compare_frame(populated, [DONE, "nope"])
    assert len(frame) == 2 and len(problems) == 1 and "nope" in problems[0]


def test_selection_frequencies_put_the_new_plan_first(populated: Store) -> None:
    plan = syn.domain_doc("a brand new domain")
    plan["planner"]["frequencies"] = {"gaussian_noise": 0.2, "rotation": 0.9}
    f = data.selection_frequencies(populated, extra=DomainConfig.model_validate(plan))
    assert f.columns[0] == "a brand new domain"
    assert f.loc["rotation", "a brand new domain"] == pytest.approx(0.9)
    # the two stored domains (the live run repeats the night plan and is shown once)
    assert len(f.columns) == 3
    assert f.loc["motion_blur"].tolist()[1:] == [0.25, 0.25]


def test_gallery_uses_the_seeded_kernels(home: Path) -> None:
    img = data.preview_image(0)
    assert img.shape[:2] == (112, 112)
    out = data.gallery(img, "brightness")
    assert len(out) == 5
    for s, im in enumerate(out, start=1):
        assert np.array_equal(im, corruptions.corrupt(img, "brightness", severity=s, seed=0))
    assert out[4].mean() > out[0].mean() >= img.mean()
    with pytest.raises(UserInputError, match="out of range"):
        data.preview_image(10**6)

"""The UI's data layer against a temporary SQLite store holding synthetic runs."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import fe_synthetic as syn
from fe_synthetic import REAL_IMAGES
import numpy as np
import pytest
from sklearn.metrics import balanced_accuracy_score

from domainbench import corruptions
from domainbench.records.config import DomainConfig
from domainbench.engine.reports import build_report
from domainbench.errors import UserInputError
from domainbench.records.report import Versions
from domainbench.store import Store
from domainbench.frontend import data

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
    find = populated.find
    monkeypatch.setattr(populated, "find", lambda coll, **w: pytest.fail("the units were read") if coll == "units" else find(coll, **w))
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
    assert row["balanced_accuracy"] == pytest.approx(syn.correct("embedded:weak", 3) / syn.PER_CLASS)
    # the synthetic classes are balanced, so top-1 equals balanced accuracy here
    assert row["top1_accuracy"] == pytest.approx(row["balanced_accuracy"])
    assert row["label_flips"] == (syn.CLEAN_CORRECT["embedded:weak"] - syn.correct("embedded:weak", 3)) * 3 * 2
    assert row["mean_pd_threat"] == pytest.approx(1.5) and not row["pd_safe"]
    rows = list(csv.DictReader(io.StringIO(data.export_csv(s))))
    assert len(rows) == 12 and {r["run_id"] for r in rows} == {DONE}
    clean = next(r for r in rows if r["model"] == "embedded:good" and r["corruption"] == "clean")
    assert float(clean["balanced_accuracy"]) == pytest.approx(0.9) and clean["mean_pd_threat"] == ""
    assert list(rows[0]) == ["run_id", *data.cell_fields()]
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


# --------------------------------------------------------------------------- runs list, domains, plans


def test_runs_frame_progress_is_the_share_of_stored_cells(populated: Store) -> None:
    f = data.runs_frame(populated).set_index("run")
    assert f.loc[LIVE, "progress"] == pytest.approx(8 / 12)  # 2 models × 4 of 6 cells stored
    assert f.loc[DONE, "progress"] == 1.0
    assert f.loc[DONE, "dataset"] == "sample[:60]" and f.loc[DONE, "created"].startswith("2025-01-01")


def test_filter_runs_by_search_words_status_and_dataset(populated: Store) -> None:
    f = data.runs_frame(populated)
    assert data.filter_runs(f, "xray")["run"].tolist() == ["20250102-000000-xray-ef01"]
    assert data.filter_runs(f, "NIGHT dash-cam")["run"].tolist() == [LIVE, DONE]  # every word, any case
    assert data.filter_runs(f, "night xray").empty
    assert data.filter_runs(f, statuses=["running"])["run"].tolist() == [LIVE]
    assert data.filter_runs(f, datasets=["other"]).empty
    assert data.filter_runs(f, domain_id="d" + DONE[-4:])["run"].tolist() == [DONE]
    assert len(data.filter_runs(f)) == 3


def test_domains_frame_and_plan_frame(populated: Store) -> None:
    runs = populated.list_runs()
    d = data.domains_frame(runs)
    assert len(d) == 3 and d["runs"].tolist() == [1, 1, 1]
    assert d.loc[0, "latest"] == "2025-01-03T00:00:00+00:00"  # newest first
    assert d.loc[0, "corruptions"] == "gaussian_noise (1,2,3), brightness (1,2)"
    plan = data.plan_frame(runs[0].domain)
    assert plan["corruption"].tolist() == ["gaussian_noise", "brightness"]
    assert plan["severities"].tolist() == ["1, 2, 3", "1, 2"]
    assert plan["selected in %"].tolist() == [100.0, 75.0]
    assert plan.loc[1, "reason"] == "brightness happens in this domain"


# --------------------------------------------------------------------------- report frames


def test_per_corruption_frame_holds_the_reports_values(populated: Store) -> None:
    report = data.load_run_view(populated, DONE).report
    f = data.per_corruption_frame(report).set_index(["model", "corruption"])
    for m in report.models:
        for name in ("gaussian_noise", "brightness"):
            row = f.loc[(m.model, name)]
            assert row["ce"] == pytest.approx(m.ce_per_corruption[name])
            assert row["fr"] == pytest.approx(m.fr_per_corruption[name])
    # by hand: errors of weak at s = 1..3 sum to 1.8, of good (the baseline) to 0.9
    assert f.loc[("embedded:weak", "gaussian_noise"), "ce"] == pytest.approx(2.0)
    assert f.loc[("embedded:weak", "gaussian_noise"), "accuracy"] == pytest.approx((0.6 + 0.4 + 0.2) / 3)
    assert f.loc[("embedded:good", "brightness"), "accuracy"] == pytest.approx((0.8 + 0.7) / 2)


def test_link_frames_follow_the_reports_stability_link(real_store: Store, real_run: tuple[Path, str]) -> None:
    report = real_store.get_report(real_run[1])
    assert report.stability_link, "the real run measures stability on labelled images"
    bins, summary = data.link_bins_frame(report), data.link_summary_frame(report)
    for link in report.stability_link:
        for corr, entry in link.per_corruption.items():
            row = summary[(summary.model == link.model) & (summary.corruption == corr)].iloc[0]
            assert row["mean_radius"] == pytest.approx(entry.mean_radius)
            assert row["accuracy_perturbed"] == pytest.approx(entry.accuracy_perturbed)
            part = bins[(bins.model == link.model) & (bins.corruption == corr)]
            assert part["accuracy"].tolist() == pytest.approx([b.accuracy for b in entry.bins or []])
            assert part["count"].sum() == sum(b.count for b in entry.bins or [])


# --------------------------------------------------------------------------- per-image drill-down (real run)


def test_cell_predictions_join_the_cell_and_clean_units(real_store: Store, real_run: tuple[Path, str]) -> None:
    run = real_store.get_run(real_run[1])
    preds = data.cell_predictions(real_store, run, "gaussian_noise", 5)
    classes = run.dataset.classes
    assert len(preds) == REAL_IMAGES * 2 and sorted(set(preds["index"])) == list(range(REAL_IMAGES))
    labels = {i: y for u in real_store.units(run.run_id, corruption="clean") for i, y in zip(u.indices, u.labels)}
    for m in run.config.models:
        clean = {i: p for u in real_store.units(run.run_id, model=m, corruption="clean") for i, p in zip(u.indices, u.preds)}
        noisy = {i: p for u in real_store.units(run.run_id, model=m, corruption="gaussian_noise", severity=5)
                 for i, p in zip(u.indices, u.preds)}
        part = preds[preds.model == m].set_index("index")
        assert part["pred"].tolist() == [classes[noisy[i]] for i in range(REAL_IMAGES)]
        assert part["flipped"].tolist() == [noisy[i] != clean[i] for i in range(REAL_IMAGES)]
        assert part["correct"].tolist() == [noisy[i] == labels[i] for i in range(REAL_IMAGES)]
        assert part["label"].tolist() == [classes[labels[i]] for i in range(REAL_IMAGES)]
    # the report's flip count of this cell is the number of flipped images
    report = real_store.get_report(run.run_id)
    for m in run.config.models:
        assert int(preds[preds.model == m]["flipped"].sum()) == report.cell(m, "gaussian_noise", 5).flips
    with pytest.raises(UserInputError, match="no stored units"):
        data.cell_predictions(real_store, run, "gaussian_noise", 2)


def test_flip_differences_and_matrix_agree(real_store: Store, real_run: tuple[Path, str]) -> None:
    run = real_store.get_run(real_run[1])
    preds = data.cell_predictions(real_store, run, "brightness", 5)
    wide = preds.pivot(index="index", columns="model", values="flipped")
    a, b = run.config.models
    matrix = data.flip_matrix(preds)
    assert matrix.loc[a, b] == int((wide[a] & ~wide[b]).sum()) and matrix.loc[a, a] == 0
    diffs = data.flip_differences(preds)
    assert diffs["index"].tolist() == [i for i in wide.index if wide.loc[i].any() and not wide.loc[i].all()]
    assert len(diffs) == matrix.loc[a, b] + matrix.loc[b, a]
    assert data.gallery_indices(preds, "differ", 100) == diffs["index"].tolist()
    assert data.gallery_indices(preds, "flipped", 3) == [i for i in wide.index if wide.loc[i].any()][:3]
    assert data.gallery_indices(preds, "all", 5) == [0, 1, 2, 3, 4]


def test_recreated_images_are_the_pixels_the_models_saw(real_store: Store, real_run: tuple[Path, str]) -> None:
    """Scoring the re-created images again gives exactly the stored predictions."""
    from domainbench.data import load_sample
    from domainbench.engine.scoring import encode, load_models, predict

    run = real_store.get_run(real_run[1])
    indices = [0, 3, 7, 8, 15]  # both shards
    images, kept = data.recreate_images(run, "gaussian_noise", 5, indices)
    assert kept.tolist() == indices and images.shape[0] == 5
    clean, _ = data.recreate_images(run, "clean", 0, indices)
    assert np.array_equal(clean, load_sample().subset(REAL_IMAGES).arrays[indices])
    assert not np.array_equal(images, clean)
    again, _ = data.recreate_images(run, "gaussian_noise", 5, indices)
    assert np.array_equal(images, again)  # deterministic
    cfg = run.config
    models = load_models(cfg.models, run.dataset.classes, "cpu", cfg.batch_size, cfg.templates)
    for ms in models:
        stored = {i: p for u in real_store.units(run.run_id, model=ms.name, corruption="gaussian_noise", severity=5)
                  for i, p in zip(u.indices, u.preds)}
        assert predict(ms, encode(ms, images)).tolist() == [stored[i] for i in indices]


# --------------------------------------------------------------------------- comparison


def test_compare_runs_groups_one_domain_and_flags_another_setup(populated: Store) -> None:
    same = syn.populate(populated, run_id="20250104-000000-night-abcd", created_at="2025-01-04T00:00:00+00:00")
    smaller = syn.populate(populated, run_id="20250105-000000-night-abcd", shards=1, created_at="2025-01-05T00:00:00+00:00")
    xray = "20250102-000000-xray-ef01"
    c = data.compare_runs(populated, [DONE, same.run_id, smaller.run_id, xray])
    groups = dict(zip(c.frame["run"], c.frame["group"], strict=False))
    assert groups[DONE] == groups[same.run_id] != groups[smaller.run_id]
    assert "30 img" in groups[smaller.run_id] and "60 img" in groups[DONE]
    assert list(c.flagged) == [smaller.run_id] and "30 images (most runs: 60)" in c.flagged[smaller.run_id]
    assert data.group_runs(c.frame)[groups[DONE]] == [DONE, same.run_id]
    matrix = data.metric_matrix(c.frame, "mce")
    assert matrix.shape == (2, 3) and matrix.loc["embedded:weak", groups[DONE]] == pytest.approx(2.0)
    # per corruption, with families from the registry
    per = c.per_corruption
    assert set(per["family"]) == {"noise", "photometric"} and len(per) == 4 * 2 * 2
    fam = data.family_matrix(per, "accuracy")
    assert fam.loc["embedded:weak", "noise"] == pytest.approx(0.4)
    assert fam.loc["embedded:good", "photometric"] == pytest.approx(0.75)


def test_comparability_flags_other_models_and_datasets(populated: Store) -> None:
    other = syn.populate(populated, run_id="r-models", models=["embedded:good"], created_at="2025-01-06T00:00:00+00:00")
    runs = [populated.get_run(r) for r in (DONE, "20250102-000000-xray-ef01", other.run_id)]
    flags = data.comparability(runs)
    assert list(flags) == ["r-models"] and "models embedded:good" in flags["r-models"]
    assert data.comparability(runs[:1]) == {}


def test_ranking_frame_rank_change_from_clean_to_corrupted() -> None:
    import pandas as pd

    frame = pd.DataFrame([
        {"group": g, "domain_id": g, "baseline": "A", "run": g, "model": m, "acc": acc, "mean_corrupted_acc": cor,
         "mce": mce}
        for g in ("night", "xray")
        for m, acc, cor, mce in (("A", 0.9, 0.5, 1.0), ("B", 0.8, 0.6, 0.8), ("C", 0.7, 0.2, 1.3))
    ] + [{"group": "xray", "domain_id": "xray", "baseline": "A", "run": "xray", "model": "D", "acc": 0.95,
          "mean_corrupted_acc": 0.1, "mce": 2.0}])
    r = data.ranking_frame(frame).set_index("model")
    assert r.loc["A", "clean rank"] == 2 and r.loc["A", "corrupted rank"] == 2
    assert r.loc["B", "clean rank"] == 3 and r.loc["B", "corrupted rank"] == 1 and r.loc["B", "rank change"] == 2
    assert r.loc["D", "clean rank"] == 1 and r.loc["D", "rank change"] == -3 and r.loc["D", "domains"] == 1
    assert r.loc["A", "clean acc %"] == pytest.approx(90.0) and r.loc["B", "mean mCE"] == pytest.approx(0.8)
    assert data.ranking_frame(frame).loc[0, "model"] == "B"  # sorted by corrupted rank


def test_comparability_flags_runs_on_another_severity_ladder(populated: Store) -> None:
    runs = [r for r in populated.list_runs() if r.config.models == populated.list_runs()[0].config.models][:2]
    assert len(runs) == 2 and data.comparability(runs) == {}
    # the same setup, but gaussian_noise's severities were defined by ladder v2 in the first run
    newer = runs[0].model_copy(update={"ladder_versions": {"gaussian_noise": 2}})
    flags = data.comparability([newer, runs[1]])  # a tie: the first run seen is the reference
    assert flags == {runs[1].run_id: f"gaussian_noise severities of ladder v1 (v2 in {newer.run_id})"}

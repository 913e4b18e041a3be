"""Intervals, paired comparison and verdicts through the command line (show, export, compare)."""

from __future__ import annotations

import csv
import io
import json
import sys
from pathlib import Path

import pytest
from scipy.stats import binomtest

from domainbench.records.config import CorruptionChoice, DomainConfig, save
from tests.cli_runner import run_cli as cli
from tests.oracles.score_interval import wilson_cc_by_root

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "engine"))
import fake_models  # noqa: E402,F401  (registers the fake: backend used below)

DOMAIN = DomainConfig(domain="stats test", corruptions=[
    CorruptionChoice(name="gaussian_noise", severities=[1, 4], reason="r"),
    CorruptionChoice(name="contrast", severities=[3], reason="r")])


def _run(tmp_path: Path, capsys, monkeypatch, models: str, run_id: str, *extra: str) -> None:
    cfg = save(DOMAIN, tmp_path / "domain.toml")
    code, _, err = cli(["run", str(cfg), "--models", models, "--limit", "40", "--no-stability", "--no-threat",
                        "--workers", "0", "--run-id", run_id, *extra], capsys, monkeypatch)
    assert code == 0, err


def test_show_export_and_compare_carry_intervals_and_verdicts(home: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    _run(tmp_path, capsys, monkeypatch, "fake:a,fake:b", "two")
    code, out, err = cli(["show", "two", "--confidence", "0.9"], capsys, monkeypatch)
    assert code == 0, err
    assert "90 % intervals" in out and "(" in out.split("fake:a", 1)[1]
    text = " ".join(out.split())  # rich wraps the sentence at the terminal's width
    assert ("beats" in text or " tie on this domain by balanced accuracy: " in text) and "fake:a" in out
    assert "by the same measure better in" in text

    code, out, err = cli(["export", "two", "--confidence", "0.9"], capsys, monkeypatch)
    rows = list(csv.DictReader(io.StringIO(out)))
    for col in ("top1_accuracy", "balanced_accuracy", "label_flip_probability"):
        assert f"{col}_ci_low" in rows[0] and f"{col}_ci_high" in rows[0]
    noisy = next(r for r in rows if r["corruption"] == "gaussian_noise" and r["severity"] == "4")
    k = round(float(noisy["top1_accuracy"]) * 40)
    assert float(noisy["top1_accuracy_ci_low"]) == pytest.approx(wilson_cc_by_root(k, 40, 0.9)[0], abs=1e-9)
    assert float(noisy["label_flip_probability_ci_high"]) == pytest.approx(
        wilson_cc_by_root(int(noisy["label_flips"]), 40, 0.9)[1], abs=1e-9)
    assert float(noisy["balanced_accuracy_ci_low"]) <= float(noisy["balanced_accuracy"]) <= float(noisy["balanced_accuracy_ci_high"])

    # the UI's download buttons give the same files
    from domainbench.engine.reports import load_report
    from domainbench.frontend import data
    from domainbench.store import open_store

    store = open_store()
    report = load_report(store, "two")
    assert data.export_csv(report, store, 0.9) == out
    code, out, err = cli(["export", "two", "--format", "json"], capsys, monkeypatch)
    assert data.export_json(store.get_run("two"), report, store) == out.rstrip("\n")
    doc = json.loads(out)
    assert data.verdicts_of(store, ["two"]).verdicts[0].sentence == doc["verdicts"][0]["sentence"]
    assert doc["intervals"]["confidence"] == 0.95 and len(doc["intervals"]["models"]) == 2
    pairs = doc["pairs"]
    assert len(pairs) == 4  # clean + 3 corrupted cells, one pair
    assert set(pairs[0]) == {"model_a", "model_b", "corruption", "severity", "n", "a_only", "b_only", "p_value", "p_holm",
                             "difference", "ci_low", "ci_high", "p_balanced", "p_balanced_holm"}
    for p in pairs:
        expected = binomtest(p["a_only"], p["a_only"] + p["b_only"]).pvalue if p["a_only"] + p["b_only"] else 1.0
        assert p["p_value"] == pytest.approx(expected, abs=1e-9) and p["p_holm"] >= p["p_value"]
    assert doc["verdicts"][0]["sentence"]

    code, out, err = cli(["compare", "two", "--models", "fake:b,fake:a"], capsys, monkeypatch)
    assert code == 0, err
    assert out.splitlines()[0].startswith("fake:") and "McNemar" in out


def test_compare_across_runs_on_the_same_images(home: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    _run(tmp_path, capsys, monkeypatch, "fake:a,fake:b", "both")
    _run(tmp_path, capsys, monkeypatch, "fake:a", "a")
    _run(tmp_path, capsys, monkeypatch, "fake:b", "b")
    code, joint, err = cli(["compare", "both", "--format", "json"], capsys, monkeypatch)
    assert code == 0, err
    code, split, err = cli(["compare", "a", "b", "--format", "json"], capsys, monkeypatch)
    assert code == 0, err
    # the same images and seed: the cross-run comparison is the single run's, number for number
    assert json.loads(split)["pairs"] == json.loads(joint)["pairs"]


@pytest.mark.parametrize("case", ["confidence_0", "confidence_1", "one_model", "other_images", "other_seed", "unknown_model",
                                  "export_confidence", "show_confidence"])
def test_bad_input_is_one_line_exit_2(case: str, home: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    _run(tmp_path, capsys, monkeypatch, "fake:a", "a")
    args, expect = {
        "confidence_0": (["compare", "a", "--confidence", "0"], "--confidence must lie strictly between 0 and 1"),
        "confidence_1": (["compare", "a", "--confidence", "1.5"], "--confidence must lie strictly between 0 and 1"),
        "export_confidence": (["export", "a", "--confidence", "1", "-o", str(tmp_path / "x.csv")], "--confidence"),
        "show_confidence": (["show", "a", "--confidence", "-0.1"], "--confidence"),
        "one_model": (["compare", "a"], "a comparison needs two models"),
        "unknown_model": (["compare", "a", "--models", "fake:a,fake:z"], "--models: fake:z not evaluated"),
        "other_images": (["compare", "a", "b"], "different images"),
        "other_seed": (["compare", "a", "b"], "different seeds"),
    }[case]
    if case == "other_images":
        cfg = save(DOMAIN, tmp_path / "domain.toml")
        code, _, err = cli(["run", str(cfg), "--models", "fake:b", "--limit", "30", "--no-stability", "--no-threat",
                            "--workers", "0", "--run-id", "b"], capsys, monkeypatch)
        assert code == 0, err
    if case == "other_seed":
        _run(tmp_path, capsys, monkeypatch, "fake:b", "b", "--seed", "7")
    code, out, err = cli(args, capsys, monkeypatch)
    assert code == 2, err
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and expect in lines[0], err
    assert out == "" and not (tmp_path / "x.csv").exists()


def test_verdict_on_the_bundled_sample_with_both_embedded_models(home: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    domain = DomainConfig(domain="low contrast", corruptions=[CorruptionChoice(name="contrast", severities=[3, 5], reason="r")])
    cfg = save(domain, tmp_path / "contrast.toml")
    code, _, err = cli(["run", str(cfg), "--models", "embedded:fmnist-plain,embedded:fmnist-augmented", "--limit", "60",
                        "--no-stability", "--no-threat", "--workers", "0", "--run-id", "sample"], capsys, monkeypatch)
    assert code == 0, err
    code, out, err = cli(["compare", "sample", "--format", "json"], capsys, monkeypatch)
    assert code == 0, err
    v = json.loads(out)["verdicts"][0]
    # the augmented model was trained for low contrast: it wins both cells, decisively
    assert v["sentence"].startswith("embedded:fmnist-augmented beats embedded:fmnist-plain on this domain by balanced "
                                    "accuracy: ")
    assert "by the same measure better in 2 of 2 cells, worse in none (Holm-adjusted over cells and pairs, p < 0.05)" \
        in v["sentence"]
    assert v["n_images"] == 60 and v["ci_high"] < 0  # the pair is (plain, augmented): A - B is negative


def test_breaking_point_is_measured_shown_and_exported(home: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    domain = DomainConfig(domain="low contrast", corruptions=[CorruptionChoice(name="contrast", severities=[3], reason="r")])
    cfg = save(domain, tmp_path / "contrast.toml")
    code, _, err = cli(["run", str(cfg), "--models", "embedded:fmnist-plain,embedded:fmnist-augmented", "--limit", "80",
                        "--no-stability", "--no-threat", "--workers", "0", "--run-id", "bp", "--breaking-point"], capsys, monkeypatch)
    assert code == 0, err
    code, out, _ = cli(["show", "bp"], capsys, monkeypatch)
    assert "breaks at" in out
    code, out, _ = cli(["export", "bp", "--format", "json"], capsys, monkeypatch)
    points = {b["model"]: b for b in json.loads(out)["breaking_points"]}
    plain, augmented = points["embedded:fmnist-plain"], points["embedded:fmnist-augmented"]
    # the model trained on low contrast holds out further along the contrast scale
    assert plain["breaking_point"] is not None
    assert augmented["breaking_point"] is None or augmented["breaking_point"] > plain["breaking_point"]
    assert plain["breaking_point_ci_low"] <= plain["breaking_point"] <= plain["breaking_point_ci_high"]
    rows = list(csv.DictReader(io.StringIO(cli(["export", "bp"], capsys, monkeypatch)[1])))
    row = next(r for r in rows if r["model"] == "embedded:fmnist-plain" and r["corruption"] == "contrast")
    assert float(row["breaking_point"]) == pytest.approx(plain["breaking_point"])
    assert {"breaking_point_ci_low", "breaking_point_ci_high"} <= set(row)


@pytest.mark.parametrize(("value", "expect"), [("1.5", "--breaking-point: "), ("0", "--breaking-point: "),
                                               ("abc", "--breaking-point: THRESHOLD must be")])
def test_bad_breaking_point_is_one_line_exit_2(value: str, expect: str, home: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    cfg = save(DOMAIN, tmp_path / "domain.toml")
    code, out, err = cli(["run", str(cfg), "--models", "fake:a", "--limit", "20", "--breaking-point", value], capsys, monkeypatch)
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: " + expect), err
    from domainbench.store import open_store

    assert open_store().list_runs() == []


def test_show_in_a_narrow_terminal_folds_instead_of_cutting(home: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    _run(tmp_path, capsys, monkeypatch, "fake:a,fake:b", "narrow")
    monkeypatch.setenv("COLUMNS", "60")  # read on every print; setting the width would pin it for later tests
    code, out, err = cli(["show", "narrow"], capsys, monkeypatch)
    assert code == 0, err
    table = out.split("(low–high)")[0].split(" model ", 1)[1]  # the verdict sentence is above the table
    # nothing is cut to "…": every interval keeps its two ends
    assert "…" not in table
    # two models × the five metrics with an interval (clean, corr, mCE, rCE, mFR), each "value (low–high)" (" to "
    # between the ends where one is negative, as an rCE can be)
    assert table.count("(") == table.count(")") == 2 * 5


def test_show_prints_the_safe_cell_accuracy_with_its_interval(capsys, monkeypatch) -> None:
    """``show``'s safe% column carries its bootstrap interval, as clean% and corr% do."""
    from domainbench.app.cli import print_report
    from domainbench.metrics.confidence import run_intervals
    from domainbench.metrics.outcomes import image_outcomes
    from tests.metrics.confidence_fixtures import synthetic_report, synthetic_units

    monkeypatch.setenv("COLUMNS", "250")
    units = synthetic_units()
    report = synthetic_report(units)
    iv = run_intervals(report, image_outcomes(units), resamples=1000)
    print_report(report, iv)
    out = capsys.readouterr().out
    for model in ("m1", "m2"):
        lo, hi = iv.model(model).safe_accuracy
        assert f"{100 * report.safe_accuracy[model]:.1f} ({100 * lo:.1f}–{100 * hi:.1f})" in out


def test_show_names_every_unsafe_and_borderline_cell_by_the_report_s_verdict(capsys, monkeypatch) -> None:
    """The issue's defect: "37 of 51 safe" beside a list cut at 12 unsafe cells, borderline cells counted as safe."""
    from domainbench.app.cli import print_report
    from domainbench.metrics.run_report import threat_cells
    from domainbench.store.records import ThreatRecord
    from tests.metrics.confidence_fixtures import synthetic_report, synthetic_units

    monkeypatch.setenv("COLUMNS", "250")
    # 20 cells of 100 images: 14 unsafe (40 above 1), 3 borderline (10 above), 3 safe (none above)
    above = [40] * 14 + [10] * 3 + [0] * 3
    records = [ThreatRecord(run_id="r", corruption=f"c{i:02d}", severity=5, shard=0, n=100, sum=50.0, sum_sq=30.0,
                            n_above_1=k, max=2.0) for i, k in enumerate(above)]
    report = synthetic_report(synthetic_units()).model_copy(update={"threat": threat_cells(records)})
    print_report(report)
    out = capsys.readouterr().out
    assert "PD threat: 3 of 20 corruption cells safe, 3 borderline, 14 unsafe" in out
    unsafe = next(line for line in out.splitlines() if line.strip().startswith("unsafe:"))
    borderline = next(line for line in out.splitlines() if line.strip().startswith("borderline:"))
    assert unsafe.split(":", 1)[1].strip().split(", ") == [f"c{i:02d}@5" for i in range(14)]
    assert borderline.split(":", 1)[1].strip().split(", ") == [f"c{i:02d}@5" for i in range(14, 17)]
    assert "Clopper–Pearson" in out and "below 10 %" in out


def test_show_marks_intervals_resting_on_few_images_per_class(capsys, monkeypatch) -> None:
    """Three images per class: every balanced-accuracy interval is approximate, ``show`` puts ``*`` beside the
    model-level ones built on it (not beside a Wilson one) and says why under the table; the CSV flags each cell."""
    import numpy as np

    from domainbench.app.cli import print_report
    from domainbench.query.export import to_csv
    from domainbench.metrics.confidence import run_intervals
    from domainbench.metrics.outcomes import image_outcomes
    from tests.metrics.confidence_fixtures import synthetic_report, synthetic_units

    monkeypatch.setenv("COLUMNS", "250")
    units = synthetic_units(n=9, seed=3)
    report = synthetic_report(units)
    out_ = image_outcomes(units)
    iv = run_intervals(report, out_, resamples=500)
    median = float(np.median(np.bincount(out_.labels)))
    assert median < 5 and iv.median_images_per_class == median
    assert all(c.approximate for c in iv.cells) and all(m.approximate for m in iv.models)
    assert iv.notes[0].startswith(f"few images per class: interval approximate (median {median:g} images per class")
    print_report(report, iv)
    out = capsys.readouterr().out
    lo, hi = iv.model("m1").clean_accuracy
    assert f"{100 * report.model('m1').clean_accuracy:.1f} ({100 * lo:.1f}–{100 * hi:.1f})*" in out
    assert "* few images per class: interval approximate" in out
    rows = list(csv.DictReader(io.StringIO(to_csv(report, iv))))
    assert {r["balanced_accuracy_ci_approximate"] for r in rows} == {"True"}
    # thirty images per class: nothing is marked
    many = synthetic_units()
    plenty = run_intervals(synthetic_report(many), image_outcomes(many), resamples=500)
    assert not any(c.approximate for c in plenty.cells) and not any(n.startswith("few images") for n in plenty.notes)
    rows = list(csv.DictReader(io.StringIO(to_csv(synthetic_report(many), plenty))))
    assert {r["balanced_accuracy_ci_approximate"] for r in rows} == {"False"}

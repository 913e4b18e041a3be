"""`domainbench check`: requirements on a run's numbers and a regression against a baseline run; exit 0 / 1 / 2."""

from __future__ import annotations

import csv
import io
import json
import math
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import norm

from domainbench.records.config import CorruptionChoice, DomainConfig, save
from tests.cli_runner import run_cli as cli
from tests.oracles.score_interval import wilson_cc_by_root

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "engine"))
import fake_models  # noqa: E402,F401  (registers the fake: backend used below)

PLAIN, AUG = "embedded:fmnist-plain", "embedded:fmnist-augmented"
DOMAIN = DomainConfig(domain="low contrast", corruptions=[CorruptionChoice(name="contrast", severities=[3, 5], reason="r")])
RUN = ["--limit", "60", "--no-stability", "--no-threat", "--workers", "0"]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One store with a two-model run and each model alone on the same images and plan (made once: ~20 s)."""
    import domainbench

    home = tmp_path_factory.mktemp("check") / "home"
    plan = save(DOMAIN, home.parent / "contrast.toml")
    for run_id, models in (("both", [PLAIN, AUG]), ("plain", [PLAIN]), ("aug", [AUG])):
        domainbench.run(plan, models, limit=60, stability=False, threat=False, workers=0, run_id=run_id, store=home)
    yield home


@pytest.fixture
def at(store: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DOMAINBENCH_HOME", str(store))
    monkeypatch.delenv("DOMAINBENCH_MONGO_URI", raising=False)
    monkeypatch.setenv("COLUMNS", "200")  # one table row per line
    return store


def _row(out: str, *words: str) -> str:
    return next(line for line in out.splitlines() if all(w in line for w in words))


def test_requirements_hold_or_fail_by_the_run_s_numbers(at: Path, capsys, monkeypatch) -> None:
    import domainbench

    summary = domainbench.load_run("both", store=at).summary().set_index("model")
    acc = summary.loc[AUG, "mean_corrupted_accuracy"]
    low = summary.loc[AUG, "mean_corrupted_accuracy_ci_low"]
    scoped = f"model={AUG} corrupted_accuracy"  # the unique registry name ending so: mean_corrupted_accuracy
    code, out, err = cli(["check", "both", "-r", f"{scoped} >= {acc - 0.01:.4f}"], capsys, monkeypatch)
    assert code == 0, err
    assert out.strip().splitlines()[-1] == "PASS: all 1 checks hold"
    code, out, err = cli(["check", "both", "-r", f"{scoped} >= {acc + 0.01:.4f}"], capsys, monkeypatch)
    assert code == 1 and err == ""
    line = _row(out, "FAIL", "mean_corrupted_accuracy >=", AUG)
    assert f"{acc:.3f}" in line and line.split()[-2:] == [f"{100 * (acc - (round(acc + 0.01, 4))):+.1f}", "pts"]
    assert out.strip().splitlines()[-1] == "FAIL: 1 of 1 checks failed"

    # between the interval's lower end and the point: holds on the point, not with --confident
    between = f"{scoped} >= {(low + acc) / 2:.4f}"
    assert low < (low + acc) / 2 < acc
    assert cli(["check", "both", "-r", between], capsys, monkeypatch)[0] == 0
    code, out, err = cli(["check", "both", "-r", between, "--confident"], capsys, monkeypatch)
    assert code == 1, err
    assert f"{low:.3f}" in _row(out, "FAIL", AUG)

    # without model=, every model must hold; --model narrows the check to some
    worst = summary["mce"].max()
    assert cli(["check", "both", "-r", f"mce <= {worst - 0.001}"], capsys, monkeypatch)[0] == 1
    assert cli(["check", "both", "-r", f"mce <= {worst}"], capsys, monkeypatch)[0] == 0
    best = summary["mce"].idxmin()
    assert cli(["check", "both", "-r", f"mce <= {worst - 0.001}", "--model", best], capsys, monkeypatch)[0] == 0


def test_a_cell_requirement_reads_the_cell_and_its_proportion_interval(at: Path, capsys, monkeypatch) -> None:
    code, out, err = cli(["export", "both"], capsys, monkeypatch)
    row = next(r for r in csv.DictReader(io.StringIO(out)) if r["model"] == PLAIN and r["corruption"] == "contrast"
               and r["severity"] == "5")
    lfp, flips = float(row["label_flip_probability"]), int(row["label_flips"])
    high = wilson_cc_by_root(flips, 60, 0.9)[1]  # the registry's "wilson": continuity-corrected, by root-finding
    req = f"model={PLAIN} label_flip_probability@contrast:5 <= {lfp:.6f}"
    assert cli(["check", "both", "-r", req], capsys, monkeypatch)[0] == 0
    code, out, err = cli(["check", "both", "-r", req, "--confident", "--confidence", "0.9"], capsys, monkeypatch)
    assert code == 1, err
    line = _row(out, "FAIL", "label_flip_probability@contrast:5", PLAIN)
    assert f"{high:.3f}" in line and f"{100 * (lfp - high):+.1f}" in line
    assert cli(["check", "both", "-r", f"model={PLAIN} label_flip_probability@contrast:5 <= {high + 1e-6}",
                "--confident", "--confidence", "0.9"], capsys, monkeypatch)[0] == 0


def _sign_flip_p(predictions: str, new: str, old: str, new_run: str, old_run: str) -> tuple[float, float]:
    """The difference of balanced accuracy over the corrupted cells (new - old) and its sign-flip p-value,
    computed from the per-image predictions export alone."""
    rows = {}
    for text, model, run in ((predictions[new_run], new, "new"), (predictions[old_run], old, "old")):
        for r in csv.DictReader(io.StringIO(text)):
            if r["model"] == model and r["corruption"] != "clean":
                rows[(run, r["corruption"], r["severity"], int(r["image"]))] = (r["label"], r["correct"] == "True")
    cells = sorted({(c, s) for (_, c, s, _) in rows})
    images = sorted({i for (*_, i) in rows})
    labels = [rows[("new", *cells[0], i)][0] for i in images]
    classes = sorted(set(labels))
    size = {c: labels.count(c) for c in classes}
    share = np.zeros(len(images))
    for c, s in cells:
        for k, i in enumerate(images):
            d = rows[("new", c, s, i)][1] - rows[("old", c, s, i)][1]
            share[k] += d / (len(classes) * size[labels[k]]) / len(cells)
    d = share[share != 0]
    z = max(0.0, abs(d.sum()) - np.abs(d).max()) / math.sqrt(float(np.sum(d * d)))
    return float(share.sum()), float(2 * norm.sf(z))


def test_a_significant_regression_against_a_baseline_run_fails(at: Path, capsys, monkeypatch) -> None:
    predictions = {rid: cli(["export", rid, "--predictions"], capsys, monkeypatch)[1] for rid in ("plain", "aug")}
    # switching from the augmented model to the plain one loses robustness to contrast: exit 1, the model named
    code, out, err = cli(["check", "plain", "--against", "aug"], capsys, monkeypatch)
    assert code == 1, err
    line = _row(out, "REGRESSED", PLAIN)
    diff, p = _sign_flip_p(predictions, PLAIN, AUG, "plain", "aug")
    assert diff < -0.2 and p < 1e-4
    assert f"{100 * diff:+.1f}" in line and f"{p:.3g}" in line
    # the other way round it improved: exit 0; with the same model in both runs the difference is exactly 0
    assert cli(["check", "aug", "--against", "plain"], capsys, monkeypatch)[0] == 0
    code, out, err = cli(["check", "plain", "--against", "both"], capsys, monkeypatch)
    assert code == 0, err
    assert "+0.0" in _row(out, "OK", PLAIN)
    # requirements and the regression in one gate: one failure fails it
    assert cli(["check", "both", "--against", "plain", "-r", "mce <= 100"], capsys, monkeypatch)[0] == 0
    assert cli(["check", "plain", "--against", "aug", "-r", "mce <= 100"], capsys, monkeypatch)[0] == 1

    import domainbench

    result = domainbench.check("plain", against="aug", store=at)
    assert not result.passed and result.regression is not None
    m = result.regression.models[0]
    assert (m.model, m.baseline_model, m.regressed) == (PLAIN, AUG, True)
    assert m.difference == pytest.approx(diff, abs=1e-12) and m.p_holm == pytest.approx(p, rel=1e-9)
    # the same test as `compare` across the two runs
    verdict = json.loads(cli(["compare", "plain", "aug", "--format", "json"], capsys, monkeypatch)[1])["verdicts"][0]
    assert verdict["p_value"] == pytest.approx(m.p_value, rel=1e-12)


@pytest.mark.parametrize("case", ["unknown_metric", "bad_expression", "not_a_number", "percent_for_fraction",
                                  "unknown_cell", "severity_needed", "cell_on_model_metric", "unknown_model",
                                  "unknown_run", "nothing", "same_run", "no_interval", "other_images", "other_seed",
                                  "other_plan"])
def test_bad_input_is_one_line_exit_2(case: str, at: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    args, expect = {
        "unknown_metric": (["-r", "acuracy >= 0.5"], "no metric 'acuracy'; did you mean"),
        "bad_expression": (["-r", "mce"], "is not a requirement; write [model=MODEL] METRIC"),
        "not_a_number": (["-r", "mce <= one"], "'one' is not a number"),
        "percent_for_fraction": (["-r", "clean_accuracy >= 70"], "a fraction from 0 to 1; write 0.7, not 70"),
        "unknown_cell": (["-r", "label_flip_probability@motion_blur:3 <= 0.1"],
                         "run both has no cell motion_blur:3; its cells are clean, contrast:3, contrast:5"),
        "severity_needed": (["-r", "balanced_accuracy@contrast >= 0.1"], "contrast has severities 3, 5; name one"),
        "cell_on_model_metric": (["-r", "mce@contrast:3 <= 1"], "one number per model; leave out @contrast:3"),
        "unknown_model": (["-r", "model=open_clip:ViT-B-32 mce <= 1"], "model 'open_clip:ViT-B-32' is not in run both"),
        "unknown_run": (["-r", "mce <= 1", "--against", "nope"], "no run 'nope'"),
        "nothing": ([], "check needs something to check"),
        "same_run": (["--against", "both"], "that is the run being checked"),
        "no_interval": (["-r", "corr_accuracy_lfp <= 0", "--confident"], "has no interval, so --confident cannot"),
        "other_images": (["--against", "other"], "different images"),
        "other_seed": (["--against", "other"], "different seeds"),
        "other_plan": (["--against", "other"], "not of the same plan (cells made differently or in one run only: "
                                               "gaussian_noise)"),
    }[case]
    if case.startswith("other_"):
        domain = DOMAIN
        extra = {"other_images": ["--limit", "30"], "other_seed": ["--seed", "7"], "other_plan": []}[case]
        if case == "other_plan":
            domain = DomainConfig(domain="low contrast", corruptions=[
                *DOMAIN.corruptions, CorruptionChoice(name="gaussian_noise", severities=[1], reason="r")])
        plan = save(domain, tmp_path / "plan.toml")
        code, _, err = cli(["run", str(plan), "--models", "fake:a", *RUN, *extra, "--run-id", "other"], capsys, monkeypatch)
        assert code == 0, err
    run = ["check", "both", *args]
    try:
        code, out, err = cli(run, capsys, monkeypatch)
    finally:
        if case.startswith("other_"):
            cli(["rm", "other"], capsys, monkeypatch)
    assert code == 2, (out, err)
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and expect in lines[0], err
    assert out == ""


def test_show_sets_throughput_beside_robustness(at: Path, capsys, monkeypatch) -> None:
    import domainbench

    code, out, err = cli(["show", "both"], capsys, monkeypatch)
    assert code == 0, err
    timings = domainbench.load_run("both", store=at).record.timings
    rates = {m: timings[m]["images"] / (timings[m]["preprocess"] + timings[m]["forward"]) for m in (PLAIN, AUG)}
    line = _row(out, "images/s (preprocess + forward, this machine):")
    for m, r in rates.items():
        assert f"{m} {r:,.0f}" in line
    # the augmented model is significantly more accurate, so it is Pareto-efficient whatever the speeds
    assert f"{AUG} {rates[AUG]:,.0f} (Pareto)" in line
    sentence = _row(out, "the fastest model not significantly worse than the best on this domain is")
    assert AUG in sentence and PLAIN not in sentence  # the plain model is significantly worse: never the answer


def test_export_hard_writes_the_images_most_models_get_wrong(at: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    # independently: from the per-image predictions export, the share of (model, corrupted cell) rows that are wrong
    preds = cli(["export", "both", "--predictions"], capsys, monkeypatch)[1]
    wrong: dict[int, list[bool]] = {}
    label: dict[int, str] = {}
    for r in csv.DictReader(io.StringIO(preds)):
        if r["corruption"] != "clean":
            wrong.setdefault(int(r["image"]), []).append(r["correct"] == "False")
            label[int(r["image"])] = r["label"]
    share = {i: sum(v) / len(v) for i, v in wrong.items()}
    code, out, err = cli(["export", "both", "--hard", "--hard-threshold", "0.6", "-o", str(tmp_path / "hard")],
                         capsys, monkeypatch)
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO((tmp_path / "hard" / "hard.csv").read_text())))
    expected = sorted((i for i, s in share.items() if s >= 0.6), key=lambda i: (-share[i], i))
    assert [int(r["image"]) for r in rows] == expected and expected
    for r in rows:
        i = int(r["image"])
        assert float(r["hardness"]) == pytest.approx(share[i], abs=1e-12) and r["label"] == label[i]
        assert int(r["pairs"]) == 2 * 2  # two models × two corrupted cells
    # the bundled sample is in memory: the file list names the images by index
    assert (tmp_path / "hard" / "files.txt").read_text().split() == [str(i) for i in expected]
    # the corrupted copies: each hard image under each of its worst cells, and each one's pixels are those the models
    # saw: both models, scoring the PNG anew with the engine's scoring, predict what the run stored for that cell
    import numpy as np
    from PIL import Image

    from domainbench.engine.scoring import classify, load_model
    from domainbench.store import open_store

    copies = list(csv.DictReader(io.StringIO((tmp_path / "hard" / "corrupted.csv").read_text())))
    for r in rows:
        cells = {w.rsplit(":", 1)[0] for w in r["worst_cells"].split()}
        assert {f"{c['corruption']}@{c['severity']}" for c in copies if c["image"] == r["image"]} == cells and cells
    stored = {(int(r["image"]), r["model"], r["corruption"], int(r["severity"])): r["prediction"]
              for r in csv.DictReader(io.StringIO(preds))}
    s = open_store()
    try:
        classes = list(s.get_run("both").dataset.classes)
    finally:
        s.close()
    pixels = np.stack([np.asarray(Image.open(tmp_path / "hard" / c["file"])) for c in copies])
    assert pixels.dtype == np.uint8 and pixels.shape[0] == len(copies) >= len(rows)
    for model in (PLAIN, AUG):
        got = classify(load_model(model, classes, "cpu", 64, None), pixels).preds
        assert [classes[p] for p in got] == [stored[(int(c["image"]), model, c["corruption"], int(c["severity"]))]
                                             for c in copies]
    # where each class breaks, by hand from the predictions export: its recall per cell, the threshold halfway from
    # its clean recall to chance (ten classes), the first severity below it; the ranking by the mean breaking
    # severity over (model, corruption), never breaking counted as 6 (the run's top severity, 5, + 1)
    hits: dict[tuple[str, str, int, str], list[bool]] = {}
    for r in csv.DictReader(io.StringIO(preds)):
        hits.setdefault((r["model"], r["corruption"], int(r["severity"]), r["label"]), []).append(r["correct"] == "True")
    recall = {k: sum(v) / len(v) for k, v in hits.items()}
    got = list(csv.DictReader(io.StringIO((tmp_path / "hard" / "classes.csv").read_text())))
    assert len(got) == 2 * 1 * len(classes)  # models × corruptions × classes
    mean: dict[str, list[int]] = {}
    for r in got:
        clean = recall[(r["model"], "clean", 0, r["class"])]
        threshold = (clean + 0.1) / 2
        assert float(r["clean"]) == pytest.approx(clean) and float(r["threshold"]) == pytest.approx(threshold)
        by_hand = next((s for s in (3, 5) if recall[(r["model"], "contrast", s, r["class"])] < threshold), None)
        assert r["breaks_at"] == ("" if by_hand is None else str(by_hand))
        for s in (3, 5):
            assert float(r[f"severity_{s}"]) == pytest.approx(recall[(r["model"], "contrast", s, r["class"])])
        mean.setdefault(r["class"], []).append(6 if by_hand is None else by_hand)
    rank = sorted(mean, key=lambda c: (sum(mean[c]) / 2, -sum(v < 6 for v in mean[c]), c))
    assert [r["class"] for r in got][::2] == rank and [int(r["breaks_first_rank"]) for r in got][::2] == list(range(1, 11))
    # the failure clusters: k-means on the hard images' clean embeddings, the k of the best silhouette; redone here with
    # the embedded model's own embed_images and scikit-learn, every k tried, and compared as partitions
    from sklearn.cluster import KMeans
    from sklearn.metrics import silhouette_score

    from domainbench import query
    from domainbench.models.embedded import EmbeddedModel

    clustered = list(csv.DictReader(io.StringIO((tmp_path / "hard" / "clusters.csv").read_text())))
    assert sorted(int(r["image"]) for r in clustered) == sorted(expected)
    s = open_store()
    try:
        images, kept = query.recreate_images(s.get_run("both"), "clean", 0, sorted(expected))
        seed = s.get_run("both").config.seed
    finally:
        s.close()
    model = clustered[0]["model"]
    emb = EmbeddedModel(model.split(":", 1)[1]).embed_images(images).numpy().astype(np.float64)
    scores = {k: silhouette_score(emb, KMeans(n_clusters=k, n_init=10, random_state=seed).fit_predict(emb))
              for k in range(2, min(8, len(emb) - 1) + 1)}
    k = max(scores, key=scores.get)
    labels = KMeans(n_clusters=k, n_init=10, random_state=seed).fit_predict(emb)
    by_hand = {frozenset(int(i) for i, c in zip(kept, labels, strict=True) if c == j) for j in set(labels)}
    got = {frozenset(int(r["image"]) for r in clustered if r["cluster"] == c) for c in {r["cluster"] for r in clustered}}
    assert got == by_hand and len(got) == k
    assert float(clustered[0]["silhouette"]) == pytest.approx(scores[k], rel=1e-6)
    code, out, err = cli(["export", "both", "--hard"], capsys, monkeypatch)
    assert code == 2 and err.strip() == "error: export --hard writes a folder: give it with -o, e.g. -o hard/"

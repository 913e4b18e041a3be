"""The metric registry: declarations are complete and unique, new files are found, and every table
(CLI summary, export columns, UI frames) reads its metrics from it with the values they held before."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import accuracy_score, balanced_accuracy_score

from domainbench.query.export import CELL_COLUMNS, cell_rows
from domainbench.metrics import defs
from domainbench.metrics.aggregate import summarize
from domainbench.metrics.registry import (
    LEVELS,
    Metric,
    MetricRegistryError,
    Registry,
    declared_metrics,
    metric,
    metrics_of,
    registry,
)
from domainbench.records.report import RunReport, ThreatCell, Versions
from tests.cli_runner import run_cli

CLASSES = ["a", "b", "c"]


def test_every_declaration_is_complete_and_names_are_unique() -> None:
    declared = declared_metrics()
    names = [m.name for m in declared]
    assert len(names) == len(set(names)) == len(registry())
    for m in declared:
        m.check()
        assert m.display and m.aggregation and m.needs, m.name
    assert {m.level for m in declared} == set(LEVELS)


def test_export_columns_keep_their_names_and_order() -> None:
    # the order of today's CSV/JSON exports (the golden file pins the values)
    intervals = [f"{m}_ci_{end}" for m in ("top1_accuracy", "balanced_accuracy", "label_flip_probability")
                 for end in ("low", "high")] + ["balanced_accuracy_ci_approximate", "ci_anytime_valid"]
    assert list(CELL_COLUMNS) == ["model", "corruption", "severity", "n_images", "balanced_accuracy", "top1_accuracy",
                                  "label_flip_probability", "label_flips", "shared_by_all_models", *intervals,
                                  "mean_pd_threat", "pd_safe", "ece", "nll", "ssim", "psnr_db"]
    assert all(CELL_COLUMNS[m.name] == m.meaning for m in metrics_of("cell"))
    assert CELL_COLUMNS["top1_accuracy_ci_low"].startswith("lower end of the continuity-corrected Wilson score interval of top1_accuracy")
    assert CELL_COLUMNS["balanced_accuracy_ci_high"].startswith("upper end of the smoothed per-class normal interval")
    assert CELL_COLUMNS["balanced_accuracy_ci_approximate"].startswith("True where the cell's median class has fewer than 5")
    # metrics only some runs have are listed, but add their columns only to those runs' exports
    from domainbench.query.export import BREAKING_FIELDS, UNPARSEABLE_DOC, UNPARSEABLE_FIELD
    from domainbench.frontend.views.compare import FAMILY_METRICS

    assert "unparseable_rate" not in CELL_COLUMNS and [m.name for m in metrics_of("cell", always=False)][-1] == UNPARSEABLE_FIELD
    assert UNPARSEABLE_DOC == metric(UNPARSEABLE_FIELD).meaning and metric("breaking_point").name == BREAKING_FIELDS[0]
    assert "breaking_point" not in FAMILY_METRICS and list(FAMILY_METRICS) == ["accuracy", "ce", "rce", "fr"]


def test_the_declared_intervals_are_the_ones_the_statistics_compute() -> None:
    from domainbench.metrics import confidence

    declared = {level: {m.name: m.interval for m in metrics_of(level) if m.interval} for level in LEVELS}
    assert declared["cell"] == {"balanced_accuracy": "smoothed", "top1_accuracy": "wilson",
                                "label_flip_probability": "wilson"}
    assert set(declared["cell"]) == set(confidence.CELL_INTERVAL_METRICS) == set(confidence.CellIntervals.model_fields) - {
        "model", "corruption", "severity", "approximate"}
    assert set(declared["model"]) == set(confidence.MODEL_METRICS) == set(confidence.ModelIntervals.model_fields) - {
        "model", "approximate"}
    assert set(declared["model"].values()) == {"smoothed"}
    assert declared["image"] == dict.fromkeys(confidence.StabilityIntervals.model_fields.keys() - {"model", "corruption"},
                                              "bootstrap")
    assert declared["fmr"] == {"sa": "wilson", "pa": "wilson"} and declared["corruption"] == {}


def test_summary_columns_keep_their_headers_and_order() -> None:
    from domainbench.app.cli import summary_columns
    from domainbench.frontend.data import COMPARE_METRICS, STABILITY_METRICS, summary_metrics

    assert [m.cli_header for m in summary_columns()] == ["clean%", "corr%", "safe%", "mCE", "rCE", "mFR", "r"]
    assert [m.table_header for m in summary_metrics()] == [
        "clean acc %", "corrupted acc %", "safe-cell acc %", "mCE", "rCE", "mFR", "corr(acc, LFP)"]
    assert list(COMPARE_METRICS) == ["mce", "rce", "mfr", "acc", "mean_corrupted_acc", "safe_acc", "corr"]
    assert COMPARE_METRICS["mce"] == ("mCE", True) and COMPARE_METRICS["acc"] == ("clean accuracy", False)
    assert list(STABILITY_METRICS) == ["divergence_radius", "cosine", "euclidean"]


def test_footers_and_fmr_columns_derive_from_the_registry_with_their_old_text() -> None:
    from domainbench.app.cli import summary_columns
    from domainbench.query.export import fmr_fields
    from domainbench.metrics.registry import column_notes

    # the literal texts the CLI printed before they were derived from the declarations
    assert column_notes(summary_columns(), lambda m: m.cli_header) == (
        "clean%, corr%: balanced accuracy clean and averaged over corruption cells; safe%: averaged over cells "
        "whose PD threat is safe; r: Pearson(accuracy, flip probability) across cells")
    fmr = [m for m in metrics_of("fmr") if m.cli_header]
    assert [m.cli_header for m in fmr] == ["SA%", "PA%", "FMR", "VR%", "steps"]
    assert column_notes(fmr, lambda m: m.display) == (
        "FMR = PA / SA × 100; VR: share of images with at least one accepted perturbation step")
    assert fmr_fields() == ["sa", "fmr", "validation_rate", "mean_steps"]


def test_a_declared_note_reaches_the_footer_and_values_keep_their_format() -> None:
    from domainbench.metrics.registry import column_notes, format_value

    def m(name: str, note: str | None, **kw: object) -> Metric:
        return Metric(name, name, "fraction", "higher", "x", "model", ("n",), "mean", field=name, cli_header=name,
                      cli_note=note, **kw)  # type: ignore[arg-type]

    cols = [m("a", "one note"), m("b", "one note"), m("c", None), m("d", "= a / b"), m("e", "two"), m("f", "one note")]
    assert column_notes(cols, lambda x: x.cli_header) == "a, b: one note; d = a / b; e: two; f: one note"
    assert format_value(m("p", None, percent=True), 0.12345) == "12.3"
    assert format_value(m("q", None, decimals=2), 1.0 / 3) == "0.33"
    assert format_value(m("r", None), 1.0 / 3) == "0.333"
    assert format_value(m("s", None), None) == "n/a" and format_value(m("t", None), 7) == "7"
    assert format_value(metric("fmr"), 87.25) == "87.2" and format_value(metric("mean_steps"), 1.5) == "1.50"


def _units(rng: np.random.Generator) -> tuple[list[dict], dict[tuple[str, str, int], tuple[np.ndarray, np.ndarray]]]:
    """Two models, a clean pass and two noise severities, from per-image predictions."""
    y = rng.integers(0, 3, 40)
    y[:3] = [0, 1, 2]  # every class present
    units, truth = [], {}
    for model, keep in (("m1", 0.9), ("m2", 0.6)):
        clean = np.where(rng.random(40) < keep, y, rng.integers(0, 3, 40))
        for corruption, severity, flip in (("clean", 0, 0.0), ("noise", 1, 0.2), ("noise", 3, 0.5)):
            pred = np.where(rng.random(40) < flip, rng.integers(0, 3, 40), clean)
            conf = np.zeros((3, 3), dtype=int)
            np.add.at(conf, (y, pred), 1)
            units.append({"schema_version": 1, "run_id": "r", "model": model, "corruption": corruption,
                          "severity": severity, "shard": 0, "n": 40, "confusion": conf.tolist(),
                          "flips": int((pred != clean).sum()), "seed": 0, "classes": CLASSES})
            truth[(model, corruption, severity)] = (y, pred, clean)
    return units, truth


def test_cell_metrics_read_the_values_an_independent_computation_gives() -> None:
    units, truth = _units(np.random.default_rng(3))
    threat = [ThreatCell(corruption="noise", severity=1, n=40, mean_threat=0.4, std_threat=0.1, frac_unsafe_images=0.0,
                         max_threat=0.9, safety="safe"),
              ThreatCell(corruption="noise", severity=3, n=40, mean_threat=1.7, std_threat=0.3, frac_unsafe_images=0.8,
                         max_threat=2.5, safety="unsafe")]
    report = RunReport(run_id="r", baseline="m1", seed=0, classification=summarize(units, "m1"), threat=threat,
                       versions=Versions(domainbench="test"))
    rows = cell_rows(report)
    assert len(rows) == 6
    for row in rows:
        y, pred, clean = truth[(row["model"], row["corruption"], row["severity"])]
        assert row["n_images"] == len(y)
        assert row["balanced_accuracy"] == pytest.approx(balanced_accuracy_score(y, pred), abs=1e-12)
        assert row["top1_accuracy"] == pytest.approx(accuracy_score(y, pred), abs=1e-12)
        assert row["label_flips"] == int((pred != clean).sum())
        assert row["label_flip_probability"] == pytest.approx(np.mean(pred != clean), abs=1e-12)
        assert row["shared_by_all_models"] is True
        t = {1: (0.4, True), 3: (1.7, False)}.get(row["severity"], (None, None))
        assert (row["mean_pd_threat"], row["pd_safe"]) == t


def test_model_metrics_read_the_summary_row() -> None:
    units, truth = _units(np.random.default_rng(4))
    report = RunReport(run_id="r", baseline="m1", seed=0, classification=summarize(units, "m1"),
                       versions=Versions(domainbench="test"))
    for row in report.table():
        y, pred, _ = truth[(row.model, "clean", 0)]
        assert metric("clean_accuracy").read(row) == pytest.approx(balanced_accuracy_score(y, pred), abs=1e-12)
        corrupted = [balanced_accuracy_score(*truth[(row.model, "noise", s)][:2]) for s in (1, 3)]
        assert metric("mean_corrupted_accuracy").read(row) == pytest.approx(np.mean(corrupted), abs=1e-12)
        assert metric("mce").read(row) == row.mce and metric("corr_accuracy_lfp").read(row) == row.corr
    assert metric("mce").read(report.table()[0]) == pytest.approx(1.0)  # m1 is the baseline


def test_the_registry_refuses_contradictions() -> None:
    base = Metric("x", "X", "fraction", "higher", "a thing", "cell", ("n",), "sum", field="n")
    reg = Registry([base])
    with pytest.raises(MetricRegistryError, match="declared twice"):
        reg.register(base)
    bad = {"unit": "furlongs", "direction": "up", "interval": "jackknife", "meaning": "two\nlines", "level": "shard",
           "name": "not a name", "field": None}
    for key, value in bad.items():
        fields = {**base.__dict__, key: value}
        with pytest.raises(MetricRegistryError, match=key if key != "field" else "neither a field"):
            Metric(**fields).check()
    with pytest.raises(MetricRegistryError, match="domainbench metrics"):
        reg.get("y")


def test_find_matches_names_and_display_names() -> None:
    assert [m.name for m in registry().find("*accuracy*") if m.level == "cell"] == ["balanced_accuracy", "top1_accuracy"]
    assert [m.name for m in registry().find("MCE")] == ["mce"]
    assert [m.name for m in registry().find("* radius R_*")] == ["cosine", "euclidean"]


def test_a_new_file_in_defs_is_a_new_metric(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "zz_extra.py").write_text(
        "from domainbench.metrics.registry import Metric\n"
        "METRICS = (Metric('clean_images', 'clean images', 'count', None, 'images of the clean pass', 'cell',"
        " ('n',), 'sum over shards', order=5, field='n'),)\n")
    monkeypatch.setattr(defs, "__path__", [*defs.__path__, str(tmp_path)])
    monkeypatch.delitem(sys.modules, "domainbench.metrics.defs.zz_extra", raising=False)
    try:
        found = Registry(declared_metrics())
        assert found.of_level("cell")[0].name == "clean_images"
        assert len(found) == len(registry()) + 1
    finally:
        sys.modules.pop("domainbench.metrics.defs.zz_extra", None)


def test_metrics_command_lists_every_metric(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "250")
    code, out, _ = run_cli(["metrics"], capsys, monkeypatch)
    assert code == 0
    listed = [line.split()[0] for line in out.splitlines()[3:] if line.strip() and not line.startswith(" " * 10)]
    assert listed == [m.name for m in registry().all()]
    code, out, _ = run_cli(["metrics", "*flip*", "--format", "json"], capsys, monkeypatch)
    assert code == 0
    assert json.loads(out) == [metric(n).describe() for n in ("label_flip_probability", "label_flips",
                                                               "temporal_flip_rate", "temporal_flip_rate_clean",
                                                               "flip_rate_added", "video_answer_flip_rate")]
    assert json.loads(out)[0]["interval"] == "wilson" and json.loads(out)[0]["direction"] == "lower"


def test_help_is_one_paragraph_of_meaning_unit_and_direction() -> None:
    rate = Metric("r", "R", "fraction", "higher", "share of images kept", "model", ("n",), "mean", field="r",
                  percent=True, ui_header="R %")
    assert rate.help == ("Share of images kept. A share from 0 to 1, shown in % (export files keep the fraction). "
                         "Higher is better.")
    ratio = Metric("q", "Q", "ratio", "lower", "errors relative to the baseline's", "model", ("n",), "mean", field="q")
    assert ratio.help == ("Errors relative to the baseline's. A ratio to the baseline model: 1.0 = as robust as the "
                          "baseline. Lower is better.")
    count = Metric("c", "C", "count", None, "images (x)", "cell", ("n",), "sum", field="n")
    assert count.help == "Images (x). Neither higher nor lower is better."
    # a rate is shown in %, and the header a page gives it says so
    with pytest.raises(MetricRegistryError, match="must end in ' %'"):
        Metric("r", "R", "fraction", "higher", "x", "model", ("n",), "mean", field="r", percent=True,
               ui_header="R").check()
    better = {"higher": "Higher is better.", "lower": "Lower is better.", None: "Neither higher nor lower is better."}
    for m in registry().all():
        assert m.help.startswith(m.meaning[0].upper() + m.meaning[1:] + ".") and m.help.endswith(better[m.direction])
        assert "\n" not in m.help


def test_metrics_command_prints_the_help_the_ui_shows(capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """`domainbench metrics` prints, for every metric, the paragraph the UI's hovers and glossary show."""
    monkeypatch.setenv("COLUMNS", "600")  # one line per metric: its whole paragraph, unwrapped
    code, out, _ = run_cli(["metrics"], capsys, monkeypatch)
    assert code == 0
    rows = {line.split()[0]: line.rstrip() for line in out.splitlines()[3:] if line.strip()}
    for m in registry().all():
        assert rows[m.name].endswith("   " + m.help), m.name
        assert rows[m.name].split()[3] == (m.direction or "-")
    code, out, _ = run_cli(["metrics", "--format", "json"], capsys, monkeypatch)
    listed = json.loads(out)
    assert [e["help"] for e in listed] == [m.help for m in registry().all()]
    assert next(e for e in listed if e["name"] == "mce")["help"].endswith("Lower is better.")


@pytest.mark.parametrize(("args", "expect"), [(["metrics", "nothing*"], "no metric matches 'nothing*'"),
                                              (["metrics", "--format", "xml"], "--format 'xml' is not supported")])
def test_metrics_command_bad_input(args: list[str], expect: str, capsys: pytest.CaptureFixture[str],
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, err = run_cli(args, capsys, monkeypatch)
    assert code == 2 and out == ""
    assert err.startswith("error: ") and expect in err and len(err.strip().splitlines()) == 1


# --------------------------------------------------------------------------- one name per number


def test_each_number_has_one_name_and_its_old_names_are_deprecated_aliases(capsys: pytest.CaptureFixture[str],
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    import warnings

    from domainbench.metrics.registry import canonical_name

    units, truth = _units(np.random.default_rng(5))
    report = RunReport(run_id="r", baseline="m1", seed=0, classification=summarize(units, "m1"),
                       versions=Versions(domainbench="test"))
    aliases = {a: m.name for m in registry().all() for a in m.aliases}
    assert aliases == {"acc": "clean_accuracy", "mean_corrupted_acc": "mean_corrupted_accuracy",
                       "safe_acc": "safe_accuracy", "corr": "corr_accuracy_lfp", "pearson_acc_lfp": "corr_accuracy_lfp",
                       "lfp": "label_flip_probability"}
    # an alias is the old name of the very number: the stored field of that name holds the metric's value
    for row in report.table():
        model = report.classification.model(row.model)
        for alias, name in aliases.items():
            m = metric(alias)
            assert m is metric(name)
            if m.level == "model":
                holder = row if alias in type(row).model_fields else model
                assert getattr(holder, alias) == m.read(row), alias
        y, pred, _ = truth[(row.model, "clean", 0)]
        assert metric("acc").read(row) == pytest.approx(balanced_accuracy_score(y, pred), abs=1e-12)
    for cell in report.classification.model("m2").cells:
        assert metric("lfp").read(cell) == cell.lfp == pytest.approx(cell.flips / cell.n)
    # no alias is another metric's name, and the lookups that read names back resolve them
    assert not set(aliases) & {m.name for m in registry().all()}
    assert [m.name for m in registry().find("corr")] == ["corr_accuracy_lfp"]
    with pytest.warns(DeprecationWarning, match="'safe_acc' is deprecated; use 'safe_accuracy'"):
        assert canonical_name("safe_acc") == "safe_accuracy"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert canonical_name("mce") == "mce" and canonical_name("not_a_metric") == "not_a_metric"
    code, out, _ = run_cli(["metrics", "pearson_acc_lfp", "--format", "json"], capsys, monkeypatch)
    assert code == 0 and json.loads(out) == [metric("corr_accuracy_lfp").describe()]
    assert json.loads(out)[0]["deprecated_names"] == ["corr", "pearson_acc_lfp"]
    with pytest.raises(MetricRegistryError, match="'acc' is declared twice"):
        Registry([*registry().all(), Metric("acc", "A", "count", None, "a clash", "cell", ("n",), "sum", field="n")])


# --------------------------------------------------------------------------- the interval a metric declares


def _declared(monkeypatch: pytest.MonkeyPatch, **changes: dict[str, object]) -> None:
    """The registry with some declarations changed (name -> fields), as a changed ``defs/`` file would make it."""
    import dataclasses

    from domainbench.metrics import registry as module

    changed = Registry([dataclasses.replace(m, **changes.get(m.name, {})) for m in declared_metrics()])
    monkeypatch.setattr(module, "registry", lambda: changed)


def test_the_interval_a_metric_declares_is_the_one_computed(monkeypatch: pytest.MonkeyPatch) -> None:
    from domainbench.query.export import cell_columns
    from domainbench.metrics.confidence import model_interval_metrics, run_intervals
    from tests.oracles.score_interval import wilson_cc_by_root
    from domainbench.metrics.outcomes import image_outcomes
    from tests.metrics.confidence_fixtures import synthetic_report, synthetic_units

    units = synthetic_units()
    report, outcomes = synthetic_report(units), image_outcomes(units)

    def intervals():  # noqa: ANN202
        return run_intervals(report, outcomes, confidence=0.9, resamples=200, seed=1)

    before = intervals()
    # declared with none, top-1 accuracy and mCE get none, and top-1's export columns go; the rest is as it was
    _declared(monkeypatch, top1_accuracy={"interval": None}, mce={"interval": None})
    after = intervals()
    assert all(c.top1_accuracy is None for c in after.cells) and all(m.mce is None for m in after.models)
    assert "top1_accuracy_ci_low" not in cell_columns() and "balanced_accuracy_ci_low" in cell_columns()
    for b, a in zip(before.cells, after.cells, strict=True):
        assert (a.balanced_accuracy, a.label_flip_probability) == (b.balanced_accuracy, b.label_flip_probability)
    for b, a in zip(before.models, after.models, strict=True):
        assert a.model_dump(exclude={"mce"}) == b.model_dump(exclude={"mce"}) and b.mce is not None
    # declared as a Wilson interval of other counts, that is what the cell gets (the continuity-corrected Wilson
    # of those counts, each end found by root-finding on the corrected score test)
    _declared(monkeypatch, label_flips={"interval": "wilson", "counts": lambda cell, threat: (cell.flips, 2 * cell.n)})
    got = intervals()
    for m, c in report.all_cells():
        ref = wilson_cc_by_root(c.flips, 2 * c.n, 0.9)
        assert got.cell(m.model, c.corruption, c.severity).label_flips == pytest.approx(ref, abs=1e-9)
    assert "label_flips_ci_high" in cell_columns()
    # an interval the statistics cannot compute is refused, naming the metric
    _declared(monkeypatch, corr_accuracy_lfp={"interval": "smoothed"})
    with pytest.raises(MetricRegistryError, match="'corr_accuracy_lfp' declares interval 'smoothed'"):
        model_interval_metrics()
    with pytest.raises(MetricRegistryError, match="needs counts"):
        Metric("w", "W", "fraction", "higher", "x", "cell", ("n",), "sum", field="n", interval="wilson").check()
    with pytest.raises(MetricRegistryError, match="balanced accuracy only"):
        Metric("s", "S", "fraction", "higher", "x", "cell", ("n",), "sum", field="n", interval="smoothed").check()

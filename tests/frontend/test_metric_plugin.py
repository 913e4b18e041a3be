"""A metric plug-in (entry-point group ``domainbench.metrics``) is a column of ``show``, the CSV and JSON exports and
the UI's tables, with the interval it declares, and nothing else is touched: the plug-in is
``tests/metrics/plugin_metrics_example.py``, installed here as a package's entry point (a dist-info folder on
sys.path, as ``pip install`` leaves one)."""

from __future__ import annotations

import csv
import io
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import fe_synthetic as syn
import numpy as np
import pytest
from tests.oracles.score_interval import wilson_cc_by_root
from test_app import run_page, summary_table

from domainbench.metrics import registry as metric_registry
from domainbench.metrics.registry import MetricRegistryError, metric, summary_metrics
from domainbench.store import Store
from tests.cli_runner import run_cli

RUN = "20250101-000000-night-abcd"


def _install(root: Path, entry: str, name: str = "example") -> None:
    """A distribution ``plugin-example`` declaring ``name = entry`` in the group domainbench.metrics."""
    dist = root / "plugin_example-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: plugin-example\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[domainbench.metrics]\n{name} = {entry}\n")


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    _install(tmp_path / "site", "tests.metrics.plugin_metrics_example")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    metric_registry.reset_plugins()
    yield
    monkeypatch.undo()
    metric_registry.reset_plugins()


def _expected_error(model: str, severity: int) -> float:
    # the synthetic run's definition: of PER_CLASS images per class, correct(model, severity) are right
    return 1 - syn.correct(model, severity) / syn.PER_CLASS


def _mean_error(model: str) -> float:
    return float(np.mean([_expected_error(model, s) for sevs in syn.CORRUPTIONS.values() for s in sevs]))


def test_a_plugin_metric_reaches_show_the_exports_and_the_ui(plugin: None, store: Store,
                                                             capsys: pytest.CaptureFixture[str],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    syn.populate(store, run_id=RUN, per_image=True)
    assert metric("top1_error").interval == "wilson" and "mean_top1_error" in [m.name for m in summary_metrics()]

    # `domainbench metrics` (and so the Glossary page, which lists the same registry) has both
    code, out, _ = run_cli(["metrics", "*top1_error", "--format", "json"], capsys, monkeypatch)
    assert code == 0 and [e["name"] for e in json.loads(out)] == ["top1_error", "mean_top1_error"]
    assert json.loads(out)[0]["help"] == ("Fraction of images whose top-1 prediction is wrong. A share from 0 to 1, "
                                          "shown in % (export files keep the fraction). Lower is better.")

    # show: the summary's new column, by its CLI header, with each model's value (×100, one decimal)
    monkeypatch.setenv("COLUMNS", "250")
    code, out, _ = run_cli(["show", RUN], capsys, monkeypatch)
    assert code == 0, out
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if "mCE" in line)
    assert lines[at].split()[-1] == "err%"
    for model in syn.MODELS:  # the table's row (a verdict sentence above the table starts with a model's name too)
        line = next(line for line in lines[at:] if line.split()[:1] == [model])
        assert line.split()[-1] == f"{100 * _mean_error(model):.1f}"

    # the CSV: the cell column and its Wilson interval columns (scipy's Wilson interval of the same counts)
    code, out, _ = run_cli(["export", RUN, "--format", "csv"], capsys, monkeypatch)
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert {"top1_error", "top1_error_ci_low", "top1_error_ci_high"} <= set(rows[0])
    n = syn.PER_CLASS * len(syn.CLASSES) * 2  # two shards
    for row in rows:
        error = _expected_error(row["model"], int(row["severity"]))
        assert float(row["top1_error"]) == pytest.approx(error, abs=1e-12)
        assert float(row["top1_error"]) == pytest.approx(1 - float(row["top1_accuracy"]), abs=1e-12)
        # the declared "wilson": the continuity-corrected Wilson (issue 34), its ends found by root-finding
        assert (float(row["top1_error_ci_low"]), float(row["top1_error_ci_high"])) == pytest.approx(
            wilson_cc_by_root(round(error * n), n), abs=1e-9)

    # the JSON: the same column in its cells, its unit, its interval beside the built-in ones
    code, out, _ = run_cli(["export", RUN, "--format", "json"], capsys, monkeypatch)
    assert code == 0
    doc = json.loads(out)
    assert [c["top1_error"] for c in doc["cells"]] == pytest.approx([float(r["top1_error"]) for r in rows])
    assert doc["units"]["top1_error"] == doc["units"]["top1_error_ci_low"] == "fraction"
    assert [end for c in doc["intervals"]["cells"] for end in c["top1_error"]] == pytest.approx(
        [float(r[f"top1_error_ci_{end}"]) for r in rows for end in ("low", "high")])

    # the UI: the run page's summary table and the cells' frame, under the declared headers
    table = summary_table(run_page(RUN)).set_index("model")
    for model in syn.MODELS:
        assert table.loc[model, "mean top-1 error %"] == pytest.approx(100 * _mean_error(model), abs=1e-9)

    from domainbench.frontend import data

    cells = data.cells_frame(store.get_report(RUN))
    assert cells["top1_error"].tolist() == pytest.approx([float(r["top1_error"]) for r in rows])

    # the Python API's summary
    import domainbench

    summary = domainbench.load_run(RUN, store=store).summary(confidence=None).set_index("model")
    assert summary["mean_top1_error"].to_dict() == pytest.approx({m: _mean_error(m) for m in syn.MODELS})


def test_without_the_plugin_nothing_changes(store: Store, capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    metric_registry.reset_plugins()
    syn.populate(store, run_id=RUN, per_image=True)
    code, out, _ = run_cli(["export", RUN, "--format", "csv"], capsys, monkeypatch)
    assert code == 0 and "top1_error" not in out.splitlines()[0]
    with pytest.raises(MetricRegistryError, match="no metric 'top1_error'"):
        metric("top1_error")


def test_a_broken_or_clashing_plugin_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "clashing_metrics.py").write_text(
        "from domainbench.metrics.registry import Metric\n"
        "METRICS = [Metric('acc', 'A', 'fraction', 'higher', 'a clash', 'cell', ('n',), 'sum', field='n')]\n")
    _install(tmp_path / "site", "clashing_metrics")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    try:
        metric_registry.reset_plugins()
        # 'acc' is the deprecated name of clean_accuracy: a plug-in cannot take it
        with pytest.raises(MetricRegistryError, match=r"metric name 'acc' \(metric plug-in 'example'.*declared twice"):
            metric_registry.registry()
        # the statistics a plug-in needs are the cell's: a name it does not hold is refused
        (tmp_path / "site" / "clashing_metrics.py").write_text(
            "from domainbench.metrics.registry import Metric\n"
            "METRICS = [Metric('tally', 'T', 'count', None, 'x', 'cell', ('n', 'logits'), 'sum', field='n')]\n")
        sys.modules.pop("clashing_metrics", None)
        metric_registry.reset_plugins()
        with pytest.raises(MetricRegistryError, match=r"metric 'tally' needs 'logits'; its needs name the cell "
                                                      r"statistics it reads: n, n_unreadable, flips, lfp, accuracy"):
            metric_registry.registry()
        (tmp_path / "site" / "plugin_example-0.1.dist-info" / "entry_points.txt").write_text(
            "[domainbench.metrics]\nexample = no_such_metrics_module\n")
        metric_registry.reset_plugins()
        with pytest.raises(MetricRegistryError, match="could not load metric plug-in 'example'.*ModuleNotFoundError"):
            metric_registry.registry()
        # the CLI says so in one line, naming the plug-in and the fix
        code, out, err = run_cli(["metrics"], capsys, monkeypatch)
        assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
        assert err.startswith("error: could not load metric plug-in 'example' (no_such_metrics_module, from "
                              "plugin-example)") and "fix or uninstall that package" in err
    finally:
        monkeypatch.undo()
        sys.modules.pop("clashing_metrics", None)
        metric_registry.reset_plugins()
    assert len(metric_registry.registry()) == len(metric_registry.declared_metrics())

"""A glossary where numbers are (issue 27, item 3): every column, selector and caption that names a metric
shows the metric registry's help, the Glossary page lists every metric, and `domainbench metrics` prints
the very same paragraph. And one unit per quantity in the downloads (item 2): a table's CSV is the table as
shown, every rate in % under a name that ends in "%"."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import fe_synthetic as syn
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest
from test_app import APP, app, run_page, texts

from domainbench.frontend import exports
from domainbench.frontend.data import COMPARE_METRICS, PER_CORRUPTION_METRICS, STABILITY_METRICS
from domainbench.frontend.ui import md_escape
from domainbench.frontend.views.runs import TABS
from domainbench.metrics.registry import Metric, metric, metrics_of, registry
from domainbench.store import Store, open_store
from tests.cli_runner import run_cli

FMR_RUN = "20250104-000000-fmr-5678"
#: columns derived from a metric (its interval, its mean over domains): their help starts with the metric's
DERIVED = {"clean acc (95 % CI)": "clean_accuracy", "corrupted acc (95 % CI)": "mean_corrupted_accuracy",
           "mCE (95 % CI)": "mce", "mean mCE": "mce"}
#: metric columns each page must show (before this change, most had no help or a hand-written one)
MUST_SEE = {"clean acc %", "corrupted acc %", "safe-cell acc %", "mCE", "rCE", "mFR", "corr(acc, LFP)", "accuracy %",
            "SSIM", "PSNR dB", "ECE", "NLL", "CE", "FR", "n_images", "balanced_accuracy", "top1_accuracy",
            "label_flip_probability", "mean_pd_threat", "SA %", "PA %", "FMR", "validation rate %", "mean steps",
            "DivergenceRadius R_dr"}


def expected_metric(column: str, per_corruption: bool) -> Metric | None:
    """The metric a column holds, from the registry's names alone: its UI header (a count's display name,
    "images", names other counts too), a cell metric's export name, and in a per-corruption table the
    per-corruption ratios' fields."""
    # a per-corruption table names its ratios CE / rCE / FR as the summary does (issue 37, 16): they hover to the
    # per-corruption metric, not the summary's mean of the same header
    if per_corruption and column in ("CE", "rCE", "FR"):
        return metric(f"{column.lower()}_per_corruption")
    for level in ("model", "fmr", "cell", "image", "corruption"):
        for m in metrics_of(level, always=False):
            if (column == m.table_header and m.unit != "count") or (level == "cell" and column == m.name):
                return m
    return None


@pytest.fixture
def both_runs(real_run: tuple[Path, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Store]:
    """A copy of the real run's store (the session's is shared) with a finished FMR run beside it."""
    home = tmp_path / "home"
    shutil.copytree(real_run[0], home)
    monkeypatch.setenv("DOMAINBENCH_HOME", str(home))
    monkeypatch.delenv("DOMAINBENCH_MONGO_URI", raising=False)
    store = open_store()
    syn.populate_fmr(store, run_id=FMR_RUN)
    yield real_run[1], store
    store.close()


def compare_page(runs: list[str]) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["runs"] = ",".join(runs)
    at.run()
    at.switch_page("views/compare.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_every_metric_column_on_every_page_hovers_to_the_registry_help(both_runs: tuple[str, Store]) -> None:
    run_id, _ = both_runs
    pages = {f"run page, {tab}": run_page(run_id, tab) for tab in TABS}
    pages["FMR run page"] = run_page(FMR_RUN)
    pages["Compare"] = compare_page([run_id, FMR_RUN])
    seen: set[str] = set()
    for where, at in pages.items():
        assert not at.error, (where, [e.value for e in at.error])
        for table in at.dataframe:
            config = json.loads(table.proto.columns or "{}")
            columns = list(table.value.columns)
            for c in columns:
                shown = (config.get(c) or {}).get("help")
                m = expected_metric(c, per_corruption="corruption" in columns and "CE" in columns)
                if m is not None:
                    assert shown == m.help, (where, c)
                    seen.add(c)
                elif c in DERIVED:
                    assert shown and shown.startswith(metric(DERIVED[c]).help + " "), (where, c)
    assert MUST_SEE <= seen, MUST_SEE - seen


def test_selectors_and_captions_name_their_metrics_meaning(both_runs: tuple[str, Store]) -> None:
    run_id, _ = both_runs

    def widget(at: AppTest, label: str):  # noqa: ANN202 - an AppTest selectbox or radio
        return next(w for w in [*at.selectbox, *at.radio] if w.label == label)

    compare = compare_page([run_id])
    for choices, label in ((COMPARE_METRICS, "metric"), (PER_CORRUPTION_METRICS, "family metric")):
        helped = widget(compare, label).help
        for key in choices:
            m = PER_CORRUPTION_METRICS[key] if label == "family metric" else \
                next(x for x in metrics_of("model") if x.field == key)
            assert f"**{md_escape(m.display)}**: {md_escape(m.help)}" in helped, (label, m.name)
    # the heatmap of Compare's metric (mCE by default) says what it is
    assert metric("mce").help in texts(compare.caption)

    percorr = run_page(run_id, "Per corruption")
    assert all(md_escape(m.help) in widget(percorr, "metric").help for m in PER_CORRUPTION_METRICS.values())
    stability = run_page(run_id, "Stability")
    assert all(md_escape(metric(k).help) in widget(stability, "stability metric").help for k in STABILITY_METRICS)
    assert metric("divergence_radius").help in texts(stability.caption)
    assert md_escape(metric("ssim").help) in widget(run_page(run_id, "Damage & calibration"), "x axis").help
    for tab, name in (("Accuracy vs severity", "balanced_accuracy"), ("Label flips", "label_flip_probability"),
                      ("PD threat", "mean_pd_threat")):
        assert metric(name).help in texts(run_page(run_id, tab).caption), tab
    assert metric("fmr").help in texts(run_page(FMR_RUN).caption)


def test_glossary_page_and_cli_say_the_same_for_every_metric(store: Store, capsys: pytest.CaptureFixture[str],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """UI help == the registry's help == `domainbench metrics`, for each metric."""
    at = app()
    at.switch_page("views/glossary.py").run()
    assert not at.exception
    page = texts(at.markdown)
    code, out, _ = run_cli(["metrics", "--format", "json"], capsys, monkeypatch)
    assert code == 0
    printed = {e["name"]: e["help"] for e in json.loads(out)}
    assert set(printed) == {m.name for m in registry().all()}
    for m in registry().all():
        # the page's line for the metric: its header, its export name, its help (Markdown-escaped, shown literally)
        assert f"- **{md_escape(m.table_header)}** (`{m.name}`): {md_escape(printed[m.name])}" in page, m.name
        assert printed[m.name] == m.help


def test_every_download_names_the_unit_of_its_rates(both_runs: tuple[str, Store],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Each table's CSV (what its button writes) holds rates in %, under names ending in "%"."""
    run_id, store = both_runs
    downloads: dict[str, pd.DataFrame] = {}
    monkeypatch.setattr(exports, "csv_button", lambda frame, name, key, label="CSV": downloads.setdefault(name, frame))
    for tab in TABS:
        run_page(run_id, tab)
    run_page(FMR_RUN)
    compare_page([run_id, FMR_RUN])
    app()  # the Runs list
    rates = 0
    for name, frame in downloads.items():
        columns = list(frame.columns)
        for c in columns:
            m = expected_metric(c, per_corruption="rce" in columns)
            if m is not None and m.percent:
                values = frame[c].dropna()
                assert c.endswith(" %") and values.between(0, 100).all(), (name, c)
                rates += 1
    assert rates >= 10
    # the values are the registry's fractions × 100, under the names the page shows
    report = store.get_report(run_id)
    summary = pd.read_csv(io.StringIO(exports.csv_text(downloads[f"{run_id}-summary"]))).set_index("model")
    for row in report.table():
        assert summary.loc[row.model, "clean acc %"] == pytest.approx(100 * metric("clean_accuracy").read(row))
        assert summary.loc[row.model, "mCE"] == pytest.approx(metric("mce").read(row))  # a ratio stays a ratio
    runs = pd.read_csv(io.StringIO(exports.csv_text(downloads["runs"]))).set_index("run")
    assert "progress" not in runs.columns and runs.loc[run_id, "progress %"] == pytest.approx(100.0)
    # a models × domains matrix names its metric and unit in its corner cell (its columns are domains)
    heatmap = exports.csv_text(downloads["compare-mce-models-x-domains"])
    assert heatmap.startswith("model · mCE,")
    fmr = downloads["compare-fmr"].set_index("model")
    assert fmr.loc["embedded:good", "SA %"] == pytest.approx(100 * 5 / 6)

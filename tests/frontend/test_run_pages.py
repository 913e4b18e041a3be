"""Runs, Run and Compare pages through ``AppTest`` on a store filled by a real small run (both
embedded models on bundled sample images) and on synthetic stores: what they show equals the
stored report, and bad input is a message, never a traceback."""

from __future__ import annotations

from pathlib import Path

import fe_synthetic as syn
from fe_synthetic import REAL_IMAGES
import pytest
from streamlit.testing.v1 import AppTest
from test_app import APP, DONE, LIVE, app, run_page, summary_table, texts

from domainbench.store import Store
from domainbench.frontend import data
from domainbench.frontend.ui import md_escape
from domainbench.frontend.views.runs import TABS

XRAY = "20250102-000000-xray-ef01"


def compare_page(runs: list[str] | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    if runs is not None:
        at.query_params["runs"] = ",".join(runs)
    at.run()
    at.switch_page("views/compare.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def param(at: AppTest, name: str) -> str:
    v = at.query_params[name]
    return v[0] if isinstance(v, list) else v


# --------------------------------------------------------------------------- the list


def test_runs_list_shows_domains_plans_and_every_run(populated: Store) -> None:
    at = app()
    assert not at.error
    table = next(d for d in at.dataframe if "corruptions" in d.value.columns)
    domains = table.value
    # shown: the count and the names (short enough for 1,024 px); the CSV's column: every severity
    assert len(domains) == 3 and domains["corruptions"].iloc[0] == "2: gaussian_noise, brightness"
    assert "gaussian_noise (1,2,3)" in domains["corruptions (severities)"].iloc[0]
    assert list(table.proto.column_order) == ["domain", "runs", "latest", "corruptions"]
    runs = next(d.value for d in at.dataframe if "progress %" in d.value.columns)
    assert runs["run"].tolist() == [LIVE, XRAY, DONE]
    assert runs.set_index("run").loc[LIVE, "progress %"] == pytest.approx(100 * 8 / 12)  # in %, as its name says
    assert {"dataset", "images", "created"} <= set(runs.columns)
    assert "live" in texts(at.caption)  # a running run refreshes the list in place
    # choosing a domain shows its plan with the planner's reasons and filters the runs
    next(s for s in at.selectbox if s.key == "domain-filter").set_value("d" + XRAY[-4:]).run()
    plan = next(d.value for d in at.dataframe if "reason" in d.value.columns)
    assert plan["selected in %"].tolist() == [100.0, 75.0]
    assert "chest x-rays" in texts(at.text)
    runs = next(d.value for d in at.dataframe if "progress %" in d.value.columns)
    assert runs["run"].tolist() == [XRAY]


def test_runs_list_search_and_status_filter(populated: Store) -> None:
    at = app()
    at.text_input(key="runs-search").set_value("x-rays").run()
    assert next(d.value for d in at.dataframe if "progress %" in d.value.columns)["run"].tolist() == [XRAY]
    at.text_input(key="runs-search").set_value("").run()
    at.multiselect(key="runs-status").set_value(["running"]).run()
    assert next(d.value for d in at.dataframe if "progress %" in d.value.columns)["run"].tolist() == [LIVE]
    at.text_input(key="runs-search").set_value("no such words").run()
    assert "No run matches" in texts(at.info)


def test_unknown_run_id_in_the_url_says_so_and_opens_nothing(populated: Store) -> None:
    at = run_page("20990101-000000-nope-0000")
    assert "no run '20990101-000000-nope-0000'" in texts(at.error)
    assert not [d for d in at.dataframe if "mCE" in d.value.columns]  # never silently the newest run
    assert next(d.value for d in at.dataframe if "progress %" in d.value.columns)["run"].tolist() == [LIVE, XRAY, DONE]


@pytest.mark.parametrize("page", ["runs", "compare"])
def test_a_store_that_is_down_is_a_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, page: str) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the store's directory should be")
    monkeypatch.setenv("DOMAINBENCH_HOME", str(blocker / "home"))
    at = app(None if page == "runs" else page)
    assert "opening the results store" in texts(at.error) and "is a file" in texts(at.error)


def test_a_running_run_keeps_its_tab_while_its_numbers_change(store: Store) -> None:
    syn.populate(store, run_id=LIVE, status="running", skip_cells=2)
    at = run_page(LIVE, "Per corruption")
    assert "8 of 12" in texts(at.warning)
    assert at.session_state["tab"] == "Per corruption"
    before = next(d.value for d in at.dataframe if "CE" in d.value.columns and "corruption" in d.value.columns)
    assert set(before["corruption"]) == {"gaussian_noise"}  # brightness not stored yet
    syn.populate(store, run_id=LIVE, status="running")  # the remaining cells arrive
    at.run()
    assert not at.exception and at.session_state["tab"] == "Per corruption"
    assert "12 of 12" in texts(at.warning)
    after = next(d.value for d in at.dataframe if "CE" in d.value.columns and "corruption" in d.value.columns)
    assert set(after["corruption"]) == {"gaussian_noise", "brightness"}
    expected = data.per_corruption_frame(data.load_run_view(store, LIVE).report)
    assert after["CE"].tolist() == pytest.approx(expected["ce"].tolist())


# --------------------------------------------------------------------------- the run, from a real run


def test_run_page_numbers_equal_the_stored_report(real_store: Store, real_run: tuple[Path, str]) -> None:
    run_id = real_run[1]
    at = run_page(run_id)
    report = real_store.get_report(run_id)
    # the only warnings are the intervals' cautions (few images per class, an unresolved rCE), one each
    from domainbench.query.confidence import load_intervals

    notes = load_intervals(real_store, report).notes
    assert not at.error and len(at.warning) == len(notes) and notes
    assert all(n[:15] in w.value for n, w in zip(notes, at.warning, strict=True))  # the rest is markdown-escaped
    table = summary_table(at).set_index("model")
    for row in report.table():
        assert table.loc[row.model, "mCE"] == pytest.approx(row.mce)
        assert table.loc[row.model, "clean acc %"] == pytest.approx(100 * row.acc)
        assert table.loc[row.model, "corrupted acc %"] == pytest.approx(100 * row.mean_corrupted_acc)
    assert str(REAL_IMAGES) in [str(m.value) for m in at.metric]  # images
    # the open tab's chart only (the other tabs, cost beside robustness included, draw when opened)
    assert [e.key for e in at.get("plotly_chart")] == ["chart-severity"]


@pytest.mark.parametrize("tab", list(TABS))
def test_every_tab_of_a_real_run_draws_without_error(real_store: Store, real_run: tuple[Path, str], tab: str) -> None:
    at = run_page(real_run[1], tab)
    assert not at.error, texts(at.error)
    assert at.session_state["tab"] == tab


def test_per_corruption_tab_shows_the_reports_ce(real_store: Store, real_run: tuple[Path, str]) -> None:
    at = run_page(real_run[1], "Per corruption")
    shown = next(d.value for d in at.dataframe if "rCE" in d.value.columns and "corruption" in d.value.columns)
    report = real_store.get_report(real_run[1])
    for row in shown.to_dict("records"):  # the ratios under the summary's names: CE, FR
        m = report.model(row["model"])
        assert row["CE"] == pytest.approx(m.ce_per_corruption[row["corruption"]])
        assert row["FR"] == pytest.approx(m.fr_per_corruption[row["corruption"]])


def test_gallery_shows_each_models_prediction_and_marks_flips(real_store: Store, real_run: tuple[Path, str]) -> None:
    run_id = real_run[1]
    at = run_page(run_id, "Gallery")
    at.selectbox(key=f"gallery-cell-{run_id}").set_value(("gaussian_noise", 5)).run()
    at.radio(key=f"gallery-only-{run_id}").set_value("flipped").run()
    assert not at.error and not at.exception
    run = real_store.get_run(run_id)
    preds = data.cell_predictions(real_store, run, "gaussian_noise", 5)
    flipped = data.gallery_indices(preds, "flipped", 8)
    assert flipped, "severity 5 noise flips some predictions of the embedded models"
    assert len(at.get("image")) == 2 * len(flipped)  # each clean image beside its corrupted version
    captions = [c for img in at.get("image") for c in [img.proto.imgs[0].caption]]
    assert captions[0].startswith(f"#{flipped[0]} clean") and captions[1] == "gaussian_noise s5"
    lines = [m.value for m in at.markdown if "`embedded:" in m.value]
    assert len(lines) == len(flipped)
    for index, text in zip(flipped, lines, strict=True):
        for row in preds[preds["index"] == index].itertuples(index=False):
            assert f"`{row.model}`: {md_escape(row.clean_pred)} → **{md_escape(row.pred)}**" in text
            assert (f"`{row.model}`: {md_escape(row.clean_pred)} → **{md_escape(row.pred)}** :red[flipped]" in text) == row.flipped


def test_flip_differences_tab_lists_images_one_model_flips(real_store: Store, real_run: tuple[Path, str]) -> None:
    run_id = real_run[1]
    at = run_page(run_id, "Flip differences")
    at.selectbox(key=f"diff-cell-{run_id}").set_value(("brightness", 5)).run()
    assert not at.error
    expected = data.flip_differences(data.cell_predictions(real_store, real_store.get_run(run_id), "brightness", 5))
    if expected.empty:
        assert "every image flips" in texts(at.info)
    else:
        shown = next(d.value for d in at.dataframe if "kept by" in d.value.columns)
        assert shown["index"].tolist() == expected["index"].tolist()


# --------------------------------------------------------------------------- compare


def test_compare_selection_lives_in_the_url(populated: Store) -> None:
    at = compare_page([DONE, "nope"])
    assert "nope" in texts(at.warning)
    assert at.multiselect(key="compare-runs").value == [DONE]
    assert param(at, "runs") == DONE
    at.multiselect(key="compare-runs").set_value([DONE, XRAY]).run()
    assert param(at, "runs") == f"{DONE},{XRAY}"
    heat = next(d.value for d in at.dataframe if "embedded:good" in d.value.index)
    # mCE, as text with its interval (none here: these runs store no per-image outcomes)
    assert heat.shape == (2, 2) and heat.loc["embedded:weak"].tolist() == ["2.000", "2.000"]


def test_compare_default_is_the_newest_finished_run_per_domain(populated: Store) -> None:
    at = compare_page()
    assert at.multiselect(key="compare-runs").value == [XRAY, DONE]  # LIVE is still running


def test_compare_flags_runs_on_other_image_counts_and_groups_one_domain(populated: Store) -> None:
    syn.populate(populated, run_id="20250104-000000-night-abcd", created_at="2025-01-04T00:00:00+00:00")
    syn.populate(populated, run_id="20250105-000000-night-abcd", shards=1, created_at="2025-01-05T00:00:00+00:00")
    at = compare_page([DONE, "20250104-000000-night-abcd", "20250105-000000-night-abcd", XRAY])
    assert "Not comparable" in texts(at.warning) and "30 images \\(most runs\\: 60\\)" in texts(at.warning)
    heat = next(d.value for d in at.dataframe if "embedded:good" in d.value.index)
    assert heat.shape == (2, 2)  # the run on 30 images is left out until the user includes it
    at.checkbox(key="compare-include-flagged").check().run()
    assert param(at, "flagged") == "1"
    heat = next(d.value for d in at.dataframe if "embedded:good" in d.value.index)
    assert heat.shape == (2, 3)  # night (2 runs), night on 30 images, x-rays
    ranking = next(d.value for d in at.dataframe if "rank change" in d.value.columns)
    assert ranking["model"].tolist() == ["embedded:good", "embedded:weak"]
    assert ranking["rank change"].tolist() == [0, 0]


def test_compare_on_a_real_run(real_store: Store, real_run: tuple[Path, str]) -> None:
    at = compare_page([real_run[1]])
    assert not at.error
    report = real_store.get_report(real_run[1])
    ranking = next(d.value for d in at.dataframe if "rank change" in d.value.columns).set_index("model")
    for row in report.table():
        assert ranking.loc[row.model, "clean acc %"] == pytest.approx(100 * row.acc)
        assert ranking.loc[row.model, "corrupted acc %"] == pytest.approx(100 * row.mean_corrupted_acc)
    # the heatmap, the rank change, cost beside robustness (issue 40) and the families
    assert [c.key for c in at.get("plotly_chart")] == ["chart-heatmap", "chart-rank-change", "chart-cost", "chart-family"]


def test_compare_adds_every_finished_run_of_a_domain(populated: Store) -> None:
    syn.populate(populated, run_id="20250104-000000-night-abcd", created_at="2025-01-04T00:00:00+00:00")
    at = compare_page([XRAY])
    at.selectbox(key="compare-add-domain").set_value("d" + DONE[-4:]).run()
    at.button(key="compare-add").click().run()
    assert not at.exception and not at.warning
    assert at.multiselect(key="compare-runs").value == [XRAY, "20250104-000000-night-abcd", DONE]
    assert param(at, "runs") == f"{XRAY},20250104-000000-night-abcd,{DONE}"
    heat = next(d.value for d in at.dataframe if "embedded:good" in d.value.index)
    assert heat.shape == (2, 2)  # the two night runs share one column

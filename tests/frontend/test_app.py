"""The Streamlit app end to end through ``AppTest``: every page, empty and populated stores."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from domainbench.store import Store
from domainbench.frontend import data

APP = str(Path(__file__).resolve().parents[2] / "frontend" / "app.py")
DONE = "20250101-000000-night-abcd"
LIVE = "20250103-000000-live-1234"


def app(page: str | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60).run()
    if page:
        at.switch_page(f"views/{page}.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def run_page(run_id: str, tab: str | None = None) -> AppTest:
    """The Runs page opened at ``?run=run_id`` (and ``&tab=tab``), as a shared link opens it."""
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["run"] = run_id
    if tab:
        at.query_params["tab"] = tab
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def texts(elements) -> str:  # noqa: ANN001 - an AppTest element list
    return "\n".join(str(e.value) for e in elements)


def summary_table(at: AppTest):  # noqa: ANN201
    return next(d.value for d in at.dataframe if "mCE" in d.value.columns)


@pytest.mark.parametrize("page", [None, "compare"])
def test_empty_store_shows_the_make_demo_hint(store: Store, page: str | None) -> None:
    at = app(page)
    assert "make demo" in texts(at.info)
    assert not at.error


def test_runs_page_shows_a_running_run_as_partial(populated: Store) -> None:
    at = run_page(LIVE)
    assert not at.error
    assert "Partial results" in texts(at.warning) and "8 of 12" in texts(at.warning)
    assert len(at.get("plotly_chart")) == 1  # only the open tab (accuracy vs severity) is drawn


def test_runs_page_baseline_selector_recomputes_the_table(populated: Store) -> None:
    at = app()
    next(s for s in at.selectbox if s.key == "open-run").set_value(DONE).run()
    assert at.query_params["run"] in (DONE, [DONE])  # the run's page is now a shareable link
    assert not at.exception and not at.error and not at.warning
    t = summary_table(at).set_index("model")
    assert t.loc["embedded:weak", "mCE"] == pytest.approx(2.0)
    next(s for s in at.selectbox if s.label.startswith("baseline")).set_value("embedded:weak").run()
    assert not at.exception and not at.error
    t = summary_table(at).set_index("model")
    assert t.loc["embedded:good", "mCE"] == pytest.approx(0.5)
    assert bool(t.loc["embedded:weak", "baseline"])


def test_runs_page_shows_errors_as_messages_not_tracebacks(populated: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*a, **k):  # noqa: ANN002, ANN003, ANN202
        raise RuntimeError("the store went away")

    monkeypatch.setattr(data, "load_run_view", broken)
    at = run_page(DONE)
    assert "the store went away" in texts(at.error)


def test_compare_page_plots_models_across_domains(populated: Store) -> None:
    at = app("compare")
    assert not at.error
    charts = at.get("plotly_chart")
    assert len(charts) == 3  # models × domains heatmap, rank change, families
    next(s for s in at.selectbox if s.label == "metric").set_value("acc").run()
    assert not at.exception and not at.error
    next(s for s in at.selectbox if s.label.startswith("baseline")).set_value("embedded:weak").run()
    assert not at.exception and not at.error


def test_unlabelled_run_shows_flips_instead_of_accuracy(store: Store) -> None:
    import fe_synthetic as syn

    syn.populate(store, run_id="r-unlabelled", labelled=False)
    at = run_page("r-unlabelled")
    assert "PD threat was not measured" in texts(run_page("r-unlabelled", "PD threat").info)
    assert not at.error
    assert "unlabelled" in texts(at.info)
    t = summary_table(at).set_index("model")
    assert t["clean acc %"].isna().all() and t["mCE"].isna().all()  # not applicable, never 0
    assert t.loc["embedded:weak", "mFR"] == pytest.approx(2.0)


def test_failed_run_shows_its_error_and_the_resume_hint(store: Store) -> None:
    import fe_synthetic as syn

    syn.populate(store, run_id="r-failed", status="failed", skip_cells=3, error="ModelOutputError: NaN embeddings")
    at = run_page("r-failed")
    assert not at.exception
    err = texts(at.error)
    assert "NaN embeddings" in err and "--resume r-failed" in err
    assert "Partial results" in texts(at.warning)


def test_the_app_hides_the_developer_toolbar_however_it_is_started(store: Store) -> None:
    from streamlit import config

    config.set_option("client.toolbarMode", "auto")  # what a bare `streamlit run` would use
    app()
    assert config.get_option("client.toolbarMode") == "viewer"
    shipped = Path(APP).resolve().parents[1] / ".streamlit" / "config.toml"
    import tomllib

    cfg = tomllib.loads(shipped.read_text())
    assert cfg["client"]["toolbarMode"] == "viewer" and cfg["browser"]["gatherUsageStats"] is False

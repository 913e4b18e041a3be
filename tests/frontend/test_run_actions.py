"""The run page's Cancel, Resume and Delete buttons through ``AppTest``: what they change in the store."""

from __future__ import annotations

from test_app import DONE, LIVE, run_page, texts

from domainbench.store import Store


def button(at, label: str):  # noqa: ANN001, ANN201 - AppTest elements
    return next(b for b in at.button if b.label == label)


def test_cancel_a_running_run_then_resume_it(populated: Store) -> None:
    at = run_page(LIVE)
    assert not [b for b in at.button if b.label == "Resume"]
    button(at, "Cancel run").click().run()
    run = populated.get_run(LIVE)
    assert run.status == "cancelled"
    assert len(populated.units(LIVE)) == 16  # finished units are kept
    assert "cancelled" in texts(at.subheader)
    assert not [b for b in at.button if b.label == "Cancel run"]
    button(at, "Resume").click().run()
    assert populated.get_run(LIVE).status == "queued"


def test_delete_asks_naming_the_run_and_deletes_only_it(populated: Store) -> None:
    at = run_page(DONE)
    button(at, "Delete…").click().run()
    assert f"Delete run {DONE} with all its results" in texts(at.warning)
    button(at, "Keep it").click().run()
    assert populated.get_run(DONE) is not None and "Delete run" not in texts(at.warning)
    button(at, "Delete…").click().run()
    button(at, f"Delete run {DONE}").click().run()
    assert not at.exception
    assert populated.get_run(DONE) is None and populated.units(DONE) == []
    assert len(populated.list_runs()) == 2 and populated.units(LIVE)
    assert "run" not in at.query_params  # back on the list
    assert DONE not in next(d.value for d in at.dataframe if "progress %" in d.value.columns)["run"].tolist()

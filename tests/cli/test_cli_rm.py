"""`domainbench rm RUN [RUN...]` on the embedded store and on MongoDB (mongomock): the runs and their
records go, nothing else; an unknown or running run is a one-line error, exit 2, nothing deleted."""

from __future__ import annotations

from pathlib import Path

import pytest

from domainbench.app import cli
from domainbench.store import open_store
from domainbench.store.base import Store
from tests.cli_runner import run_cli
from tests.run_records import counts as _counts
from tests.run_records import records as _records


@pytest.fixture(params=["sqlite", "mongomock"])
def cli_store(request: pytest.FixtureRequest, home: Path, monkeypatch: pytest.MonkeyPatch) -> Store:
    if request.param == "sqlite":
        return open_store()
    import mongomock

    from domainbench.store.mongo_store import MongoStore

    store = MongoStore("mongodb://localhost/rmtest", client=mongomock.MongoClient())
    monkeypatch.setattr(cli, "_store", lambda: store)
    return store


def test_rm_deletes_named_runs_only(cli_store: Store, capsys, monkeypatch) -> None:  # noqa: ANN001
    for run_id in ("a", "b", "c"):
        _records(cli_store, run_id)
    code, _, err = run_cli(["rm", "a", "b"], capsys, monkeypatch, quiet=False)
    assert code == 0, err
    assert "deleted run a (1 units, 7 records)" in err and "deleted run b" in err
    assert set(_counts(cli_store, "a").values()) == set(_counts(cli_store, "b").values()) == {0}
    assert _counts(cli_store, "c")["units"] == 1 and cli_store.keys("domains") == {("d1",)}


def test_rm_unknown_or_running_is_one_line_and_deletes_nothing(cli_store: Store, capsys, monkeypatch) -> None:  # noqa: ANN001
    _records(cli_store, "a")
    _records(cli_store, "live", status="running")
    code, _, err = run_cli(["rm", "a", "nope"], capsys, monkeypatch)
    assert code == 2 and err.strip().startswith("error: no run 'nope'") and len(err.strip().splitlines()) == 1
    code, _, err = run_cli(["rm", "a", "live"], capsys, monkeypatch)
    assert code == 2 and "run live is running" in err and "--force" in err
    assert _counts(cli_store, "a")["units"] == 1 and _counts(cli_store, "live")["units"] == 1
    code, _, err = run_cli(["rm", "--force", "live"], capsys, monkeypatch)
    assert code == 0 and cli_store.get_run("live") is None

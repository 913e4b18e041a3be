"""Deleting runs and cancelling them, on every backend: exactly the named runs' records go, the
domain and every other run stay; a bad name or a running run deletes nothing."""

from __future__ import annotations

from typing import Any

import pytest

from domainbench.store.status import run_status
from domainbench.errors import UserInputError
from domainbench.store.base import Store
from domainbench.store.queue import queue_of
from domainbench.store.removal import RUN_COLLECTIONS, delete_runs
from tests.run_records import counts as _counts
from tests.run_records import records as _records


def test_rm_deletes_the_runs_records_and_nothing_else(store: Store) -> None:
    _records(store, "r1")
    _records(store, "r2")
    before = _counts(store, "r2")
    assert before == {"runs": 1, "units": 1, "stability": 1, "threat": 1, "fmr": 1, "task_units": 1, "clip_units": 1,
                      "summaries": 0}
    out = delete_runs(store, ["r1"])
    assert out == {"r1": {"clip_units": 1, "fmr": 1, "stability": 1, "task_units": 1, "summaries": 0, "threat": 1,
                          "units": 1, "runs": 1}}
    assert set(_counts(store, "r1").values()) == {0}
    assert _counts(store, "r2") == before  # the other run is untouched
    assert store.keys("domains") == {("d1",)}  # the planned domain stays for other runs
    assert RUN_COLLECTIONS[-1] == "runs"


def test_rm_checks_every_name_before_deleting_anything(store: Store) -> None:
    _records(store, "r1")
    with pytest.raises(UserInputError, match="no run 'nope'.*nothing was deleted"):
        delete_runs(store, ["r1", "nope"])
    assert _counts(store, "r1")["units"] == 1
    with pytest.raises(UserInputError, match="at least one run"):
        delete_runs(store, [])


def test_rm_refuses_a_running_run_unless_forced(store: Store) -> None:
    _records(store, "live", status="running")
    assert run_status(store.get_run("live")) == "running"
    with pytest.raises(UserInputError, match="run live is running.*--force"):
        delete_runs(store, ["live"])
    assert _counts(store, "live")["units"] == 1
    delete_runs(store, ["live"], force=True)
    assert store.get_run("live") is None and store.units("live") == []


def test_cancel_a_queued_run_keeps_it_from_workers_and_it_can_be_resumed(store: Store) -> None:
    _records(store, "q", status="done")
    store.update_run("q", status="queued", queued_at="2026-01-01")
    q = queue_of(store)
    assert q.cancel("q").status == "cancelled"
    assert q.claim("w", 30) is None  # no worker takes a cancelled run
    assert store.units("q") != []  # finished units are kept
    with pytest.raises(UserInputError, match="is cancelled: only a queued or running run"):
        q.cancel("q")
    assert q.requeue("q").status == "queued"  # resumable like an interrupted run
    with pytest.raises(UserInputError, match="no run 'nope'"):
        q.cancel("nope")


def test_cancel_a_claimed_run_stops_its_lease_renewal(store: Store) -> None:
    _records(store, "r", status="done")
    store.update_run("r", status="queued", queued_at="2026-01-01")
    q = queue_of(store)
    assert q.claim("w1", 30) is not None
    cancelled: Any = q.cancel("r")
    assert cancelled.status == "cancelled" and run_status(cancelled) == "cancelled"
    assert q.renew("r", "w1", 30) is None  # its worker loses the run and stops writing

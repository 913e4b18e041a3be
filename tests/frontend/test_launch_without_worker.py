"""Launching with no worker (issue 37, defect 14): the page says nothing evaluates the run yet instead of a green "a
worker picks it up", says "picks it up" only when a worker is alive, and a queued run's page says it waits for a worker
instead of advising `run --resume` for a run that never started."""

from __future__ import annotations

import fe_synthetic as syn
import pytest
from test_app import run_page, texts
from test_new_domain import launch, planned

from domainbench.frontend import progress
from domainbench.store import Store

QUEUED = "20250109-000000-queued-9999"


def test_launch_without_a_worker_says_nothing_evaluates_it(populated: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    at = launch(planned(monkeypatch), limit=40)
    assert not at.success
    warning = texts(at.warning)
    assert "Queued run" in warning and "nothing evaluates it yet" in warning and "no worker is running" in warning


def test_launch_with_a_worker_alive_says_it_is_picked_up(populated: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress, "builtin_worker_alive", lambda: True)
    at = launch(planned(monkeypatch), limit=40)
    assert "a worker picks it up" in texts(at.success)
    assert "nothing evaluates it" not in texts(at.warning)


def test_a_queued_runs_page_never_advises_resume(store: Store) -> None:
    syn.populate(store, run_id=QUEUED, status="queued", skip_cells=6)  # no unit: it never started
    at = run_page(QUEUED)
    shown = texts(at.error) + texts(at.warning) + texts(at.info) + texts(at.caption) + texts(at.markdown)
    assert "queued" in shown and "--resume" not in shown

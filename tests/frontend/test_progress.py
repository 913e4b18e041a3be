"""Progress in images and units with each cell's actual n, and liveness said plainly (frontend/progress.py)."""

from __future__ import annotations

import os
import time

import fe_synthetic as syn
import pytest
from test_app import LIVE, run_page, texts

from domainbench.engine.reports import build_report
from domainbench.store import Store
from domainbench.store.queue import now_iso
from domainbench.frontend import progress


def test_a_cell_missing_a_shard_is_not_complete(store: Store) -> None:
    # 2 shards of 30 images; the last cell of each model lost its second shard (a worker died)
    syn.populate(store, run_id=LIVE, status="running")
    for m in syn.MODELS:
        store.units.delete(run_id=LIVE, model=m, corruption="brightness", severity=2, shard=1)
    run = store.get_run(LIVE)
    report = build_report(store, LIVE)
    p = progress.progress_of(run, report, units=len(store.units(LIVE)), cells_total=12)
    # by hand: 12 cells x 60 images planned; two cells have 30 of their 60
    assert (p.images_planned, p.images_done) == (720, 720 - 2 * 30)
    assert (p.cells_complete, p.n_min, p.n_max, p.units) == (10, 30, 60, 22)
    assert "10 of 12 cells complete" in p.line() and "images per cell: 30–60" in p.line()
    at = run_page(LIVE)
    assert "660 of 720 image evaluations (92 %); 10 of 12 cells complete" in texts(at.warning)


def test_queued_run_without_a_worker_says_so_and_refreshes(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(progress.UI_WORKER_ENV, raising=False)
    syn.populate(store, run_id=LIVE, status="running", skip_cells=12)
    store.update_run(LIVE, status="queued", queued_at="2025-01-01T00:00:00+00:00")
    at = run_page(LIVE)
    assert "no worker has taken this run in" in texts(at.warning) and "domainbench worker" in texts(at.warning)
    assert "refreshes itself" in texts(at.caption)  # a queued page redraws itself (st.fragment run_every)
    # a fresh queued run just waits; a dead built-in worker is said at once
    store.update_run(LIVE, queued_at=now_iso())
    assert progress.liveness(store.get_run(LIVE), "queued")[0] == "info"
    monkeypatch.setenv(progress.UI_WORKER_ENV, str(2**22 + 12345))  # no such process
    level, text = progress.liveness(store.get_run(LIVE), "queued")
    assert level == "warning" and "built-in worker has stopped" in text
    monkeypatch.setenv(progress.UI_WORKER_ENV, str(os.getpid()))
    assert progress.liveness(store.get_run(LIVE), "queued") == ("info", "waiting for a worker (the UI's built-in worker is running)")


def test_running_under_a_worker_names_it(store: Store) -> None:
    run = syn.populate(store, run_id=LIVE, status="running").model_copy(update={"worker": "w1", "lease_until": time.time() + 42})
    level, text = progress.liveness(run, "running", now=time.time())
    assert level == "info" and text.startswith("worker w1 is working on it")
    assert "lease runs 41 s more" in text or "lease runs 42 s more" in text

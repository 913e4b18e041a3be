"""Whether a worker is alive, said on every page even when nothing is queued (issue 27, item 6): idle workers
beat into $DOMAINBENCH_HOME/workers/, workers holding a run are seen through their lease."""

from __future__ import annotations

import json
import time
from pathlib import Path

import fe_synthetic as syn
import pytest
from test_app import app, texts

from domainbench.runtime import heartbeat
from domainbench.frontend import progress
from domainbench.store import Store
from domainbench.app.worker import Worker


@pytest.fixture(autouse=True)
def _no_builtin_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(progress.UI_WORKER_ENV, raising=False)


def test_a_beat_is_alive_until_stale_and_only_for_its_store(home: Path) -> None:
    heartbeat.beat(home, "w1", "store A", poll_s=2.0)
    now = time.time()
    assert [b.name for b in heartbeat.alive(home, "store A", now)] == ["w1"]
    assert heartbeat.alive(home, "store B", now) == []  # a worker of another store is not ours
    assert heartbeat.alive(home, "store A", now + heartbeat.MIN_STALE_S + 1) == []  # silent too long
    # a process on this host that is gone is not alive, however recent its last beat
    dead = json.loads((home / "workers" / "w1.json").read_text()) | {"name": "w2", "pid": 2**22 + 12345}
    (home / "workers" / "w2.json").write_text(json.dumps(dead))
    assert [b.name for b in heartbeat.alive(home, "store A", now)] == ["w1"]
    heartbeat.clear(home, "w1")
    assert heartbeat.alive(home, "store A", now) == []


def test_workers_status_names_idle_and_busy_workers_and_says_when_none(store: Store, home: Path) -> None:
    level, text = progress.workers_status(store)
    assert level == "info" and text.startswith(progress.NO_WORKER)
    syn.populate(store, run_id="r-waiting", status="running", skip_cells=6)
    store.update_run("r-waiting", status="queued")
    level, text = progress.workers_status(store)
    assert level == "warning" and "1 run(s) are waiting" in text and "`domainbench worker`" in text
    heartbeat.beat(home, "idle-one", store.description, poll_s=1.0)
    syn.populate(store, run_id="r-held", status="running", skip_cells=6)
    store.update_run("r-held", worker="busy-one", lease_until=time.time() + 60)
    assert progress.workers_status(store) == ("info", "2 worker(s) alive: `busy-one` (working on `r-held`), "
                                                      "`idle-one` (idle)")


def test_a_worker_beats_while_idle_and_clears_when_it_stops(store: Store, home: Path) -> None:
    seen: list[list[str]] = []
    w = Worker(store, name="beater", poll_s=0.01, say=lambda _: None)
    real = w.run_one

    def look() -> bool:
        seen.append([b.name for b in heartbeat.alive(home, store.description)])
        return real()

    w.run_one = look  # type: ignore[method-assign]
    assert w.serve(until_idle=True) == 0
    assert seen == [["beater"]]
    assert heartbeat.alive(home, store.description) == [] and not (home / "workers" / "beater.json").exists()


def test_every_page_says_whether_a_worker_is_alive(store: Store, home: Path) -> None:
    at = app()
    assert "no worker is running: start one with `domainbench worker`" in texts(at.sidebar.caption)
    heartbeat.beat(home, "w-idle", store.description, poll_s=2.0)
    for page in (None, "compare", "new_domain"):
        assert "1 worker(s) alive: `w-idle` (idle)" in texts(app(page).sidebar.caption), page

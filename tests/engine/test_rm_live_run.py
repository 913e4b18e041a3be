"""`rm --force` of a run that is running stops its writer before deleting (issue 36, item 2): the live
process used to keep writing, leaving records no listing shows, which a new run of the same id adopted."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from domainbench.records.config import CorruptionChoice, DomainConfig, RunConfig
from domainbench.engine.runner import Engine
from domainbench.engine.tasks import SilentEvents
from domainbench.errors import UserInputError
from domainbench.store import open_store
from domainbench.store.base import COLLECTIONS
from domainbench.store.removal import delete_runs

SMALL = DomainConfig(domain="small", corruptions=[CorruptionChoice(name="gaussian_noise", severities=[1, 3]),
                                                  CorruptionChoice(name="brightness", severities=[2])])
TINY = DomainConfig(domain="tiny", corruptions=[CorruptionChoice(name="gaussian_noise", severities=[3])])


def _records(store, run_id: str) -> dict[str, int]:  # noqa: ANN001
    found = {c: len(store.find(c, run_id=run_id)) for c, key in COLLECTIONS.items() if key[0] == "run_id"}
    return {c: n for c, n in found.items() if n}


class RemoveAfter(SilentEvents):
    """`domainbench rm RUN --force` from another thread once ``n`` units are stored; the engine goes on."""

    def __init__(self, n: int) -> None:
        self.n, self.removed = n, None

    def advance(self, units: int, images: int) -> None:
        self.n -= units
        if self.n == 0:
            thread = threading.Thread(target=lambda: setattr(self, "removed", delete_runs(open_store(), ["x"], force=True)))
            thread.start()
            thread.join()


def test_a_run_deleted_while_it_runs_writes_nothing_more_and_its_id_starts_clean(home: Path) -> None:
    store = open_store()
    events = RemoveAfter(5)
    cfg = RunConfig(models=["fake:a", "fake:b"], limit=24, shard_size=8, workers=0, seed=7)
    with pytest.raises(UserInputError, match="run x was deleted"):
        Engine(store, events).start(SMALL, cfg, run_id="x")
    assert events.removed["x"]["units"] == 5
    assert _records(store, "x") == {}  # no orphan: the writer was stopped before the delete
    Engine(store).start(TINY, cfg.model_copy(update={"seed": 3}), run_id="x")
    units = store.units("x")
    assert {(u.corruption, u.severity) for u in units} == {("clean", 0), ("gaussian_noise", 3)}
    assert len(units) == 2 * 2 * 3 and {u.seed for u in units} == {3}
    report = store.get_report("x")
    assert sorted({(c.corruption, c.severity) for _, c in report.all_cells()}) == [("clean", 0), ("gaussian_noise", 3)]
    assert {(t.corruption, t.severity) for t in report.threat} == {("gaussian_noise", 3)}

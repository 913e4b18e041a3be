"""Deleting runs (``domainbench rm``, the UI's Delete button): a run and every record keyed by it.

What goes: the run record, its units, stability, threat and FMR records and its stored report.
What stays: the planned domain (other runs and the New domain page use it) and every other run.
Every run named is checked before anything is deleted, so a bad name deletes nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from domainbench.errors import UserInputError
from domainbench.store.base import COLLECTIONS
from domainbench.store.collections import Collection
from domainbench.store.fence import fence_out
from domainbench.store.status import run_status

if TYPE_CHECKING:
    from domainbench.store.base import Store

#: the collections a run's records live in (keyed by run_id first), the run itself last: a delete
#: cut short leaves the run listed, so it can be deleted again
RUN_COLLECTIONS = tuple(sorted((c for c, key in COLLECTIONS.items() if key[0] == "run_id" and c != Collection.RUNS))) + (Collection.RUNS,)


def check_removable(store: Store, run_ids: list[str], force: bool = False) -> None:
    """``UserInputError`` naming the first run that is unknown, or running (unless ``force``)."""
    if not run_ids:
        raise UserInputError("name at least one run to delete (see `domainbench ls`)")
    for run_id in dict.fromkeys(run_ids):
        run = store.get_run(run_id)
        if run is None:
            raise UserInputError(f"no run {run_id!r} in {store.description}; nothing was deleted (see `domainbench ls`)")
        if run_status(run) == "running" and not force:
            raise UserInputError(f"run {run_id} is running; cancel it first (the UI's Cancel button), or pass --force "
                                 "to delete it while it runs; nothing was deleted")


def delete_runs(store: Store, run_ids: list[str], force: bool = False) -> dict[str, dict[str, int]]:
    """Delete the runs and their records; per run, the number of documents deleted per collection."""
    check_removable(store, run_ids, force)
    for run_id in dict.fromkeys(run_ids):
        # a live writer first: records it wrote after the delete would be orphans that a new run of the same id adopts
        fence_out(store, run_id)
    return {run_id: {c: store.delete(c, run_id=run_id) for c in RUN_COLLECTIONS} for run_id in dict.fromkeys(run_ids)}

"""A view of the store whose every write carries a lease fence (``domainbench.store.fence``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from domainbench.store.fence import Fence, LeaseLost
from domainbench.store.repositories import Repositories

if TYPE_CHECKING:
    from domainbench.store.base import Store


class FencedStore(Repositories):
    """A view of ``store`` whose every write (repositories included) carries ``fence``; reads go through.

    The worker's ``OwnedStore`` builds on it; a Ray actor writing for a worker's run wraps its own
    connection in one, so the actors' units are fenced too.
    """

    def __init__(self, store: Store, fence: Fence) -> None:
        self.inner, self.fence = store, fence

    def __getattr__(self, name: str) -> Any:  # reads go straight through
        return getattr(self.inner, name)

    def _before_write(self) -> None:
        """A hook run before each write (the worker checks its lease's clock there)."""

    def upsert(self, collection: str, doc: Any) -> None:
        self.upsert_many(collection, [doc])

    def upsert_many(self, collection: str, docs: Any) -> None:
        self._before_write()
        self.inner.upsert_many(collection, docs, fence=self.fence)

    def delete(self, collection: str, **where: Any) -> int:
        self._before_write()
        return self.inner.delete(collection, fence=self.fence, **where)

    def put_report(self, report: Any) -> None:
        self.reports.put(report)

    def put_domain(self, doc: Any) -> None:
        self.domains.put(doc)

    def put_run(self, doc: Any) -> None:
        self.runs.put(doc)

    def delete_run(self, run_id: str) -> None:
        from domainbench.store.collections import KEY_FIELDS, Collection

        # the run's record last: once it is gone, the fence (which reads it) refuses every later delete
        for coll in sorted((c for c, f in KEY_FIELDS.items() if f[0] == "run_id"), key=lambda c: c == Collection.RUNS):
            self.delete(coll, run_id=run_id)

    def update_run(self, run_id: str, **fields: Any) -> Any:
        """Through the queue's compare-and-set: only while the fence's worker holds ``run_id``."""
        from domainbench.store.queue import queue_of

        if run_id != self.fence.run_id:
            raise LeaseLost(f"a worker holding run {self.fence.run_id} may not change run {run_id}")
        return queue_of(self.inner).update_owned(run_id, self.fence.worker, **fields)


class ProcessFencedStore(FencedStore):
    """The store as a run started from a terminal writes it: every write (run record updates too)
    only while the run record still names this process (``ProcessFence``)."""

    def update_run(self, run_id: str, **fields: Any) -> Any:
        doc = self.get_run(run_id)
        if doc is None:
            raise self.fence.lost()
        updated = doc.model_copy(update=fields)
        self.put_run(updated.model_dump(mode="json"))  # fenced: refused once the run was deleted or taken over
        return updated


def fenced_for_this_process(store: Store, run_id: str) -> Store:
    """``store`` as this process writes ``run_id``: a worker's view is already fenced by its lease;
    otherwise by this process's id (``ProcessFence``)."""
    import os
    import platform

    from domainbench.store.fence import ProcessFence

    if isinstance(store, FencedStore):
        return store
    return ProcessFencedStore(store, ProcessFence(run_id, worker="", pid=os.getpid(), host=platform.node()))  # type: ignore[return-value]

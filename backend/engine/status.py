"""Kept for callers of the old name: a run's status is decided in the store (``domainbench.store.status``)."""

from domainbench.store.status import run_status

__all__ = ["run_status"]

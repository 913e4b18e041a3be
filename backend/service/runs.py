"""The UI's writes, beside launching (``launch``): open the results store, save a planned domain, cancel,
requeue or delete a run.

The frontend imports nothing from ``domainbench.store`` (``tests/test_import_structure.py``): it reads
through ``domainbench.query`` and writes through these functions, so a change of how runs are stored,
queued or removed is made below them, once, for the UI and the CLI alike.
"""

from __future__ import annotations

from pathlib import Path

from domainbench.records.config import DomainConfig
from domainbench.store import Store, home_dir, open_store
from domainbench.store.queue import CANCELLABLE, REQUEUEABLE, DuplicateRunError, queue_of
from domainbench.store.records import RunRecord
from domainbench.store.removal import delete_runs

__all__ = ["CANCELLABLE", "REQUEUEABLE", "DuplicateRunError", "Store", "cancel", "delete_runs", "home_dir",
           "open_store", "requeue", "save_domain"]


def cancel(store: Store, run_id: str) -> RunRecord:
    """Cancel a queued or running run (atomic per backend): it stops after its current unit, finished units kept."""
    return queue_of(store).cancel(run_id)


def requeue(store: Store, run_id: str) -> RunRecord:
    """Put an interrupted, failed or cancelled run back into the queue; a worker computes only the missing units."""
    return queue_of(store).requeue(run_id)


def save_domain(store: Store, cfg: DomainConfig, created_at: str) -> str:
    """Store a planned domain (``DomainRepository.save``, the one place a domain record is built); its id."""
    return store.domains.save(cfg, created_at=created_at)


def plans_dir() -> Path:
    """Where the UI writes planned domains' TOML files: $DOMAINBENCH_HOME/domains."""
    return home_dir().resolve() / "domains"

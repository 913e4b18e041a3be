"""A run's records from creation to report, the same for every kind of run (corruption evaluation, FMR search).

    checked inputs -> domain and run records ("running"; or "queued" for a worker, from the UI's launch)
    -> units stored by the run's kind -> "failed"/"interrupted" with the error, or the report stored and "done"

Nothing is written before the caller has checked every input (dataset opened, models loaded).
A resumed run drops its stored report first: a report is only ever of a finished run.
"""

from __future__ import annotations

import os
import platform
import uuid
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from domainbench.records.config import DomainConfig, FmrSettings, RunConfig
from domainbench.engine.cancel import RunCancelled
from domainbench.engine.reports import build_report
from domainbench.errors import NOTHING_STORED, RESUME_COMMAND, UserInputError
from domainbench.records.report import RunReport
from domainbench.store import Store
from domainbench.store.queue import queue_of
from domainbench.store.records import DatasetInfo, RunRecord


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def new_run_id(domain: str) -> str:
    slug = "".join(ch if ch.isalnum() else "-" for ch in domain.lower())[:24].strip("-") or "run"
    while "--" in slug:
        slug = slug.replace("--", "-")
    return f"{datetime.now(timezone.utc):%Y%m%d-%H%M%S}-{slug}-{uuid.uuid4().hex[:4]}"


def check_new_run_id(store: Store, run_id: str | None) -> None:
    """A run id given up front (the UI knows it before the run starts) must be unused."""
    if run_id is not None and (not run_id.strip() or store.get_run(run_id) is not None):
        raise UserInputError(f"run id {run_id!r} is empty or already used; choose another or resume it with --resume")


def stored_run(store: Store, run_id: str) -> RunRecord:
    run = store.get_run(run_id)
    if run is None:
        known = [r.run_id for r in store.list_runs()[:5]]
        raise UserInputError(f"no run {run_id!r} in {store.description}; recent runs: {known or 'none'} (see `domainbench ls`)")
    return run


#: run id -> the domain id its ``create_run`` stored new in this process (a saved plan it reused is not here):
#: what :func:`_drop_empty_run` may delete with the run
_NEW_DOMAIN: dict[str, str] = {}


def create_run(store: Store, domain: DomainConfig, cfg: RunConfig, run_id: str | None, dataset: DatasetInfo,
               environment: dict[str, Any], **fields: Any) -> str:
    """Store the domain and the run, running in this process; returns the run id. ``fields``: the kind's own."""
    from domainbench.store.repositories import domain_id

    run_id = run_id or new_run_id(domain.domain)
    if store.domains.get(domain_id=domain_id(domain)) is None:
        _NEW_DOMAIN[run_id] = domain_id(domain)
    did = store.domains.save(domain, created_at=now())
    store.put_run(RunRecord(run_id=run_id, domain_id=did, domain=domain, config=cfg, status="running", pid=os.getpid(),
                            host=platform.node(), created_at=now(), dataset=dataset, environment=environment,
                            **fields))
    return run_id


def queue_run(store: Store, domain: DomainConfig, cfg: RunConfig, run_id: str | None = None,
              fmr: FmrSettings | None = None, **kind_fields: Any) -> RunRecord:
    """Store the domain and a queued run that any worker can take (it starts with ``Engine.resume``, which
    finds its kind by the settings on the record: an FMR search with ``fmr`` settings, a kind's own with
    ``kind_fields``); ``DuplicateRunError`` when the same work is already queued or running."""
    stamp = now()
    did = store.domains.save(domain, created_at=stamp)
    run = RunRecord(run_id=run_id or new_run_id(domain.domain), domain_id=did, domain=domain, config=cfg,
                    status="queued", created_at=stamp, queued_at=stamp, fmr=fmr, **kind_fields)
    return queue_of(store).enqueue(run)


def restart_run(store: Store, run_id: str, **fields: Any) -> None:
    """Mark a stored run as running in this process again and drop its old report."""
    store.update_run(run_id, status="running", pid=os.getpid(), host=platform.node(), **fields)
    store.reports.delete(run_id=run_id)  # a report is only ever of a finished run


def complete_run(store: Store, run_id: str, compute: Callable[[], dict[str, Any]],
                 stopped: Callable[[], dict[str, Any]] = dict,
                 report: Callable[[Store, str], RunReport] = build_report) -> str:
    """Run ``compute`` (it stores the units and returns the finished run's extra fields); then the
    report (the run kind's ``report``) and "done". A failure is recorded on the run ("interrupted" for
    Ctrl-C) and raised; ``stopped`` gives the fields a run keeps however it stops (its stage timings)."""
    try:
        finished = compute()
    except RunCancelled:
        kept = stopped()
        if kept:
            store.update_run(run_id, **kept)
        raise  # the run stays "cancelled", its finished units kept
    except BaseException as e:
        resumable = isinstance(e, UserInputError) and RESUME_COMMAND in str(e)
        if resumable and _drop_empty_run(store, run_id):
            raise type(e)(str(e).replace(RESUME_COMMAND, NOTHING_STORED)) from e
        store.update_run(run_id, status="interrupted" if isinstance(e, KeyboardInterrupt) else "failed",
                         error=f"{type(e).__name__}: {e}"[:500], **stopped())
        if resumable:  # a resumable stop names the run to resume
            raise type(e)(str(e).replace("RUN_ID", run_id)) from e
        raise
    finally:
        _NEW_DOMAIN.pop(run_id, None)
    store.put_report(report(store, run_id))
    store.update_run(run_id, status="done", finished_at=now(), **finished)
    return run_id


def _drop_empty_run(store: Store, run_id: str) -> bool:
    """Delete a run this process created that stopped before storing anything of its own (an endpoint that
    failed from its first request): a resumable stop then leaves nothing behind, and running the same command
    again is the resume (its answers are cached). A resumed or queued run, or one with any record, is kept."""
    from domainbench.store.collections import KEY_FIELDS, Collection

    run = store.get_run(run_id)
    if run is None or run.resumed_at is not None or run.queued_at is not None:
        return False
    owned = [c for c, fields in KEY_FIELDS.items() if fields[0] == "run_id" and c != Collection.RUNS]
    if any(store.keys(c, run_id=run_id) for c in owned):
        return False
    did = _NEW_DOMAIN.get(run_id)
    # the domain first: the fence of a process-fenced store reads the run record
    if did is not None and not any(r.domain_id == did for r in store.list_runs() if r.run_id != run_id):
        store.delete(Collection.DOMAINS, domain_id=did)
    store.delete_run(run_id)
    return True

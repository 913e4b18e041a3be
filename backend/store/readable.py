"""Listing runs when some stored records cannot be read: one odd record must not hide all the others.

A run record written by a newer domainbench, edited by hand or damaged fails validation; ``ls``
shows every other run and names the unreadable ones instead of failing as a whole.
"""

from __future__ import annotations

from typing import Any

from domainbench.store.collections import Collection


def readable_runs(store: Any) -> tuple[list[Any], list[str]]:
    """(the runs that read, newest first; one line per stored run record that does not, naming it and why)."""
    try:
        return store.list_runs(), []
    except Exception:  # noqa: BLE001 - some record is unreadable: read them one by one
        pass
    from domainbench.errors import first_validation_error
    from domainbench.store.records import RunRecord, upgrade

    runs, problems = [], []
    for raw in store._find(Collection.RUNS, {}):
        name = raw.get("run_id", "?") if isinstance(raw, dict) else "?"
        try:
            doc = upgrade(Collection.RUNS, raw, store.description)
            if doc is not None:
                runs.append(RunRecord.model_validate(doc))
        except Exception as e:  # noqa: BLE001 - reported per record
            from pydantic import ValidationError

            why = ": ".join(first_validation_error(e)) if isinstance(e, ValidationError) else f"{type(e).__name__}: {e}"
            problems.append(f"run record {name!s} cannot be read ({why}); it is left out")
    runs.sort(key=lambda r: r.created_at, reverse=True)
    return runs, problems

"""A full disk is the user's to fix, not a bug: one line saying so, the store left consistent, resumable.

SQLite reports it as ``OperationalError("database or disk is full")``, the file system as
``OSError(ENOSPC)`` (``EDQUOT`` for a quota, ``EFBIG`` for a size limit); often only in the
exception's context, because the engine's attempt to mark the run failed hits the full disk too.
"""

from __future__ import annotations

import errno
import sqlite3

from domainbench.errors import UserInputError

_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}


class DiskFullError(UserInputError):
    """The disk (or the quota) filled up while domainbench was writing."""


def _is_full(e: BaseException) -> bool:
    if isinstance(e, OSError) and e.errno in _ERRNOS:
        return True
    return isinstance(e, sqlite3.OperationalError) and "disk is full" in str(e)


def disk_full_cause(e: BaseException) -> BaseException | None:
    """The disk-full error among ``e``, its causes and contexts; None when the disk was not full."""
    seen: set[int] = set()
    stack: list[BaseException | None] = [e]
    while stack:
        cur = stack.pop()
        if cur is None or id(cur) in seen:
            continue
        seen.add(id(cur))
        if _is_full(cur):
            return cur
        stack += [cur.__cause__, cur.__context__]
    return None


def disk_full_message(cause: BaseException, where: str) -> str:
    """The one line shown for a full disk; ``where`` names the store or file being written."""
    return (f"the disk is full (writing {where}: {cause}); finished units are stored: free some space, then "
            "continue with `domainbench run --resume RUN` (the run id is in `domainbench ls`)")

"""Errors a user can fix. The CLI prints them on one line and exits with status 2.

Any other exception that reaches the CLI is an internal error: exit status 1, the traceback
in a file, and a request to report it (``backend/runtime/crash_report.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import ValidationError


class UserInputError(ValueError):
    """Bad input from the user: the message names the input and how to fix it."""


#: how a resumable stop (an endpoint's) ends its message: ``engine.lifecycle`` puts in the run id, or, where a new
#: run stored nothing and was dropped, says so (:data:`NOTHING_STORED`) instead
RESUME_COMMAND = "continue with `domainbench run --resume RUN_ID`"
NOTHING_STORED = "nothing of the run was stored, so run the same command again"


class ModelUnavailableError(UserInputError):
    """A model's weights are not available locally (we never download at run time silently)."""


class StoreUnavailableError(UserInputError):
    """The configured store cannot be opened or reached: the message names the variable to fix."""


def first_validation_error(e: ValidationError) -> tuple[str, str]:
    """(dotted field location, message) of a pydantic error's first problem.

    The offending input value is left out on purpose: it may be a secret (an API key).
    """
    first = e.errors()[0]
    # pydantic prefixes the message of a validator's ValueError with "Value error, "
    return ".".join(str(p) for p in first["loc"]), first["msg"].removeprefix("Value error, ")

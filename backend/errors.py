"""Errors a user can fix. The CLI prints them on one line and exits with status 2."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import ValidationError


class UserInputError(ValueError):
    """Bad input from the user: the message names the input and how to fix it."""


class ModelUnavailableError(UserInputError):
    """A model's weights are not available locally (we never download at run time silently)."""


def first_validation_error(e: ValidationError) -> tuple[str, str]:
    """(dotted field location, message) of a pydantic error's first problem.

    The offending input value is left out on purpose: it may be a secret (an API key).
    """
    first = e.errors()[0]
    return ".".join(str(p) for p in first["loc"]), first["msg"]

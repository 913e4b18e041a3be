"""The one error type of the corruption library."""

from __future__ import annotations

from backend.errors import UserInputError


class CorruptionError(UserInputError):
    """Bad input to the corruption library: unknown name, bad parameters or a bad image.

    A ``ValueError`` subclass (through ``backend.errors.UserInputError``) so callers and the CLI
    treat it as a user-fixable error; the message names the input and how to fix it.
    """

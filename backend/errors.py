"""Errors a user can fix. The CLI prints them on one line and exits with status 2."""

from __future__ import annotations


class UserInputError(ValueError):
    """Bad input from the user: the message names the input and how to fix it."""


class ModelUnavailableError(UserInputError):
    """A model's weights are not available locally (we never download at run time silently)."""

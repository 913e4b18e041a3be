"""The one error type of the corruption library."""

from __future__ import annotations


class CorruptionError(ValueError):
    """Bad input to the corruption library: unknown name, bad parameters or a bad image.

    A plain ``ValueError`` (the library imports nothing from ``backend``); the CLI catches it
    next to ``domainbench.errors.UserInputError`` and prints it as a one-line user error. The message
    names the input and how to fix it.
    """

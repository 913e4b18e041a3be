"""The PD threat's input error, in a module of its own.

Both :mod:`domainbench.metrics.threat` and :mod:`domainbench.metrics.threat_projection` raise it;
keeping it here lets the projection module depend on nothing from the threat module.
"""

from __future__ import annotations

from domainbench.errors import UserInputError


class ThreatInputError(UserInputError):
    """Bad input to the PD threat; the message names the input and how to fix it."""

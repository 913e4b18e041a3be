"""Moved below the store: :mod:`domainbench.confusion` (this name stays for code written against it)."""

from __future__ import annotations

from domainbench.confusion import SparseConfusion

__all__ = ["SparseConfusion"]

"""The FMR knobs of a run: declared with the other run settings in :mod:`domainbench.config` (below the store)."""

from __future__ import annotations

from domainbench.config import FmrSettings, Search

__all__ = ["FmrSettings", "Search"]

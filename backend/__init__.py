"""domainbench's backend: planner, models, data, engine, metrics, store and the CLI."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("domainbench")
except PackageNotFoundError:  # a source checkout that was never installed
    __version__ = "0+unknown"

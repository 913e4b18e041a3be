"""domainbench's backend: planner, models, data, engine, metrics, store and the CLI."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from backend import host_memory  # imports nothing heavy

host_memory.configure()  # huge pages for torch, heap reuse for temporaries: before anything imports torch

try:
    __version__ = version("domainbench")
except PackageNotFoundError:  # a source checkout that was never installed
    __version__ = "0+unknown"

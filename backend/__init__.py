"""domainbench: planner, models, data, engine, metrics, store and the CLI; ``domainbench.corruptions``,
``domainbench.frontend`` and ``domainbench.prompts`` below it.

Importing it changes nothing process-wide: the host-memory settings (``host_memory.configure``)
are applied by the entry points (the CLI, the UI, corruption worker processes)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("domainbench")
except PackageNotFoundError:  # a source checkout that was never installed
    __version__ = "0+unknown"

"""domainbench's backend: planner, models, data, engine, metrics, store and the CLI."""

from __future__ import annotations

import os
from importlib.metadata import PackageNotFoundError, version

# torch's CPU allocator asks for transparent huge pages only when told to (numpy always does):
# without them every fresh batch-sized tensor pays several times the cost of a cheap op just in
# page faults (a float copy of 256 images at 224 x 224: 0.37 ms/img without, 0.08 with). torch
# reads the variable once, at its first allocation, so it is set before anything imports torch.
os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")

try:
    __version__ = version("domainbench")
except PackageNotFoundError:  # a source checkout that was never installed
    __version__ = "0+unknown"

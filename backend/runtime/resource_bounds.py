"""Upper bounds of the run config's sizes, and the memory a batch needs, checked before anything is allocated.

A typo (``image_size = 100000``, ``batch_size = 1e6``) would otherwise end in the kernel killing
the run for memory, possibly after hours. The bounds are far above any sensible setting; the
memory estimate catches what stays inside them but not inside this machine.
"""

from __future__ import annotations

import os
from pathlib import Path

# documented in README.md ("Resource bounds"); RunConfig's fields use them as `le=`
MAX_IMAGE_SIZE = 4096
MAX_BATCH_SIZE = 4096
MAX_WORKERS = 256
MAX_STABILITY_POINTS = 64
MAX_STABILITY_IMAGES = 4096
MAX_THREAT_ANCHORS = 10_000
MAX_LIMIT = 100_000_000
MAX_SHARD_SIZE = 100_000

# bytes per pixel channel a batch holds at once: the uint8 image, its float32 tensor and a
# float32 working copy of the corruption or the model's preprocessing (1 + 4 + 4, rounded up)
BYTES_PER_CHANNEL_IN_FLIGHT = 12
# the share of the available memory one batch may take: the models and the shards need the rest
BATCH_SHARE = 0.5


def batch_bytes(batch_size: int, image_size: int) -> int:
    """Estimated peak bytes of one batch of ``batch_size`` RGB images of ``image_size``²."""
    return batch_size * image_size * image_size * 3 * BYTES_PER_CHANNEL_IN_FLIGHT


def _cgroup_room() -> int | None:
    # in a container the cgroup's limit binds before the machine's free memory does (cgroup v2)
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if limit == "max":
            return None
        return int(limit) - int(Path("/sys/fs/cgroup/memory.current").read_text())
    except (OSError, ValueError):
        return None


def available_memory() -> int | None:
    """Bytes this process can still allocate without swapping (None where it cannot be told)."""
    room = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                room = int(line.split()[1]) * 1024
                break
    except (OSError, ValueError, IndexError):
        pass
    if room is None:
        try:
            room = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            return None
    cgroup = _cgroup_room()
    return room if cgroup is None else min(room, cgroup)


def _gb(n: float) -> str:
    return f"{n / 1e9:.1f} GB"


def batch_memory_problem(batch_size: int, image_size: int, available: int | None = None) -> str | None:
    """Why a batch of this size does not fit in the available memory, or None when it does."""
    available = available_memory() if available is None else available
    if available is None:
        return None
    need = batch_bytes(batch_size, image_size)
    if need <= BATCH_SHARE * available:
        return None
    return (f"batch_size {batch_size} of {image_size}x{image_size} images needs about {_gb(need)} per batch, more than "
            f"half of the {_gb(available)} of memory available; lower --batch-size or image_size")

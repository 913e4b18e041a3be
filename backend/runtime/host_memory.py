"""Process-wide settings for host memory, applied by the entry points (before torch is imported).

Both corruption paths on a CPU (numpy kernels, torch device kernels on sub-batches) allocate and
free temporaries of a few MB for every few images. glibc serves allocations above its mmap
threshold (128 KB at start, raised only after such a block is freed) with fresh pages from the
kernel, so whether a kernel pays page faults for every temporary depended on what the process
had freed before: measured on the defocus kernel, 640 page faults per image in one process and 3
in another, 2.5 ms against 1.0 ms per image for the same code.
"""

from __future__ import annotations

import ctypes
import os

#: temporaries up to this size come from the heap and are reused (glibc's own upper limit for it)
MMAP_THRESHOLD = 32 << 20
#: freed heap memory is handed back to the system only above this much
TRIM_THRESHOLD = 512 << 20

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3


def configure() -> bool:
    """Huge pages for torch's large CPU tensors, and glibc's thresholds above; True when glibc took them.

    torch's CPU allocator asks for transparent huge pages only when told to (numpy always does):
    without them every fresh batch-sized tensor pays several times the cost of a cheap op in page
    faults (a float copy of 256 images at 224 x 224: 0.37 ms/img without, 0.08 with). torch reads
    the variable once, at its first allocation, so this runs before anything imports torch.
    """
    os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc (macOS, Windows, musl): nothing to tune
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))


def release_freed() -> bool:
    """Hand the heap's freed memory back to the system now; True when glibc did so.

    Loading a model frees as much as it keeps (the checkpoint read, the randomly initialised
    weights it replaces, the text tower's prompt batches): below ``TRIM_THRESHOLD`` glibc keeps
    that for reuse, measured 485 MB of a 2.0 GB resident set after loading ViT-B-32, held for
    the whole run although nothing after loading asks for that much at once.
    """
    try:
        return bool(ctypes.CDLL(None).malloc_trim(0))
    except (OSError, AttributeError):  # not glibc: nothing to hand back this way
        return False

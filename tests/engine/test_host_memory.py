"""domainbench.runtime.host_memory: the entry points' settings make freed temporaries reusable; importing changes nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# minor page faults of the second 8 MB temporary: touching fresh 4 KB pages costs ~2,000 of them
PROBE = """
import resource, sys
import numpy as np
if sys.argv[1] in ("import", "configured"):
    import domainbench
if sys.argv[1] == "configured":
    from domainbench.runtime import host_memory
    host_memory.configure()
def faults_of_a_temporary():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    a = np.ones(1 << 20)  # 8 MB, above glibc's default mmap threshold (128 KB)
    del a
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
faults_of_a_temporary()
import os
print(faults_of_a_temporary(), os.environ.get("THP_MEM_ALLOC_ENABLE"))
"""


def _probe(mode: str) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if k != "THP_MEM_ALLOC_ENABLE"}  # this process may have configured itself
    out = subprocess.run([sys.executable, "-c", PROBE, mode], cwd=ROOT, env=env, capture_output=True, text=True,
                         check=True).stdout.split()
    return int(out[0]), out[1]


def test_configured_process_reuses_freed_temporaries_and_importing_changes_nothing() -> None:
    plain_faults, plain_thp = _probe("plain")
    import_faults, import_thp = _probe("import")
    faults, thp = _probe("configured")
    assert thp == "1" and plain_thp == "None" and import_thp == "None"
    # without the settings glibc maps (and faults in) fresh pages for every such temporary
    assert faults < 50 <= min(plain_faults, import_faults), (faults, plain_faults, import_faults)


RELEASE = """
import numpy as np
from domainbench.runtime import host_memory
host_memory.configure()
def rss():
    return int(open("/proc/self/statm").read().split()[1]) * 4096
base = rss()
blocks = [np.ones(1 << 17) for _ in range(300)]  # 300 x 1 MB: heap blocks under the 32 MB mmap threshold
del blocks
kept = rss() - base
released = host_memory.release_freed()
print(kept >> 20, (rss() - base) >> 20, released)
"""


def test_release_freed_hands_back_what_the_heap_kept() -> None:
    out = subprocess.run([sys.executable, "-c", RELEASE], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}).stdout.split()
    kept, after, released = int(out[0]), int(out[1]), out[2]
    assert kept > 250 and after < 50 and released == "True", out  # freed 300 MB held until released

"""Seeds: one integer per image, a ``numpy`` Generator built from it, nothing global.

Image ``i`` is corrupted with ``numpy.random.default_rng(seed_i)``'s stream (as a
``domainbench.corruptions.draws.RecordingGenerator``, which also logs the values a kernel reports drawing).

``corrupt_batch(images, ..., seeds=S)`` with an integer ``S`` gives image ``i`` the seed
``derive_seed(S, i)``: the first 63 bits of ``numpy.random.SeedSequence(S, spawn_key=(i,))``
(the same key ``SeedSequence(S).spawn(n)[i]`` uses). SeedSequence hashing is specified by numpy
and platform independent, so the derived seeds are the same on every machine.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence

import numpy as np

from domainbench.corruptions.errors import CorruptionError

MAX_SEED = 2**63 - 1


def check_seed(seed: object, what: str = "seed") -> int:
    """An integer seed in [0, 2**63 - 1], or a CorruptionError naming ``what``."""
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise CorruptionError(f"{what} must be a non-negative integer, got {seed!r} ({type(seed).__name__})")
    value = int(seed)
    if not 0 <= value <= MAX_SEED:
        raise CorruptionError(f"{what} must be in [0, 2**63 - 1], got {value}")
    return value


def derive_seed(base: int, index: int) -> int:
    """The seed of image ``index`` in a batch corrupted with the integer seed ``base``."""
    base = check_seed(base, "seeds")
    index = check_seed(index, "index")
    state = np.random.SeedSequence(base, spawn_key=(index,)).generate_state(1, np.uint64)[0]
    return int(state) >> 1


def batch_seeds(seeds: int | Sequence[int] | np.ndarray, n: int) -> list[int]:
    """Per-image seeds for a batch of ``n`` images (see module docstring)."""
    if isinstance(seeds, numbers.Integral) and not isinstance(seeds, bool):
        base = check_seed(seeds, "seeds")
        return [derive_seed(base, i) for i in range(n)]
    if isinstance(seeds, (str, bytes)) or not isinstance(seeds, (Sequence, np.ndarray)):
        raise CorruptionError(f"seeds must be an int or a sequence of {n} ints, got {type(seeds).__name__}")
    values = list(np.asarray(seeds).ravel()) if isinstance(seeds, np.ndarray) else list(seeds)
    if len(values) != n:
        raise CorruptionError(f"seeds has {len(values)} entries but the batch has {n} images; pass one seed per image")
    return [check_seed(s, f"seeds[{i}]") for i, s in enumerate(values)]

"""Composed corruptions: the steps of a composition applied in order, each step with its own seed.

Real domains stack their damage (night dash-cam footage is dark, noisy and blurred at once). A
composition is as pure a function of its seed as a single corruption: image ``i`` with seed
``S_i`` gets step ``k`` applied with ``derive_seed(S_i, k)``, so a resumed run, another shard size or
another worker count sees the same pixels.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from domainbench.corruptions.api import corrupt_batch
from domainbench.corruptions.errors import CorruptionError
from domainbench.corruptions.registry import get
from domainbench.corruptions.seeding import derive_seed
from domainbench.corruptions.spec import temporal_refusal

#: more steps than this stop being a plausible single domain and multiply the cost
MAX_STEPS = 5


def check_steps(steps: Sequence[tuple[str, int]]) -> None:
    """Raise CorruptionError for an empty or too long composition, or an unknown corruption/severity."""
    if not 1 <= len(steps) <= MAX_STEPS:
        raise CorruptionError(f"a composition has 1 to {MAX_STEPS} steps, got {len(steps)}; split it or drop steps")
    for name, severity in steps:
        if get(name).temporal:  # raises with close names for an unknown one
            raise CorruptionError(f"composition step {name}: {temporal_refusal(name)}")
        if isinstance(severity, bool) or not isinstance(severity, int) or not 1 <= severity <= 5:
            raise CorruptionError(f"composition step {name}: severity must be an integer in 1..5, got {severity!r}")


def step_seeds(seeds: Sequence[int], step: int) -> list[int]:
    """The per-image seeds of step ``step`` (from 0) of a composition whose images have ``seeds``."""
    return [derive_seed(int(s), step) for s in seeds]


def corrupt_composed(images: Any, steps: Sequence[tuple[str, int]], seeds: Sequence[int],
                     corrupt: Callable[..., Any] = corrupt_batch) -> tuple[Any, list[dict[str, list[Any]]]]:
    """Apply ``steps`` ((corruption, severity) pairs) in order to an (N, H, W[, C]) uint8 batch.

    Returns the images and, per step, what its kernel drew (``corrupt_batch``'s ``drawn``).
    ``corrupt``: the batch function each step runs (``corrupt_batch``'s signature): the numpy
    kernels by default, ``corruptions.device.corrupt_composed`` passes the torch ones.
    """
    check_steps(steps)
    if len(seeds) != len(images):
        raise CorruptionError(f"one seed per image: {len(images)} images, {len(seeds)} seeds")
    out, drawn = images, []
    for k, (name, severity) in enumerate(steps):
        out, d = corrupt(out, name, severity=severity, seeds=step_seeds(seeds, k), return_drawn=True)
        drawn.append(d)
    return out, drawn

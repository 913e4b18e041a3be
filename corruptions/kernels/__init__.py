"""Built-in corruptions, one module per family; each exposes ``CORRUPTIONS``, a list of specs.

The registry loads these modules the way it loads a plug-in module; they never import it.
"""

from __future__ import annotations

BUILTIN_MODULES: tuple[str, ...] = tuple(
    f"domainbench.corruptions.kernels.{family}"
    for family in ("blur", "digital", "geometric", "noise", "occlusion", "photometric", "sensor", "weather", "temporal")
)

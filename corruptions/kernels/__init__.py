"""Built-in corruptions, one module per family; importing a module registers its specs."""

from __future__ import annotations

from corruptions.kernels import blur, digital, geometric, noise, occlusion, photometric, sensor, weather  # noqa: F401

"""The plan preview's measures (SSIM per severity, no-effect checks), shared with ``plan --preview``:
they live in :mod:`domainbench.metrics.ladder`, below the UI, so the CLI and the page show the same numbers."""

from __future__ import annotations

from domainbench.metrics.ladder import NO_EFFECT_PIXELS, NO_EFFECT_SSIM, composed, ladder_ssim, no_effect, no_effect_severities, pixel_change

__all__ = ["NO_EFFECT_PIXELS", "NO_EFFECT_SSIM", "composed", "ladder_ssim", "no_effect", "no_effect_severities", "pixel_change"]

"""How every interval is written: the value, then its two ends, ``0.872 (0.740–1.010)``.

One helper for ``show``, the UI tables, hovers and Compare, so a lopsided interval (a ratio's
bootstrap, an accuracy near 0 or 1) is never summarised as "value ± half a width" that hides
which side is long and whether it crosses a reference value (1.0, chance).
"""

from __future__ import annotations

import math

#: what a missing value is written as in the UI (the CLI passes its own "n/a")
MISSING = "—"


def interval_text(value: float | None, interval: tuple[float, float] | None, percent: bool = False, *,
                  digits: int | None = None, unit: bool = True, missing: str = MISSING) -> str:
    """``value (low–high)``: a rate ×100 with one decimal ("61.2 % (58.1–64.3)"; ``unit=False`` drops
    the " %" where a header says it), a ratio with three ("0.872 (0.740–1.010)"). Without an interval,
    the value alone; without a value (None, NaN), ``missing``. Ends below zero are joined by " to "
    so that a minus sign never reads as the dash."""
    if value is not None and not isinstance(value, (int, float)):
        raise TypeError(f"interval_text: value must be a number or None, got {type(value).__name__}")
    if value is None or math.isnan(value):
        return missing
    scale = 100.0 if percent else 1.0
    places = digits if digits is not None else (1 if percent else 3)
    text = f"{scale * value:.{places}f}"
    suffix = " %" if percent and unit else ""
    if interval is None or any(e is None or math.isnan(e) for e in interval):
        return text + suffix
    low, high = (f"{scale * e:.{places}f}" for e in interval)
    sep = " to " if low.startswith("-") or high.startswith("-") else "–"
    return f"{text}{suffix} ({low}{sep}{high})"

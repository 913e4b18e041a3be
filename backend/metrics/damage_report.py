"""Damage on a common scale, as readers see it: each corrupted cell's mean SSIM and PSNR, most damaged first.

Severity numbers are not comparable across corruptions (severity 3 of gaussian_noise keeps far less
of an image than severity 3 of brightness); SSIM is. ``show`` and the UI list and plot cells by it.
The damage of a cell is the same for every model (the same pixels), so it is read once per cell.

A cell whose images came out identical to the clean ones has SSIM 1 and an infinite PSNR: stored
as ``None`` (JSON null, an empty CSV cell, never a made-up large number) and shown as "∞".
"""

from __future__ import annotations

from dataclasses import dataclass

from domainbench.records.report import RunReport
from domainbench.records.unit_sums import DamageSums

INFINITE = "∞"


@dataclass(frozen=True)
class CellDamage:
    corruption: str
    severity: int
    ssim: float
    #: None: identical pixels (infinite PSNR)
    psnr_db: float | None

    @property
    def label(self) -> str:
        return f"{self.corruption}@{self.severity}"


def identical(damage: DamageSums | None) -> bool:
    """Measured, and every corrupted pixel equals its clean one (SSIM 1, PSNR ∞)."""
    return damage is not None and damage.n > 0 and damage.mse_sum == 0


def psnr_text(damage: DamageSums | None, digits: int = 1) -> str:
    """PSNR in dB for display: "∞" for identical pixels, "n/a" where damage was not measured."""
    if identical(damage):
        return INFINITE
    value = None if damage is None else damage.psnr_db
    return "n/a" if value is None else f"{value:.{digits}f}"


def cell_damage(report: RunReport) -> list[CellDamage]:
    """Each corrupted cell with measured damage, once (the first model that holds it), most damaged first
    (lowest SSIM; ties by name and severity)."""
    seen: dict[tuple[str, int], CellDamage] = {}
    for _, cell in report.all_cells():
        key = (cell.corruption, cell.severity)
        d = cell.damage
        if cell.severity == 0 or key in seen or d is None or d.ssim is None:
            continue
        seen[key] = CellDamage(cell.corruption, cell.severity, d.ssim, d.psnr_db)
    return sorted(seen.values(), key=lambda c: (c.ssim, c.corruption, c.severity))


def damage_line(report: RunReport) -> str | None:
    """One line for ``show``: every cell's SSIM and PSNR, most damaged first; None without measured cells."""
    cells = cell_damage(report)
    if not cells:
        return None
    parts = [f"{c.label} {c.ssim:.2f}/{INFINITE if c.psnr_db is None else f'{c.psnr_db:.1f}'}" for c in cells]
    return "damage (mean SSIM/PSNR dB against the clean images), most damaged first: " + ", ".join(parts)

"""Damage on a common scale: how much a cell changed the pixels it evaluated, whatever its severity number."""

from __future__ import annotations

from domainbench.metrics.registry import Metric

METRICS = (
    Metric("ssim", "SSIM", "index", "higher",
           "mean structural similarity of the corrupted images to their clean ones, on luminance (1 = untouched)",
           "cell", ("damage",), "per-image SSIM (Gaussian window σ = 1.5) summed over the cell's shards, then the mean",
           order=86, compute=lambda cell, threat: None if cell.damage is None else cell.damage.ssim),
    Metric("psnr_db", "PSNR", "decibel", "higher",
           "peak signal-to-noise ratio of the corrupted pixels against the clean ones (empty: identical pixels, ∞)",
           "cell", ("damage",), "per-image MSE summed over the cell's shards, then 10·log10(255² / mean MSE)",
           order=88, ui_header="PSNR dB",
           compute=lambda cell, threat: None if cell.damage is None else cell.damage.psnr_db),
)

"""A small stored run with real-shift cells, for the tests of the real-shift result (issue 37, defect 11).

Shifts, made from the run's own sample images so that pairing is known:

- ``night``: darkened images in class folders, named by their sample index: labelled *and* paired;
- ``scan``: inverted images in one folder, named by their sample index: unlabelled, paired;
- ``shop``: darkened images in class folders named ``photo{k}``: labelled, not paired (no flips, no SSIM).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from PIL import Image

sys.path.insert(0, str(Path(__file__).parent / "engine"))
import fake_models  # noqa: E402,F401  (registers the fake: backend: a fast model near chance)

from domainbench.data import open_dataset  # noqa: E402
from domainbench.engine.runner import Engine  # noqa: E402
from domainbench.records.config import CorruptionChoice, DomainConfig, RealShift, RunConfig  # noqa: E402
from domainbench.store import open_store  # noqa: E402

N = 24
TWO = ["embedded:fmnist-plain", "embedded:fmnist-augmented"]
THREE = [*TWO, "fake:a"]


def make_shifts(tmp: Path, n: int = N) -> dict[str, Path]:
    ds = open_dataset("sample").subset(n)
    for k, (img, label, index) in enumerate(zip(ds.arrays, ds.labels, ds.origin, strict=True)):
        cls = ds.classes[label].replace(" ", "_")
        for folder, name, pixels in (("night", f"{index}.png", img // 2), ("scan", f"{index}.png", 255 - img),
                                     ("shop", f"photo{k}.png", img // 3)):
            where = tmp / folder / cls if folder != "scan" else tmp / folder
            where.mkdir(parents=True, exist_ok=True)
            Image.fromarray(pixels.astype(np.uint8)).save(where / name)
    return {name: tmp / name for name in ("night", "scan", "shop")}


def build(tmp: Path, models: list[str], run_id: str = "realshift", n: int = N) -> Path:
    """The run, stored in ``tmp / "home"`` (returned)."""
    shifts = make_shifts(tmp, n)
    domain = DomainConfig(domain="night photos", corruptions=[CorruptionChoice(name="brightness", severities=[1, 4]),
                                                              CorruptionChoice(name="gaussian_noise", severities=[3, 5])],
                          shift=[RealShift(name=k, path=str(p)) for k, p in shifts.items()])
    cfg = RunConfig(dataset="sample", limit=n, workers=0, threat=False, stability=False, models=models)
    store = open_store(None, tmp / "home")
    try:
        Engine(store).start(domain, cfg, run_id=run_id)
    finally:
        store.close()
    return tmp / "home"

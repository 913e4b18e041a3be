"""Shared FMR fixtures: the bundled sample's first images and the embedded models, loaded once."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from domainbench.data import Batch, open_dataset
from domainbench.fmr.oracle import Oracle, load_oracle
from domainbench.fmr.tested import ZeroShotTested, load_tested

PLAIN, AUGMENTED = "embedded:fmnist-plain", "embedded:fmnist-augmented"
#: the perturbation family of these tests: a noise, a blur, two photometric corruptions
FAMILY = ["gaussian_noise", "defocus_blur", "contrast", "brightness"]


@dataclass
class Zoo:
    classes: list[str]
    batch: Batch
    oracle: Oracle
    plain: ZeroShotTested
    augmented_only: Oracle
    plain_only: Oracle


@pytest.fixture(scope="session")
def zoo() -> Zoo:
    ds = open_dataset("sample").subset(30)
    batch = ds.load(np.arange(len(ds)))
    oracle = load_oracle([PLAIN, AUGMENTED], ds.classes, "cpu", 64, None)
    plain = load_tested(PLAIN, ds.classes, "cpu", 64, None, batch.images)
    assert isinstance(plain, ZeroShotTested)
    return Zoo(ds.classes, batch, oracle, plain,
               augmented_only=Oracle([oracle.members[1]], len(ds.classes)),
               plain_only=Oracle([plain.state], len(ds.classes)))

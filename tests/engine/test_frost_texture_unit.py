"""Each frost unit records which ice layer it overlaid (the reference's photographs or the procedural texture)."""

from __future__ import annotations

from pathlib import Path

import pytest

from domainbench.records.config import CorruptionChoice, DomainConfig, RunConfig
from domainbench.corruptions.kernels import frost_photos
from domainbench.engine.runner import Engine
from domainbench.query import drawn_of
from domainbench.store import open_store

DOMAIN = DomainConfig(
    domain="frosted window",
    corruptions=[CorruptionChoice(name="frost", severities=[2], reason="test"),
                 CorruptionChoice(name="gaussian_blur", severities=[2], reason="no texture")],
)


def test_units_record_the_frost_texture(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(frost_photos.ENV, "procedural")
    frost_photos._folder_for.cache_clear()
    try:
        store = open_store()
        cfg = RunConfig(models=["fake:a"], limit=8, shard_size=8, workers=0, device="cpu", stability=False, threat=False)
        run = Engine(store).start(DOMAIN, cfg)
        units = {u.corruption: u for u in store.units(run)}
        drawn = drawn_of(store.get_run(run), units["frost"])  # made again: units do not store draws
    finally:
        frost_photos._folder_for.cache_clear()
    assert units["frost"].frost_texture == "procedural"
    assert drawn["texture"] == ["procedural"] * 8 and "drawn" not in units["frost"].params
    assert units["gaussian_blur"].frost_texture is None and units["clean"].frost_texture is None

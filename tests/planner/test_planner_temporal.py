"""Temporal corruptions in plans: proposed with reasons for footage, never for still photographs.

The image corruptions of a plan are chosen exactly as before temporal ones existed (the still catalogue
alone); footage read from the text (acquisition factor ``video``) adds the temporal ones.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from domainbench.records.config import DomainConfig, load_domain
from domainbench.planner import acquisition, plan, prompts
from domainbench.planner.catalogue import Catalogue
from domainbench.planner.image_fit import pixel_changes
from domainbench.planner.offline import OfflinePlanner

FOOTAGE = {
    "dashcam": ("Dash-cam video of city traffic at night in heavy rain.",
                {"camera_shake", "rolling_shutter", "h264_compression", "frame_drop", "moving_rain"}),
    "drone": ("Drone video of power lines inspected from a quadcopter.", {"camera_shake", "h264_compression"}),
    "cctv": ("CCTV of crowds in a railway station concourse under fluorescent lights.",
             {"flicker", "h264_compression", "frame_drop"}),
    "endoscopy": ("Colonoscopy video from a flexible endoscope, with fluid on the tip.",
                  {"exposure_lag", "lens_dirt_buildup", "h264_compression"}),
    "broadcast": ("Broadcast footage of football matches.", {"h264_compression", "frame_drop"}),
    "bodycam": ("Police body cam footage during foot patrols at night.", {"camera_shake", "h264_compression"}),
    "robot": ("A warehouse robot camera reads shelf labels while the robot drives the aisles.",
              {"camera_shake", "rolling_shutter", "h264_compression"}),
}
STILL = {
    "receipts": "Handheld phone photos of restaurant receipts.",
    "whiteboards": "Photos of meeting-room whiteboards taken with laptops' webcams across the table.",
    "xray": "Chest X-rays from a hospital PACS.",
    "drone_photos": "Photos taken from a drone of vineyards at midday, stitched into orthomosaics.",
    "studio": "Product photos of shoes on a white background in a studio under LED panels.",
    "rain_street": "Street photos of cyclists in heavy rain taken by a fixed roadside camera.",
}


@pytest.fixture(scope="module")
def plans() -> dict[str, DomainConfig]:
    return {k: plan(text, provider="offline") for k, text in {**{k: t for k, (t, _) in FOOTAGE.items()}, **STILL}.items()}


def names(cfg: DomainConfig) -> set[str]:
    return {c.name for c in cfg.corruptions}


@pytest.mark.parametrize("key", sorted(FOOTAGE))
def test_footage_gets_temporal_corruptions_with_reasons(plans: dict[str, DomainConfig], catalogue: Catalogue, key: str) -> None:
    cfg = plans[key]
    expected = FOOTAGE[key][1]
    temporal = names(cfg) & set(catalogue.temporal_names)
    assert expected <= temporal, (key, sorted(temporal))
    for c in cfg.corruptions:
        if c.name in temporal:
            # the reason quotes the description's words that show it
            quoted = c.reason.split("'")[1]
            assert c.reason.startswith(("The description says '", "The plan has ")) and quoted.lower() in cfg.domain.lower()
            assert c.severities == [1, 2, 3, 4, 5]
    assert cfg.planner.frequencies.keys() == set(catalogue.names)
    assert all((cfg.planner.frequencies[n] > 0.5) == (n in names(cfg)) for n in catalogue.names)
    cfg.check_catalogue()


@pytest.mark.parametrize("key", sorted(STILL))
def test_still_photographs_never_get_temporal_corruptions(plans: dict[str, DomainConfig], catalogue: Catalogue, key: str) -> None:
    assert not names(plans[key]) & set(catalogue.temporal_names), key
    assert acquisition.footage(STILL[key]) is None


def test_the_image_plan_is_what_the_still_catalogue_alone_gives(catalogue: Catalogue) -> None:
    """Temporal entries never move an image corruption in or out (the semantic match runs on the still catalogue)."""
    for text in [FOOTAGE["dashcam"][0], FOOTAGE["cctv"][0], STILL["receipts"], STILL["rain_street"]]:
        both = OfflinePlanner(catalogue).run(text, 1)
        alone = OfflinePlanner(catalogue.still()).run(text, 1)
        image = [c for c in both.chosen if c.name not in catalogue.temporal_names]
        assert [c.model_dump() for c in image] == [c.model_dump() for c in alone.chosen]
        assert {k: v for k, v in both.frequencies.items() if k not in catalogue.temporal_names} == alone.frequencies


def test_moving_weather_follows_the_still_plans_weather(plans: dict[str, DomainConfig]) -> None:
    dash = {c.name: c for c in plans["dashcam"].corruptions}
    assert "rain" in dash and "moving_rain" in dash and "moving_snow" not in dash
    assert "The plan has rain" in dash["moving_rain"].reason
    assert "rain" in names(plans["rain_street"]) and "moving_rain" not in names(plans["rain_street"])


def test_the_llm_catalogue_marks_temporal_entries_and_the_rules_say_when(catalogue: Catalogue) -> None:
    text = prompts.render_catalogue(catalogue)
    lines = {line.split(" ", 2)[1]: line for line in text.splitlines()}
    for name in catalogue.temporal_names:
        assert "temporal: video clips only" in lines[name]
    assert "temporal" not in lines["rain"] and "temporal" not in lines["motion_blur"]
    assert "never for still photographs" in prompts.system_message()


def test_a_plan_with_temporal_corruptions_loads(tmp_path: Path) -> None:
    path = tmp_path / "plan.toml"
    path.write_text(
        'domain = "dash-cam clips"\n'
        '[[corruptions]]\nname = "camera_shake"\nseverities = [1, 3, 5]\nreason = "the car shakes"\n'
        '[[corruptions]]\nname = "h264_compression"\nseverities = [2]\n'
        '[[corruptions]]\nname = "fog"\nseverities = [1, 2]\n'
    )
    cfg = load_domain(path)
    assert [c.name for c in cfg.corruptions] == ["camera_shake", "h264_compression", "fog"]
    cfg.check_catalogue()
    # the fit to probe images measures the image corruptions and leaves the clip ones as planned
    changes = pixel_changes(cfg, np.full((2, 32, 32, 3), 120, np.uint8))
    assert set(changes) == {("fog", 1), ("fog", 2)}
    # and `plan --preview` / New domain show the expected damage of the image cells only
    from domainbench.metrics.ladder import expected_damage

    assert [(d.cell, d.severity) for d in expected_damage(cfg, np.full((32, 32, 3), 120, np.uint8))] == [("fog", 1), ("fog", 2)]

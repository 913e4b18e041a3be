"""The offline planner reads a description like an expert (domains in expert_domains.toml).

Each domain lists the corruptions an expert would test and those the domain cannot produce;
the plan must contain all of the first and none of the second, and every reason must quote
the part of the description that triggered the choice.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from domainbench.records.config import DomainConfig
from domainbench.planner import acquisition, cues, plan, rules
from domainbench.planner.catalogue import Catalogue

DOMAINS_FILE = Path(__file__).with_name("expert_domains.toml")
DOMAINS: dict[str, dict] = tomllib.loads(DOMAINS_FILE.read_text(encoding="utf-8"))
EVERY_DOMAIN = "Required by the sanity rules for every domain."
QUOTE = re.compile(r"'([^']+)'")


@pytest.fixture(scope="module")
def plans() -> dict[str, DomainConfig]:
    return {k: plan(d["text"], provider="offline", samples=5) for k, d in DOMAINS.items()}


def chosen(cfg: DomainConfig) -> set[str]:
    return {c.name for c in cfg.corruptions}


def test_at_least_twelve_domains_with_expectations(catalogue: Catalogue) -> None:
    assert len(DOMAINS) >= 12
    for key, d in DOMAINS.items():
        assert d["expected"] and d["forbidden"], key
        assert not set(d["expected"]) & set(d["forbidden"]), key
        assert set(d["expected"]) | set(d["forbidden"]) <= set(catalogue.names), key


@pytest.mark.parametrize("key", sorted(DOMAINS))
def test_expected_chosen_and_forbidden_left_out(key: str, plans: dict[str, DomainConfig]) -> None:
    got = chosen(plans[key])
    d = DOMAINS[key]
    assert set(d["expected"]) <= got, f"missing {sorted(set(d['expected']) - got)}"
    assert not set(d["forbidden"]) & got, f"chose {sorted(set(d['forbidden']) & got)}"


def _quotes_description(reason: str, text: str) -> bool:
    # a long quote is cut with an ellipsis; what is left of it must be verbatim
    return any(q.rstrip("…").strip() and q.rstrip("…").strip() in text for q in QUOTE.findall(reason))


def test_reasons_quote_the_description(plans: dict[str, DomainConfig]) -> None:
    for key, cfg in plans.items():
        for c in cfg.corruptions:
            assert c.reason.endswith(".") and ". " not in c.reason, c.reason  # one sentence
            if c.reason == EVERY_DOMAIN:
                continue  # the rule itself is the reason; nothing in the text triggered it
            assert _quotes_description(c.reason, cfg.domain), (key, c.reason)


def test_no_reason_cites_a_situation_from_another_world(plans: dict[str, DomainConfig]) -> None:
    # the old planner explained brightness for clothing photos with "X-ray film over-exposed
    # in the developer": a required corruption's closest situation, unrelated to the domain
    for key in ("studio_clothing", "selfies", "handheld_night_market"):
        for c in plans[key].corruptions:
            assert "x-ray" not in c.reason.lower(), c.reason
    brightness = next(c for c in plans["studio_clothing"].corruptions if c.name == "brightness")
    assert brightness.reason == EVERY_DOMAIN


def test_thermal_motion_blur_is_chosen_and_quoted(plans: dict[str, DomainConfig]) -> None:
    reasons = {c.name: c.reason for c in plans["thermal_bridge"].corruptions}
    assert "'frames show motion blur and fixed-pattern stripes'" in reasons["motion_blur"]
    assert "Thermal camera" in reasons["row_noise"]
    # a thermal camera sees heat: "at night" is not low light for it
    assert "low_light" not in reasons


def test_weather_only_outdoors(plans: dict[str, DomainConfig], catalogue: Catalogue) -> None:
    weather = {e.name for e in catalogue.entries if e.family == "weather"}
    for key, cfg in plans.items():
        if cues.outdoors(cfg.domain) is None:
            assert not chosen(cfg) & weather - {"fog"}, key
            # fog indoors only where the text names smoke, steam or turbid water
            if "fog" in chosen(cfg):
                assert any(h.name == "fog" for h in cues.find(cfg.domain)), key


def test_geometry_only_where_pose_varies(plans: dict[str, DomainConfig], catalogue: Catalogue) -> None:
    geometric = {e.name for e in catalogue.entries if e.family == "geometric"}
    fixed = ("conveyor_parts", "flatbed_invoices", "studio_clothing", "supermarket_cctv")
    for key in fixed:
        assert not chosen(plans[key]) & geometric, key
    # a bedside X-ray: the patient is positioned by hand for every film
    varied = ("handheld_night_market", "selfies", "satellite_farmland", "drone_construction", "histology", "whiteboards",
              "portable_xray")
    for key in varied:
        assert "rotation" in chosen(plans[key]), key
    # no geometric choice without a phrase (or a rule) that asks for it
    for key, cfg in plans.items():
        asked = ({h.name for h in cues.find(cfg.domain)} | {h.name for h in acquisition.implied(cfg.domain)}
                 | set(rules.requirements(cfg.domain, catalogue.names).required))
        assert chosen(cfg) & geometric <= asked, key


def test_cued_choices_take_the_full_ladder(plans: dict[str, DomainConfig]) -> None:
    by = {c.name: c for c in plans["night_dashcam"].corruptions}
    assert by["snow"].severities == [1, 2, 3, 4, 5]
    assert by["low_light"].severities == [1, 2, 3, 4, 5]
    flip = {c.name: c for c in plans["histology"].corruptions}["vertical_flip"]
    assert flip.severities == [1]


def test_every_cue_name_is_in_the_catalogue(catalogue: Catalogue) -> None:
    assert cues.cue_book().names() <= set(catalogue.names)


@pytest.mark.parametrize(
    ("text", "name", "quote"),
    [
        ("Night-time footage, often blurred by hand shake.", "motion_blur", "often blurred by hand shake"),
        ("A very long clause that keeps going on and on about cameras that were mounted badly and "
         "then shook in the wind all day long without stopping", "motion_blur",
         "that were mounted badly and then shook in the wind all day long without stopping"),
    ],
)
def test_cue_quotes_are_the_clause_around_the_keyword(text: str, name: str, quote: str) -> None:
    hit = next(h for h in cues.find(text) if h.name == name)
    assert hit.quote == quote and hit.quote in text


def test_unless_keeps_a_phrase_with_its_own_cue() -> None:
    names = {h.name for h in cues.find("Photos blurred by hand shake.")}
    assert "motion_blur" in names and "gaussian_blur" not in names
    assert "gaussian_blur" in {h.name for h in cues.find("Blurry photos from an old lens.")}
    assert "low_light" not in {h.name for h in cues.find("Thermal camera at night")}
    assert "low_light" in {h.name for h in cues.find("Doorbell camera at night")}

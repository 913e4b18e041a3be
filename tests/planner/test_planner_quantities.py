"""The quantity reader (issue 39, Deliver 1): numbers with units read as the physics of the acquisition.

Every sentence here is written for this file (none is a benchmark description). The tables say which
quantities parse, with their value in the canonical unit, and which corruptions a short description
gets from its numbers, or must not get: a number is evidence only where its unit and context say
what it measures.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from domainbench.errors import UserInputError
from domainbench.planner import acquisition, audit, plan, quantities

# (sentence, kind, low, high) in the canonical units: lux, metres, pixels, bit/s, dpi, dB, m/s, s, degrees
PARSES = [
    ("the reading room is kept at 40 lux", "illuminance", 40, 40),
    ("the stage is lit to 2,000 lx", "illuminance", 2000, 2000),
    ("about 5 foot-candles on the shelf", "illuminance", 53.82, 53.82),
    ("the lander rests about 1,500 metres deep", "depth", 1500, 1500),
    ("sampling at a depth of 35 m", "depth", 35, 35),
    ("a trawl camera 600 ft down", "depth", 182.88, 182.88),
    ("in waters up to 300 m deep", "depth", 300, 300),
    ("visibility of 2–4 m in the harbour", "visibility", 2, 4),
    ("barely half a metre of visibility", "visibility", 0.5, 0.5),
    ("the divers can see 3 ft ahead", "visibility", 0.9144, 0.9144),
    ("an old 640 x 480 webcam", "resolution", 640, 640),
    # a picture's size at a clause's or a sentence's end
    ("to keep up, the camera crops to 320 x 240, so the sprays are small", "resolution", 320, 320),
    ("the doorbell sends 352x288.", "resolution", 352, 352),
    ("a 160×120 thermal core", "resolution", 160, 160),
    ("frames of 1280 by 720 pixels", "resolution", 1280, 1280),
    ("a 0.3 MP sensor", "megapixels", 0.3, 0.3),
    ("a 12 megapixel phone", "megapixels", 12, 12),
    ("each coin is 15 px across", "pixels_across", 15, 15),
    ("sent over a 384 kbit/s satellite modem", "bitrate", 384e3, 384e3),
    ("encoded at 1.2 Mbps", "bitrate", 1.2e6, 1.2e6),
    ("a 25 Mbit/s uplink", "bitrate", 25e6, 25e6),
    ("ledgers digitised at 96 dpi", "scan_resolution", 96, 96),
    ("prints scanned at 600 ppi", "scan_resolution", 600, 600),
    ("the night shift runs at ISO 6400", "iso", 6400, 6400),
    ("bracketed from ISO 100-25600", "iso", 100, 25600),
    ("the camera's gain is set to 24 dB", "gain", 24, 24),
    ("the tram passes at 40 km/h", "speed", 11.111, 11.111),
    ("a boat drifting at 3 knots", "speed", 1.5433, 1.5433),
    ("the rover crawls at 0.2 m/s", "speed", 0.2, 0.2),
    ("runners at 12 mph", "speed", 5.3645, 5.3645),
    ("the line moves 30 m/min", "speed", 0.5, 0.5),
    ("a shutter of 1/125 s", "exposure", 0.008, 0.008),
    ("exposures of 40 ms", "exposure", 0.04, 0.04),
    ("a 220-degree lens", "angle", 220, 220),
    ("a fisheye with a 180° field of view", "angle", 180, 180),
    ("the high-speed camera records 10,000 fps", "frame_rate", 10000, 10000),
    ("a kiln at 1,100 °C", "temperature", 1100, 1100),
    ("at least 800 lux on the bench", "illuminance", 800, 800),
    ("an old frame grabber digitising 6 bits", "bit_depth", 6, 6),
    ("stored as 12-bit greyscale", "bit_depth", 12, 12),
    ("warm-white 2700K downlights", "colour_temperature", 2700, 2700),
    ("tubes of 4000-6500 K", "colour_temperature", 4000, 6500),
]


@pytest.mark.parametrize("sentence,kind,low,high", PARSES)
def test_a_quantity_parses_with_its_value_in_canonical_units(sentence: str, kind: str, low: float, high: float) -> None:
    got = [(q.kind, q.low, q.high) for q in quantities.parse(sentence)]
    assert len(got) == 1, got
    k, lo, hi = got[0]
    assert k == kind
    assert lo == pytest.approx(low, rel=1e-3) and hi == pytest.approx(high, rel=1e-3)


# numbers that are no acquisition quantity of the kinds the rules read
NOT_QUANTITIES = [
    ("certified to ISO 9001 and ISO 14001", ("iso",)),
    ("tested to ISO 12233 charts", ("iso",)),
    ("an ISO 9001:2015 audit", ("iso",)),
    ("a Sony A7 III and an RX100 on the bench", tuple(quantities.KINDS)),
    ("bought in the 1990s", ("exposure",)),
    ("a 1/2.3-inch sensor", ("exposure", "resolution", "depth", "visibility")),
    ("8x8 pixel blocks", ("resolution",)),
    ("a 20 x 30 cm print", ("resolution",)),
    ("2 x 4 m tiles", ("resolution",)),
    ("a 297 x 210.5 mm sheet", ("resolution",)),
    ("a 5 m pole", ("depth", "visibility")),
    ("a 200 ms network latency", ("exposure",)),
    ("the image is 300 pixels", ("pixels_across",)),
    ("sound levels of 80 dB", ("gain",)),
    ("photographed on 12 March 2024 at 09:30", tuple(quantities.KINDS)),
    ("priced at $1,299", tuple(quantities.KINDS)),
    ("a 3 m wide corridor", ("depth", "visibility")),
    ("the operator sits 30 m up and can see the hook", ("depth", "visibility")),
    ("a few bits of straw stuck to the lens", ("bit_depth",)),
    ("200k images cut from 4K video", ("colour_temperature",)),
    ("the sample sits at 4 K in the cryostat", ("colour_temperature",)),
]


@pytest.mark.parametrize("sentence,kinds", NOT_QUANTITIES)
def test_numbers_that_are_not_the_quantity(sentence: str, kinds: tuple[str, ...]) -> None:
    assert not [q for q in quantities.parse(sentence) if q.kind in kinds]


def from_numbers(text: str) -> set[str]:
    """The corruptions the description's numbers bring (a quantity's reason starts by quoting it)."""
    return {h.name for h in acquisition.implied(text) if h.why.startswith(f"'{h.keyword}'")}


# (description, corruptions its numbers must bring, corruptions they must not bring)
PLANS = [
    ("Collection photos of textiles in a store room held at 30 lux, taken by hand", {"low_light", "iso_noise"}, set()),
    ("Bench inspection under 1,000 lux LED panels", set(), {"low_light", "iso_noise"}),
    ("A security camera rated for a minimum illumination of 0.05 lux", set(), {"low_light"}),
    ("A thermal camera watching a yard at 5 lux", set(), {"low_light", "iso_noise"}),
    ("Pictures of a kelp forest from a submersible 80 m deep", {"low_light", "iso_noise"}, set()),
    ("Snorkellers photograph a reef 3 m deep", set(), {"low_light"}),
    ("A baited camera on a fishing line lowered 150 m deep", {"low_light", "iso_noise"}, set()),
    ("A 90 m deep quarry photographed from its rim", set(), {"low_light", "iso_noise"}),
    ("A camera lowered into a 200 m deep mine shaft", set(), set()),  # dim from the shaft's words, not the depth
    ("A borehole camera 400 m deep in the rock", set(), {"low_light", "iso_noise"}),
    ("Divers survey a wreck with about 1 m visibility", {"fog", "defocus_blur", "color_shift"}, set()),
    ("Divers survey a wreck with 20 m visibility", set(), {"fog", "defocus_blur"}),
    ("Roadside cameras on a moor where visibility drops to 150 m", {"fog"}, set()),
    ("A pole camera with a 336x256 sensor watches the gate", {"pixelate"}, set()),
    ("Operators watch the feed on a 1920x1080 monitor in the control room", set(), {"pixelate"}),
    ("A 4096 x 3000 machine-vision camera above the belt", set(), {"pixelate"}),
    ("Clips from a 0.3 MP webcam", {"pixelate"}, set()),
    ("A benchmark of 64x64 greyscale digit images", set(), {"pixelate"}),  # the data's own size: its clean images have it too
    ("Number plates only 14 px wide in the frame", {"pixelate"}, set()),
    ("The drone's video reaches the van at 1.5 megabits per second", {"jpeg_compression"}, set()),
    ("The drone's video reaches the van at 300 kilobits per second", {"jpeg_compression", "pixelate"}, set()),
    ("Parish registers digitised at 100 dpi", {"pixelate"}, set()),
    ("Parish registers digitised at 600 dpi", set(), {"pixelate"}),
    ("The website says the logo is 72 dpi", set(), {"pixelate"}),
    ("Wedding reception photos at ISO 12800", {"iso_noise"}, set()),
    ("Studio portraits at ISO 100", set(), {"iso_noise"}),
    ("The line follows ISO 9001 and photographs every part", set(), {"iso_noise"}),
    ("An industrial camera with its gain at 30 dB in the dark hall", {"iso_noise"}, set()),
    ("A 30 dB antenna gain on the radio link", set(), {"iso_noise"}),
    ("Bottles pass the camera at 3 m/s", {"motion_blur"}, set()),
    ("Bottles pass the camera at 3 m/s, shot at 1/20000 s", set(), {"motion_blur"}),
    ("Parcels pass at 0.5 m/s and the camera exposes 1/50 s", {"motion_blur"}, set()),
    ("A mast camera in winds of 15 m/s", set(), {"motion_blur"}),
    ("A porch camera with a 160° lens", {"lens_distortion"}, set()),
    ("The turret rotates 200° to follow the ship", set(), {"lens_distortion"}),
    ("A 24 mm lens on a 35 mm camera", set(), {"lens_distortion"}),
    ("Fuel sprays filmed at 20,000 fps", {"iso_noise", "shot_noise"}, set()),
    ("Ink jets filmed at 4,000 frames per second under one lamp", {"shot_noise"}, set()),
    ("A gaming monitor with a 1,000 fps refresh", set(), {"shot_noise", "iso_noise"}),
    ("The bench camera crops to 256 x 256, so it can keep up", {"pixelate"}, set()),
    ("5 mm screws in a tray under a 12 MP camera", set(), {"pixelate"}),
    ("The ward is not lit to 50 lux at night", set(), {"iso_noise"}),  # a negated quantity is no evidence
    ("Oscilloscope screenshots from a 4-bit display", {"posterize"}, set()),
    ("Herbarium sheets scanned to 8-bit greyscale", set(), {"posterize"}),
    ("The firmware runs on a 32-bit microcontroller in the camera", set(), {"posterize"}),
    ("The café is lit by 2200 K filament bulbs", {"color_shift"}, set()),
    ("The lab is lit by 5000 K LED panels", set(), {"color_shift"}),
]


@pytest.mark.parametrize("text,gets,never", PLANS)
def test_a_description_gets_what_its_numbers_mean(text: str, gets: set[str], never: set[str]) -> None:
    got = from_numbers(text)
    assert gets <= got, got
    assert not never & got, got


def test_the_reason_quotes_the_number_and_states_the_threshold() -> None:
    hits = [h for h in acquisition.implied("Phone snaps of paintings in a gallery kept at 50 lux, no flash") if h.name == "low_light"]
    assert hits[0].why.startswith("'50 lux': at 100 lux or less") and hits[0].quote.endswith("gallery kept at 50 lux")
    moving = [h for h in acquisition.implied("Parcels pass at 0.5 m/s and the camera exposes 1/50 s") if h.cue.startswith("quantity:")]
    assert moving[0].why.startswith("'0.5 m/s for 1/50 s is 10 mm': 5 mm or more")  # 0.5 m/s x 0.02 s = 10 mm


def test_a_quantity_adds_a_factor_the_sanity_rules_see() -> None:
    # the number reads the factor; the factor's own implications follow
    text = "A survey sled towed along the bottom 120 m deep off the shelf edge in the sea"
    found = {f.factor: f for f in acquisition.read(text)}
    assert "dim_light" in found and found["dim_light"].keyword == "120 m"
    # where the words already show the factor, their evidence stays the quote
    found = {f.factor: f for f in acquisition.read("Night dives on a wreck 60 m deep")}
    assert found["dim_light"].keyword.lower() == "night"


def test_the_offline_plan_and_its_explanation_quote_the_number() -> None:
    cfg = plan("Photos of museum objects in display rooms kept at 50 lux for conservation", provider="offline")
    chosen = {c.name: c.reason for c in cfg.corruptions}
    assert "'50 lux': at 100 lux or less" in chosen["low_light"]
    ex = {c.name: c.why for c in audit.explain(cfg).chosen}
    assert "'50 lux'" in ex["low_light"]
    again = plan("Photos of museum objects in display rooms kept at 50 lux for conservation", provider="offline")
    assert again.corruptions == cfg.corruptions  # deterministic


BAD = [
    ('[rules.x]\nquantity = "illuminance"\nat_most = 10.0\nat_least = 1.0\nfactor = "dim_light"\nwhy = "w"\n', "exactly one threshold"),
    ('[rules.x]\nquantity = "illuminance"\nat_most = 10.0\nwhy = "w"\n', "exactly one effect"),
    ('[rules.x]\nquantity = "brightness"\nat_most = 10.0\nfactor = "dim_light"\nwhy = "w"\n', "quantity"),
    ('[rules.x]\nquantity = "illuminance"\nat_most = "dim"\nfactor = "dim_light"\nwhy = "w"\n', "at_most"),
    ('[rules.x\n', "invalid"),
]


@pytest.mark.parametrize("body,says", BAD)
def test_a_bad_quantities_file_is_one_clear_error(tmp_path: Path, body: str, says: str) -> None:
    path = tmp_path / "quantities.toml"
    path.write_text(body)
    with pytest.raises(UserInputError) as e:
        quantities.quantity_book(path)
    msg = str(e.value)
    assert msg.startswith(f"planner quantities file {path} is invalid") and says in msg and msg.endswith("fix it")


def test_a_rule_naming_an_unknown_factor_is_one_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "quantities.toml"
    path.write_text('[rules.x]\nquantity = "illuminance"\nat_most = 10.0\nfactor = "dim_lite"\nwhy = "w"\n')
    with pytest.raises(UserInputError, match=r"rule 'x' names unknown acquisition factors \['dim_lite'\]; fix it"):
        quantities.check_factors(set(acquisition.factor_book().factors), path)
    quantities.check_factors(set(acquisition.factor_book().factors))  # the shipped file names only real factors
    with pytest.raises(UserInputError, match="missing; restore backend/planner/quantities.toml"):
        quantities.quantity_book(tmp_path / "none.toml")


def test_a_quote_keeps_a_number_whole() -> None:
    """A comma or point between digits is part of the number: the reason quotes "20,000 fps", not "at 20"."""
    p = plan("Splashes filmed with a borrowed high-speed camera at 20,000 fps, backlit by an LED panel.", provider="offline")
    reason = next(c.reason for c in p.corruptions if c.name == "shot_noise")
    assert "20,000" in reason, reason

"""The offline planner reasons about how the images are taken (acquisition factors) before choosing.

Scored on an evaluation set of our own (acquisition_domains.toml: 20+ domains, none of the paper's,
each with the corruptions an expert accepts and rejects, and why), and measured against the
corruptions GPT-4o chose for the product paper's six domains (paper_domains.toml), which are an
evaluation only: no acquisition keyword may be evidence in those six texts alone.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from domainbench.records.config import DomainConfig
from domainbench.planner import acquisition, cues, plan, rules
from domainbench.planner.catalogue import Catalogue
from domainbench.planner.rules import keyword_pattern

HERE = Path(__file__).parent
OURS: dict[str, dict] = tomllib.loads((HERE / "acquisition_domains.toml").read_text(encoding="utf-8"))
PAPER: dict[str, dict] = tomllib.loads((HERE / "paper_domains.toml").read_text(encoding="utf-8"))
EXPERT: dict[str, dict] = tomllib.loads((HERE / "expert_domains.toml").read_text(encoding="utf-8"))
#: the new domain set of benchmarks/planner_agreement.py: its tuning part may be evidence, its held-out third never
NEW: dict[str, dict] = tomllib.loads((HERE.parents[1] / "benchmarks" / "planner_domains.toml").read_text(encoding="utf-8"))
QUOTE = re.compile(r"'([^']+)'")


def jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a | b else 1.0


@pytest.fixture(scope="module")
def our_plans() -> dict[str, DomainConfig]:
    return {k: plan(d["text"], provider="offline", samples=5) for k, d in OURS.items()}


@pytest.fixture(scope="module")
def paper_plans() -> dict[str, DomainConfig]:
    return {k: plan(d["text"], provider="offline", samples=5) for k, d in PAPER.items()}


def chosen(cfg: DomainConfig) -> set[str]:
    return {c.name for c in cfg.corruptions}


def test_the_evaluation_sets_are_well_formed(catalogue: Catalogue) -> None:
    assert len(OURS) >= 20 and not set(OURS) & set(PAPER) and len(PAPER) == 6
    factors = set(acquisition.factor_book().factors)
    for key, d in OURS.items():
        assert d["acceptable"] and d["unacceptable"] and d["why"].strip(), key
        assert not set(d["acceptable"]) & set(d["unacceptable"]), key
        assert set(d["acceptable"]) | set(d["unacceptable"]) <= set(catalogue.names), key
        assert set(d["factors"]) <= factors, key
    for key, d in PAPER.items():
        assert set(d["gpt4o"]) | set(d["never"]) <= set(catalogue.names), key
    assert acquisition.factor_book().names() <= set(catalogue.names)


@pytest.mark.parametrize("key", sorted(OURS))
def test_factors_read_from_the_text(key: str) -> None:
    found = {f.factor for f in acquisition.read(OURS[key]["text"])}
    assert set(OURS[key]["factors"]) <= found, f"missing factors {sorted(set(OURS[key]['factors']) - found)}"


def test_our_domains_score(our_plans: dict[str, DomainConfig]) -> None:
    """Every acceptable corruption chosen, no unacceptable one, in every domain (the score is printed)."""
    missing, wrong = {}, {}
    for key, d in OURS.items():
        got = chosen(our_plans[key])
        if set(d["acceptable"]) - got:
            missing[key] = sorted(set(d["acceptable"]) - got)
        if set(d["unacceptable"]) & got:
            wrong[key] = sorted(set(d["unacceptable"]) & got)
    recall = sum(len(set(d["acceptable"]) & chosen(our_plans[k])) for k, d in OURS.items()) / sum(len(d["acceptable"]) for d in OURS.values())
    print(f"acceptable chosen: {recall:.3f}; domains with an unacceptable choice: {len(wrong)}")
    assert not missing and not wrong, f"missing {missing}; unacceptable {wrong}"


def test_acquisition_reasons_name_the_factor_and_quote_the_text(our_plans: dict[str, DomainConfig]) -> None:
    cfg = our_plans["tram_forward_camera"]
    reason = next(c.reason for c in cfg.corruptions if c.name == "motion_blur")
    assert "the camera rides on a moving vehicle, robot or aircraft" in reason
    assert "smearing the scene along its path" in reason
    assert any(q.rstrip("…") in cfg.domain for q in QUOTE.findall(reason))


def test_unless_vetoes_a_factor() -> None:
    assert "sunlit" in {f.factor for f in acquisition.read("Street cameras in the afternoon.")}
    assert "sunlit" not in {f.factor for f in acquisition.read("Street cameras at night.")}
    assert "placed_objects" not in {f.factor for f in acquisition.read("Studio photos of objects for a catalogue.")}


def test_the_paper_domains_agree_with_gpt4o_without_violations(paper_plans: dict[str, DomainConfig], catalogue: Catalogue) -> None:
    """Mean Jaccard with the paper's GPT-4o choices >= 0.7; no sanity-rule or blacklist violation."""
    scores = {}
    for key, d in PAPER.items():
        got = chosen(paper_plans[key])
        scores[key] = jaccard(got, set(d["gpt4o"]))
        assert not got & set(d["never"]), key
        assert rules.check(paper_plans[key].domain, got, catalogue.names) == [], key
    mean = sum(scores.values()) / len(scores)
    print("jaccard with GPT-4o:", {k: round(v, 2) for k, v in scores.items()}, f"mean {mean:.3f}")
    assert mean >= 0.7


def test_no_acquisition_evidence_is_written_for_the_paper_domains() -> None:
    """Every keyword that fires in a paper domain's text also fires in one of our own, the expert or the new domains' tuning part."""
    others = ([d["text"] for d in OURS.values()] + [d["text"] for d in EXPERT.values()]
              + [d["text"] for d in NEW.values() if not d["heldout"]])
    for name, factor in acquisition.factor_book().factors.items():
        for keyword in factor.keywords:
            pattern = keyword_pattern([keyword])
            if any(pattern.search(d["text"]) for d in PAPER.values()):
                assert any(pattern.search(t) for t in others), f"{name}: {keyword!r} fires only in the paper's domains"


ROV = ("Underwater inspection of ship hulls by a remotely operated vehicle: murky green water, strong backscatter "
       "from the lamps, the camera drifts with the current")


def test_the_issue_rov_reads_its_acquisition_and_gets_no_road_rule(catalogue: Catalogue) -> None:
    """Issue 39: 'vehicle' in 'remotely operated vehicle' is no road; the water, the lamps and the drift are."""
    found = {f.factor: f for f in acquisition.read(ROV)}
    assert {"water", "underwater_vehicle", "turbid_water", "lamps"} <= set(found) and "road_vehicle" not in found
    assert found["underwater_vehicle"].keyword == "remotely operated vehicle"
    req = rules.requirements(ROV, catalogue.names)
    assert [k.name for k in req.kinds] == ["underwater"]
    assert "driving" not in " ".join(req.required.values()) and set(req.required) == {"brightness", "contrast", "gaussian_noise"}
    cfg = plan(ROV, provider="offline", samples=10)
    got = {c.name: c for c in cfg.corruptions}
    # low light, defocus, backscatter (the catalogue's veil: fog) and the water's cast; no road corruptions
    assert {"low_light", "defocus_blur", "fog", "color_shift", "motion_blur", "vignetting"} <= set(got)
    assert not {"rain", "snow", "shadow", "frost", "cloud_overlay"} & set(got)
    assert "remotely operated vehicle" in got["low_light"].reason and "lamps are the only light" in got["low_light"].reason
    assert "murky green water" in got["defocus_blur"].reason
    assert cfg.planner.samples == 1  # deterministic: planned once, not ten identical samples


def test_factor_vetoes_and_severities() -> None:
    # a factor another one rules out: the sunlit street is no evidence under water, a hand holds no fixed camera
    assert "sunlit" not in {f.factor for f in acquisition.read("Underwater cameras along a harbour street.")}
    assert "handheld" not in {f.factor for f in acquisition.read("A fixed camera photographs phones on a test bench.")}
    assert "handheld" in {f.factor for f in acquisition.read("Phones photograph a test bench.")}
    # a TV feed relayed by satellite is no view from orbit
    assert "orbit" not in {f.factor for f in acquisition.read("Tennis recorded from a satellite feed.")}
    assert "orbit" in {f.factor for f in acquisition.read("Satellite images of deserts.")}
    # an implication may narrow the ladder: the flicker of mains lighting is mild
    hits = {h.name: h for h in acquisition.implied("Shelves under fluorescent ceiling lights.")}
    assert hits["row_noise"].severities == (1, 2, 3)
    cfg = plan("Shelves under fluorescent ceiling lights.", provider="offline")
    assert {c.name: c.severities for c in cfg.corruptions}["row_noise"] == [1, 2, 3]


def test_every_rule_factor_is_an_acquisition_factor() -> None:
    factors = set(acquisition.factor_book().factors)
    for name, kind in rules.rule_book().kinds.items():
        assert set(kind.factors) | set(kind.unless_factors) <= factors, name
    for name, cue in cues.cue_book().cues.items():
        assert set(cue.unless_factors) <= factors, name
    assert any(cue.unless_factors for cue in cues.cue_book().cues.values())
    assert {f.category for f in acquisition.factor_book().factors.values()} == set(acquisition.CATEGORIES)


def test_the_benchmark_targets_quick() -> None:
    """benchmarks/planner_agreement.py, quick: the paper's six and every seen set meet issue 39's targets.

    Every held-out set has been seen and tuned on with general imaging facts: the first 60 domains, the
    fourth set (30 written blind in session 5: 70/91 and 3 impossible picks when scored once, blind) and
    the fifth, the dev set (30 written blind in session 6: 77/94 and 2 impossible picks when scored before
    the planner was tuned on it), the sixth (30 held out in session 6, scored once: 63/77 and 4 impossible
    picks), the seventh (30 held out in session 6, scored once after tuning on the sixth: 59/71, no
    impossible pick) and the eighth (30 held out in session 6, scored once after tuning on the seventh:
    68/76, no impossible pick), the ninth (48/67, 1 impossible pick) and the tenth (48/72, 2 impossible
    picks), each held out in session 6 and scored once after the previous set's tuning; the eleventh (58/73,
    1 impossible pick, scored once on the planner as session 6 left it) and the twelfth (57/73, 1 impossible
    pick, scored once part-way through the tuning on the eleventh) and the thirteenth (59/67, 1 impossible
    pick, scored once after the tuning on the eleventh and twelfth), the fourteenth (67/75, 1 impossible
    pick, after the tuning on the thirteenth), the fifteenth (50/65, 4 impossible picks, after the tuning
    on the fourteenth), the sixteenth (66/77, no impossible pick, after the tuning on the fifteenth) and the
    seventeenth (55/66, no impossible pick, after the tuning on the sixteenth), the eighteenth (67/78, no
    impossible pick, after the tuning on the seventeenth), the nineteenth (54/70, 4 impossible picks, after
    the tuning on the eighteenth), the twentieth (59/70, 1 impossible pick, after the tuning on the
    nineteenth) and the twenty-first (55/67, 4 impossible picks, after the tuning on the twentieth), all
    written blind in session 7, and the twenty-second (58/70, 1 impossible pick, written blind in session 7 and
    scored once at the start of session 8) and the twenty-third (67/81, 2 impossible picks, written blind in
    session 8 and scored once after the tuning on the twenty-second) and the twenty-fourth (59/75, 1 impossible
    pick, written blind in session 8 and scored once after the tuning on the twenty-third) and the twenty-sixth
    (61/75, no impossible pick, written blind in session 8 and scored once after the tuning on the twenty-fourth)
    and the twenty-fifth (70/80, 2 impossible picks, engineers' numbers, scored once after the tuning on the
    twenty-sixth and the quantity reader) and the twenty-eighth (62/68, no impossible pick, scored once after
    the tuning on the twenty-fifth), and the twenty-seventh (64/69, no impossible pick, written blind in
    session 8 and scored once at the start of session 9) and the twenty-ninth (61/68, no impossible pick,
    written blind in session 9 and scored once after the tuning on the twenty-seventh) and the thirtieth (70/79,
    1 impossible pick, scored once after the tuning on the twenty-ninth) and the thirty-first (62/70, 1
    impossible pick, scored once after the tuning on the thirtieth) and the thirty-second (69/79, no impossible
    pick, scored once after the tuning on the thirty-first) and the thirty-third (68/71, no impossible pick,
    scored once after the tuning on the thirty-second) and the thirty-fourth (67/79, 2 impossible picks, scored
    once after the tuning on the thirty-third) and the thirty-fifth (65/74, no impossible pick, scored once
    after the tuning on the thirty-fourth), and the thirty-sixth (73/86, no impossible pick, written blind in
    session 9 and scored once at the start of session 10) and the thirty-seventh (56/65, no impossible pick,
    written blind in session 9 and scored once after the tuning on the thirty-sixth) and the thirty-eighth (72/77,
    1 impossible pick, written blind in session 10 and scored once after the tuning on the thirty-seventh) and the
    thirty-ninth (75/84, 2 impossible picks, written blind in session 10 and scored once after the tuning on the
    thirty-eighth) and the fortieth (81/88, no impossible pick, written blind in session 10 and scored once after
    the tuning on the thirty-ninth) and the forty-first (67/79, 1 impossible pick, written blind in session 10 and
    scored once after the tuning on the fortieth) and the forty-second (67/72, 1 impossible pick, written blind in
    session 10 and scored once after the tuning on the forty-first). Each set is held to the targets on its own
    (recall >= 0.85, no impossible pick) and all 1230 together to what session 10 reached (3068 of 3087 found; a
    floor of 3030 leaves room for a general fix that costs a seen domain a choice, never for an impossible pick).
    The forty-third set is held out and never scored here."""
    from benchmarks import planner_agreement as bench

    def offline(text: str) -> set[str]:
        return {c.name for c in plan(text, provider="offline").corruptions}

    paper = bench.score_paper(offline)
    assert paper.mean >= bench.PAPER_JACCARD, paper.jaccard
    # Table 2 lists vertical flips for driving and people; no acquisition turns a road or a face upside down
    assert {k: v for k, v in paper.broken.items() if v} == {"driving": ["missing vertical_flip"], "people": ["missing vertical_flip"]}
    domains = bench.load(bench.NEW_FILE)
    tuned = bench.score_new(offline, heldout=False)
    assert tuned.required == 3087 and tuned.found >= 3030, {k: v for k, v in tuned.missed.items() if v}
    # a photo of the Moon from a garden: the sky is the subject, and nothing in it casts a sun shadow; fog over
    # a sonar image, perspective in a fax, clouds over a cyclist's road, rain for a driving licence held to a webcam
    assert tuned.impossible_picks == 0, {k: v for k, v in tuned.impossible.items() if v}
    sets = bench.by_set(tuned, domains, {k: len(domains[k]["required"]) for k in tuned.missed})
    assert list(sets) == ["written for tuning", "first dozen", "second dozen", "third dozen", "fourth set", "fifth set (dev)",
                          "sixth set", "seventh set", "eighth set", "ninth set", "tenth set", "eleventh set", "twelfth set",
                          "thirteenth set", "fourteenth set", "fifteenth set", "sixteenth set",
                          "seventeenth set", "eighteenth set", "nineteenth set",
                          "twentieth set", "twenty-first set", "twenty-second set", "twenty-third set", "twenty-fourth set", "twenty-fifth set", "twenty-sixth set", "twenty-seventh set", "twenty-eighth set", "twenty-ninth set", "thirtieth set", "thirty-first set", "thirty-second set", "thirty-third set", "thirty-fourth set", "thirty-fifth set", "thirty-sixth set", "thirty-seventh set", "thirty-eighth set", "thirty-ninth set", "fortieth set", "forty-first set", "forty-second set"]
    assert [sets[s][1] for s in sets] == [68, 29, 35, 37, 91, 94, 77, 71, 76, 67, 72, 73, 73, 67, 75, 65, 77, 66, 78, 70, 70, 67, 70, 81, 75, 80, 75, 69, 68, 68, 79, 70, 79, 71, 79, 74, 86, 65, 77, 84, 88, 79, 72]  # required per set: the file's domains, unedited
    for name, (found, required, impossible) in sets.items():
        assert found / required >= bench.NEW_RECALL and impossible == 0, (name, found, required, impossible)
    # the forty-third set, written blind in session 10, is scored once by a session's benchmark runs, never by a test
    held_out = sorted(k[:k.index("_") + 1] for k, d in domains.items() if d["heldout"])
    assert held_out == ["s1043_"] * 30


def test_the_benchmark_names_each_set() -> None:
    """The per-set printout reads a domain's set from its ``seen`` note, and a held-out domain as held out."""
    from benchmarks import planner_agreement as bench

    assert bench.set_of({"heldout": False}) == "written for tuning"
    assert bench.set_of({"heldout": False, "seen": "held out until 2026-11-27; its misses were read then"}) == "first dozen"
    assert bench.set_of({"heldout": False, "seen": "held out (third dozen, written blind) until session 4"}) == "third dozen"
    assert bench.set_of({"heldout": False, "seen": "twenty-fourth set (30 domains), scored once"}) == "twenty-fourth set"
    assert bench.set_of({"heldout": False, "seen": "thirty-first set (30 domains), scored once"}) == "thirty-first set"
    assert bench.set_of({"heldout": False, "seen": "fourth set (30 domains, written blind in session 5 ...)"}) == "fourth set"
    assert bench.set_of({"heldout": False, "seen": "dev set (30 domains, written blind in session 6 as tuning data)"}) == "fifth set (dev)"
    assert bench.set_of({"heldout": True}) == "held out"
    score = bench.NewScore(required=5, found=3, missed={"a": ["x"], "b": ["y"], "c": []}, impossible={"a": [], "b": ["z"], "c": []})
    domains = {"a": {"heldout": False}, "b": {"heldout": False, "seen": "fourth set"}, "c": {"heldout": False}}
    assert bench.by_set(score, domains, {"a": 2, "b": 2, "c": 1}) == {"written for tuning": (2, 3, 0), "fourth set": (1, 2, 1)}


def test_a_portable_xray_scanner_is_no_flatbed() -> None:
    """The product's own example: 'scanners' beside 'X-rays' is a radiography unit, so the flatbed rule
    (which forbids motion blur: the lid holds the page still) must not fire; a page scanner still reads so."""
    from domainbench.planner import rules

    xray = rules.requirements("Chest X-rays from portable scanners in intensive care.", ["motion_blur", "rain"])
    assert "flatbed or sheet-fed scans" not in {k.label for k in xray.kinds}
    page = rules.requirements("Invoices fed through an office scanner.", ["motion_blur", "rain"])
    assert "flatbed or sheet-fed scans" in {k.label for k in page.kinds} and "motion_blur" in page.forbidden


@pytest.mark.parametrize(
    ("text", "factor", "corruption"),
    [
        # a camera that nothing holds level turns the scene's up anywhere
        ("A pill camera tumbles through the gut.", "free_rotation", "rotation"),
        # an analogue radio link tears lines when it is disturbed
        ("Video from a model aircraft comes down an analogue link and breaks up near the trees.", "analogue_link", "row_noise"),
        # a film of droplets on the optics is a veil
        ("A rooftop weather camera with dew on the dome every morning.", "condensation", "fog"),
        ("The lens fogs up when the door opens.", "condensation", "fog"),
        # re-encoding for a stream is lossy
        ("Lectures re-encoded for streaming.", "lossy_transmission", "jpeg_compression"),
    ],
)
def test_general_acquisition_factors(text: str, factor: str, corruption: str) -> None:
    found = {f.factor for f in acquisition.read(text)}
    assert factor in found, found
    assert any(h.name == corruption and h.cue == f"acquisition:{factor}" for h in acquisition.implied(text))


def test_factor_vetoes_in_context() -> None:
    # dew on the leaves is the subject; light that interferes is optics; a phone's front camera is a selfie
    assert "condensation" not in {f.factor for f in acquisition.read("Macro photos of dew on the leaves at dawn.")}
    assert "analogue_link" not in {f.factor for f in acquisition.read("Thin film interference colours on soap bubbles.")}
    assert "forward_view" not in {f.factor for f in acquisition.read("Selfies from a phone's front camera.")}


def test_something_in_the_way_is_an_occluder_but_dirt_on_it_is_not() -> None:
    from domainbench.planner import cues

    def occluder(text: str) -> bool:
        return "occluder" in {h.name for h in cues.find(text)}

    assert occluder("Plates are often dirty or partly covered by tow bars.")
    assert occluder("Fingers often cover part of the page.")
    assert not occluder("The lens is covered by dust after a week.")
    assert not occluder("Fields covered by cloud.")


def test_a_negated_keyword_is_no_evidence() -> None:
    """'usually without a tripod' is a hand-held phone, not a fixed mount (found by the third blind dozen)."""
    from domainbench.planner import cues

    read = lambda t: {f.factor for f in acquisition.read(t)}  # noqa: E731
    assert read("Photos of the Moon taken with phones, usually without a tripod.") == {"handheld", "consumer_camera", "night_sky"}
    assert "fixed_mount" in read("Photos of the Moon taken with phones on a tripod.")
    assert "flash" not in read("Museum rules: no flash.") and "flash" in read("Portraits lit by a flash.")
    # one word may stand between; two ("not only at night") no longer negate
    assert "dim_light" in read("Cameras work not only at night but at dusk too.")
    assert "low_light" not in {h.name for h in cues.find("Never at night.")}
    # the sanity rules read the same way: 'no phones' is no handheld domain
    assert "handheld" not in {k.name for k in rules.detect_kinds("Fixed cameras only, no phones.")}

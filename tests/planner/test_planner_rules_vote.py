"""Sanity rules (data), the majority vote, answer parsing and prompt templates."""

from __future__ import annotations

import itertools
import json
import random
import shutil
import statistics

import pytest

from domainbench.records.config import CorruptionChoice
from domainbench.planner import prompts, rules
from domainbench.planner.catalogue import Catalogue
from domainbench.planner.schema import PlanItem, parse_answer
from domainbench.planner.vote import majority_vote

# -- rules ---------------------------------------------------------------------------------


def test_every_rule_name_is_in_the_catalogue(catalogue: Catalogue) -> None:
    assert rules.rule_book().names() <= set(catalogue.names)


@pytest.mark.parametrize(
    ("text", "kinds"),
    [
        ("chest X-rays from the ICU", ["medical", "radiology", "monochrome"]),
        ("Xray images", ["medical", "radiology", "monochrome"]),
        ("dashcam clips", ["driving"]),
        ("dash cam clips", ["driving"]),
        ("dash-cam clips", ["driving"]),
        ("cardiac MRI", ["medical", "radiology", "monochrome"]),  # "car" must not match inside "cardiac"
        ("aerial photos of solar farms from a survey aircraft", ["aerial"]),
        ("aerial drone photos of solar farms", []),  # a drone flies below the clouds: no cloud cover to require
        ("selfies taken with a smartphone", ["faces", "handheld"]),
        ("receipts and invoices", ["documents"]),
        ("a greenhouse monitoring camera", []),
        ("Röntgenbilder aus der Klinik", ["medical", "radiology"]),
        ("radiographie thoracique à l'hôpital", ["medical", "radiology", "monochrome"]),
        # the kinds fire on acquisition factors read in context, never on a bare word (issue 39)
        ("Underwater inspection of ship hulls by a remotely operated vehicle: murky green water, strong "
         "backscatter from the lamps, the camera drifts with the current", ["underwater"]),
        ("Autonomous underwater vehicle surveys of the deep seafloor, lit only by the vehicle's strobes.", ["underwater"]),
        ("Night-vision CCTV in an underground car park", ["indoors", "monochrome"]),  # under a roof: no weather
        ("Live television coverage of a tennis match, recorded off air from a satellite feed.", []),
        ("Satellite images of farmland", ["aerial", "satellite"]),
        ("Satellite and aerial imaging of farmland", ["aerial"]),  # aircraft blur: not orbit alone
        ("Dash-cam video of cars on the motorway", ["driving"]),
        ("High-speed cameras film golf swings on a driving range.", []),  # a range, not a road
    ],
)
def test_kind_detection(text: str, kinds: list[str]) -> None:
    assert [k.name for k in rules.detect_kinds(text)] == kinds


def test_requirements_and_violations(catalogue: Catalogue) -> None:
    req = rules.requirements("X-rays of the chest", catalogue.names)
    assert set(req.required) == {"brightness", "contrast", "gaussian_noise"}
    assert {"rain", "snow", "fog", "cloud_overlay"} <= set(req.forbidden)
    v = rules.violations(req, ["brightness", "rain", "gaussian_noise"])
    assert v == [
        "'rain' is implausible for medical imaging (the description mentions 'X-rays'); remove it",
        "'contrast' is required for every domain; add it",
    ]
    assert rules.check("chest X-rays", ["brightness", "contrast", "gaussian_noise"], catalogue.names) == []


def test_forbidden_wins_over_required(catalogue: Catalogue) -> None:
    # aerial requires cloud_overlay, manufacturing forbids it
    req = rules.requirements("helicopter inspection of a factory roof", catalogue.names)
    assert {k.name for k in req.kinds} == {"aerial", "manufacturing"}
    assert "cloud_overlay" in req.forbidden and "cloud_overlay" not in req.required


def test_rules_ignore_names_missing_from_the_catalogue() -> None:
    req = rules.requirements("chest X-rays", ["brightness", "rain"])
    assert set(req.required) == {"brightness"} and set(req.forbidden) == {"rain"}


# -- majority vote ---------------------------------------------------------------------------


def C(name: str, sev: list[int], params: dict | None = None, reason: str = "") -> CorruptionChoice:
    return CorruptionChoice(name=name, severities=sev, params=params or {}, reason=reason or f"r-{name}-{sev}")


def test_vote_hand_worked() -> None:
    names = ["a", "b", "c", "d"]
    samples = [
        [C("a", [1, 2]), C("b", [3]), C("c", [1], {"x": 1})],
        [C("a", [2, 3]), C("b", [3, 4]), C("c", [2], {"x": 1})],
        [C("a", [2]), C("c", [5], {"x": 2})],
        [C("a", [1, 2, 3]), C("b", [4])],
    ]
    v = majority_vote(samples, names)
    assert v.frequencies == {"a": 1.0, "b": 0.75, "c": 0.75, "d": 0.0}
    got = {c.name: c for c in v.chosen}
    assert set(got) == {"a", "b", "c"}  # b and c: 3/4 > 1/2
    assert got["a"].severities == [2]  # level 2 in 4/4; 1 and 3 in 2/4 (not > half)
    assert got["a"].reason == "r-a-[2]"  # the sample whose severities equal the vote
    assert got["b"].severities == [3, 4]  # each proposed by 2 of the 3 samples choosing b
    # no level has > half of c's 3 votes -> median_low of (1, 2, 5); params {"x": 1} have 2/3
    assert got["c"].params == {"x": 1} and got["c"].severities == [2]
    assert got["c"].reason == "r-c-[2]"


def test_vote_matches_brute_force() -> None:
    rng = random.Random(3)
    names = [f"n{i}" for i in range(6)]
    for _ in range(200):
        n = rng.randint(1, 7)
        samples = []
        for _ in range(n):
            picks = [nm for nm in names if rng.random() < 0.5]
            samples.append([C(nm, sorted(rng.sample(range(1, 6), rng.randint(1, 3)))) for nm in picks])
        v = majority_vote(samples, names)
        for nm in names:
            k = sum(any(c.name == nm for c in s) for s in samples)
            assert v.frequencies[nm] == pytest.approx(k / n)
            chosen = next((c for c in v.chosen if c.name == nm), None)
            assert (chosen is not None) == (k > n / 2)
            if chosen is not None:
                proposals = [c.severities for s in samples for c in s if c.name == nm]
                levels = [lv for lv in range(1, 6) if sum(lv in p for p in proposals) > k / 2]
                if not levels:
                    levels = [statistics.median_low(sorted(itertools.chain(*proposals)))]
                assert chosen.severities == levels


def test_vote_rejects_unknown_names_and_empty() -> None:
    with pytest.raises(ValueError, match="not in the catalogue"):
        majority_vote([[C("zzz", [1])]], ["a"])
    with pytest.raises(ValueError, match="at least one"):
        majority_vote([], ["a"])


# -- parsing ------------------------------------------------------------------------------------


def item(name: str, sev: list, **kw) -> dict:
    return {"name": name, "severities": sev, "reason": "because", **kw}


def test_parse_accepts_fences_prose_and_bare_lists(catalogue: Catalogue) -> None:
    body = json.dumps({"corruptions": [item("rain", [1, 2])]})
    for raw in (body, f"```json\n{body}\n```", f"Here you go:\n{body}\nHope it helps!", json.dumps([item("rain", [1, 2])])):
        p = parse_answer(raw, catalogue)
        assert p.ok and [c.name for c in p.choices] == ["rain"], raw


def test_parse_collects_every_problem(catalogue: Catalogue) -> None:
    raw = json.dumps(
        {
            "corruptions": [
                item("Motion Blur", [1]),
                item("teleport", [1]),
                item("rain", [True]),
                item("rain", [2]),
                item("rain", [3]),
                item("gaussian_noise", [2], params={"sigma": -1}),
                item("shot_noise", [2], params={"bogus": 1}),
                {"name": "fog", "severities": [1]},
            ]
        }
    )
    p = parse_answer(raw, catalogue)
    text = "\n".join(p.problems)
    assert "write the name exactly as listed: 'motion_blur'" in text
    assert "unknown corruption 'teleport'" in text
    assert "corruptions[2].severities[0]" in text  # booleans are not severities
    assert "'rain' is listed twice" in text
    assert "'sigma'" in text and "'bogus'" in text
    assert "corruptions[7].reason" in text
    assert [c.name for c in p.choices] == ["rain"]


@pytest.mark.parametrize("raw", [None, "", "   ", "[1, 2", '{"plan": []}', '"just a string"'])
def test_parse_rejects_non_plans(raw, catalogue: Catalogue) -> None:
    assert not parse_answer(raw, catalogue).ok


# -- prompts ------------------------------------------------------------------------------------


def test_schema_file_agrees_with_the_validator() -> None:
    schema = prompts.output_schema()
    items = schema["properties"]["corruptions"]["items"]
    sev = items["properties"]["severities"]
    assert set(items["required"]) == {n for n, f in PlanItem.model_fields.items() if f.is_required()}
    assert (sev["items"]["minimum"], sev["items"]["maximum"]) == (1, 5)
    assert set(items["properties"]) == set(PlanItem.model_fields)


def test_catalogue_rendering(catalogue: Catalogue) -> None:
    text = prompts.render_catalogue(catalogue)
    lines = text.splitlines()
    assert len(lines) == len(catalogue.entries)
    for line, e in zip(lines, catalogue.entries, strict=True):
        family = f"{e.family}, temporal: video clips only" if e.temporal else e.family  # clip-only entries are marked
        assert line.startswith(f"- {e.name} ({family}): {e.description.strip()}")
        assert all(s.strip() in line for s in e.situations)
        for key, spec in e.parameters.items():
            assert key in line
            if spec.get("min") is not None:
                assert f"in [{spec['min']:g}," in line


def test_prompt_version_tracks_template_content(tmp_path, monkeypatch, repo_prompts) -> None:
    v0 = prompts.prompt_version()
    shutil.copytree(repo_prompts, tmp_path / "prompts")
    monkeypatch.setenv("DOMAINBENCH_PROMPTS_DIR", str(tmp_path / "prompts"))
    assert prompts.prompt_version() == v0  # same content, same version
    other = tmp_path / "other"
    shutil.copytree(repo_prompts, other)
    (other / "planner" / "system.txt").write_text("You are a different expert.\n")
    monkeypatch.setenv("DOMAINBENCH_PROMPTS_DIR", str(other))
    assert prompts.prompt_version() != v0
    assert prompts.system_message() == "You are a different expert."
    (other / "planner" / "repair.txt").unlink()
    prompts._load.cache_clear()
    with pytest.raises(ValueError, match="repair.txt"):
        prompts.prompt_version()
    prompts._load.cache_clear()


# -- physics: what a corruption needs of the scene ------------------------------------------------

FPV = ("First-person-view drone racing video is sent over an analogue 5.8 GHz link and re-encoded for "
       "streaming; the picture breaks up with interference at the far end of the track.")


@pytest.mark.parametrize(
    ("text", "refused"),
    [
        # a racing drone looks ahead, not down: no clouds below it, and no aerial kind
        (FPV, True),
        ("Photos of cats and dogs sent in by pet owners.", True),
        ("Shelves of a supermarket photographed every hour.", True),
        # a drone flies below the cloud base: looking down, no cloud lies between it and the ground
        ("Drone surveys of vineyards flown at midday.", True),
        # seen from above an aircraft's altitude, or with the sky in view, clouds can hide the scene
        ("Aerial surveys of vineyards from a light aircraft.", False),
        ("Satellite images of farmland.", False),
        ("A webcam on a mountain hut watches the valley.", False),
        ("An all-sky camera records meteors at night.", False),
        ("Street cameras on a cloudy day.", False),
    ],
)
def test_cloud_overlay_needs_an_overhead_view_or_the_sky(text: str, refused: bool, catalogue: Catalogue) -> None:
    req = rules.requirements(text, catalogue.names)
    assert ("cloud_overlay" in req.forbidden) is refused, req.forbidden.get("cloud_overlay")
    if refused:
        # said as physics, in the form every planner's repair and --explain quote
        assert req.forbidden["cloud_overlay"] == (
            "a scene that shows no overhead view or the sky in view (clouds hide the ground only when it is "
            "seen from above, and otherwise only the sky behind the scene)")
        assert "cloud_overlay" not in req.required


def test_radar_sees_through_clouds(catalogue: Catalogue) -> None:
    """A SAR image from orbit shows no cloud: images of echoes (sonar, ultrasound, radar) forbid cloud cover,
    whatever the sky above them."""
    for text in ("Satellite SAR images of sea ice in the Arctic.",
                 "Radar backscatter maps, used because the rainy season keeps the optical scenes cloudy."):
        req = rules.requirements(text, catalogue.names)
        assert req.forbidden.get("cloud_overlay", "").startswith("images formed by sound or radio echoes"), req.forbidden
    # the same sky over a camera's pictures can cloud them
    assert "cloud_overlay" not in rules.requirements("Satellite images of farmland.", catalogue.names).forbidden


def test_a_drone_is_no_aerial_kind_but_a_survey_aircraft_is() -> None:
    assert "aerial" not in {k.name for k in rules.detect_kinds(FPV)}
    assert "aerial" not in {k.name for k in rules.detect_kinds("Drone surveys of vineyards flown at midday.")}
    assert "aerial" in {k.name for k in rules.detect_kinds("Aerial surveys of vineyards from a light aircraft.")}


def test_a_need_without_evidence_is_rejected_at_load(tmp_path) -> None:
    bad = tmp_path / "rules.toml"
    bad.write_text('version = 1\n[needs.cloud_overlay]\nneeds = "sky"\nbecause = "physics"\n', encoding="utf-8")
    with pytest.raises(Exception, match="needs keywords or factors"):
        rules.rule_book(bad)

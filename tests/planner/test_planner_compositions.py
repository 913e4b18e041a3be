"""Planned compositions: the offline planner stacks the factors one sentence names, the LLM planner may answer
up to three with reasons, and the sanity rules apply to every step of either."""

from __future__ import annotations

import json

import pytest
from planner_fakes import FakeLLM, Reply

from domainbench.records.config import Composition, CompositionStep, load_domain, save
from domainbench.planner import compositions, plan, prompts, rules
from domainbench.planner.catalogue import Catalogue
from domainbench.planner.cues import Hit
from domainbench.planner.schema import parse_answer

MEDICAL = "Chest X-rays from portable scanners in an intensive care unit."
GREENHOUSE = "Images from a greenhouse monitoring camera."
NIGHT_RAIN = "Dash-cam footage of night driving in heavy rain, the car moving fast."
BASE = [{"name": n, "severities": [1, 2], "reason": f"{n} happens here."} for n in ("brightness", "contrast", "gaussian_noise")]
FAST = {"timeout": 5.0, "max_retries": 0}


def comp(name: str, *steps: tuple[str, int], reason: str = "they happen together") -> dict:
    return {"name": name, "steps": [{"corruption": c, "severity": s} for c, s in steps], "reason": reason}


def reply(*comps: dict, corruptions: list[dict] = BASE) -> Reply:
    return Reply(content=json.dumps({"corruptions": corruptions, "compositions": list(comps)}))


def llm_plan(fake: FakeLLM, text: str = GREENHOUSE, samples: int = 1):
    return plan(text, provider="openai", samples=samples, base_url=fake.base_url, api_key="sk-test-key-000", **FAST)


# --------------------------------------------------------------------------- offline


def _hit(cue: str, name: str, keyword: str, start: int) -> Hit:
    return Hit(cue, name, f"{cue} does it", keyword, keyword, start)


def test_propose_stacks_the_factors_of_one_sentence(catalogue: Catalogue) -> None:
    text = "Night driving in rain. Parked in daylight."
    hits = {"low_light": _hit("low_light", "low_light", "night", 0), "iso_noise": _hit("low_light", "iso_noise", "night", 0),
            "rain": _hit("rain", "rain", "rain", 17),
            "rotation": _hit("acquisition:moving_platform", "rotation", "driving", 6),  # geometric: not stacked
            "shadow": _hit("shadows", "shadow", "daylight", 33)}  # another sentence: another situation
    got = compositions.propose(text, hits, list(hits), catalogue)
    assert len(got) == 1
    c = got[0]
    # the scene first, then the sensor (noise after the light level); each step at severity 2
    assert c.pairs == [("rain", 2), ("low_light", 2), ("iso_noise", 2)] and c.name == "night + rain"
    assert "'night' (low_light does it)" in c.reason and "'rain' (rain does it)" in c.reason
    # only chosen corruptions are stacked; one factor alone is no composition
    assert compositions.propose(text, hits, ["low_light", "iso_noise", "shadow"], catalogue) == []


def test_propose_gives_at_most_three_and_each_stack_once(catalogue: Catalogue) -> None:
    sentences = ["Night in rain.", "Rain at night.", "Fog and noise.", "Snow with blur.", "Frost and jpeg."]
    pairs = [("low_light", "rain"), ("rain", "low_light"), ("fog", "gaussian_noise"), ("snow", "motion_blur"),
             ("frost", "jpeg_compression")]
    text, hits, at = "", {}, 0
    for s, (a, b) in zip(sentences, pairs):
        for name in (a, b):
            hits.setdefault(name, _hit(name, name, name, at))
        text += s + " "
        at = len(text)
    got = compositions.propose(text, hits, list(hits), catalogue)
    assert [sorted(c.pairs) for c in got] == [[("low_light", 2), ("rain", 2)], [("fog", 2), ("gaussian_noise", 2)],
                                               [("motion_blur", 2), ("snow", 2)]]


def test_the_offline_planner_proposes_night_rain(tmp_path) -> None:
    cfg = plan(NIGHT_RAIN, provider="offline", samples=3)
    assert len(cfg.compositions) == 1 and cfg.schema_version == 2
    c = cfg.compositions[0]
    # rain also lands on the lens (acquisition: lens contamination), so the stack holds its drops too
    assert c.pairs == [("rain", 2), ("lens_spatter", 2), ("motion_blur", 2), ("low_light", 2), ("iso_noise", 2)]
    assert {"'night'", "'rain'", "'moving'"} <= set(c.reason.replace("(", " ").split())
    assert {s.corruption for s in c.steps} <= {x.name for x in cfg.corruptions}
    assert load_domain(save(cfg, tmp_path / "p.toml")) == cfg
    # a description naming one factor gets none, and its plan stays schema version 1
    plain = plan("Product photos taken in a studio.", provider="offline", samples=1)
    assert plain.compositions == [] and plain.schema_version == 1


# --------------------------------------------------------------------------- rules on steps


def test_sanity_rules_apply_to_every_step(catalogue: Catalogue) -> None:
    req = rules.requirements(MEDICAL, catalogue.names)
    assert "rain" in req.forbidden and "fog" in req.forbidden
    c = Composition(name="wet", steps=[CompositionStep(corruption=n, severity=2) for n in ("rain", "fog", "gaussian_noise")])
    ok = Composition(name="dim", steps=[CompositionStep(corruption=n, severity=2) for n in ("brightness", "gaussian_noise")])
    half = Composition(name="half", steps=[CompositionStep(corruption=n, severity=3) for n in ("rain", "contrast", "gaussian_noise")])
    v = compositions.violations(req, [c, ok, half])
    assert len(v) == 3 and all("implausible" in x for x in v) and "composition 'wet': step 'rain'" in v[0]
    # a forbidden step is dropped; a composition left with one step is dropped whole
    assert [(x.name, x.pairs) for x in compositions.enforce([c, ok, half], req)] == [
        ("dim", [("brightness", 2), ("gaussian_noise", 2)]), ("half", [("contrast", 3), ("gaussian_noise", 3)])]


@pytest.mark.parametrize(("items", "needle"), [
    ([comp("a", ("brightness", 1), ("contrst", 2))], "unknown corruption 'contrst'"),
    ([comp("a", ("brightness", 1))], "at least 2"),
    ([comp("a", ("brightness", 9), ("contrast", 2))], "less than or equal to 5"),
    ([comp("a", ("brightness", "3"), ("contrast", 2))], "valid integer"),
    ([comp("a", ("brightness", 1), ("brightness", 2))], "appears twice"),
    ([comp("a", ("brightness", 1), ("contrast", 2)), comp("a", ("fog", 1), ("contrast", 2))], "used twice"),
    ([comp(f"c{i}", ("brightness", 1), ("contrast", 2)) for i in range(4)], "at most 3"),
    ({"name": "x"}, "must be an array"),
])
def test_bad_compositions_are_named_for_the_repair(catalogue: Catalogue, items: object, needle: str) -> None:
    parsed = parse_answer(json.dumps({"corruptions": BASE, "compositions": items}), catalogue)
    assert not parsed.ok and any(needle in p for p in parsed.problems), parsed.problems


def test_vote_keeps_what_most_samples_stack() -> None:
    def c(name: str, *steps: tuple[str, int]) -> Composition:
        return Composition(name=name, reason=f"{name} reason", steps=[CompositionStep(corruption=a, severity=s) for a, s in steps])

    samples = [[c("night rain", ("low_light", 3), ("rain", 2))], [c("dark wet", ("low_light", 4), ("rain", 1))],
               [c("night rain", ("low_light", 2), ("rain", 2)), c("fog", ("fog", 1), ("contrast", 1))]]
    got = compositions.vote(samples, 3)
    assert [(x.name, x.pairs, x.reason) for x in got] == [("night rain", [("low_light", 3), ("rain", 2)], "night rain reason")]
    # the same steps in the same order count as one composition, whatever each sample named it
    assert len(compositions.vote(samples, 5)) == 1  # 3 of 5 valid samples: more than half
    assert compositions.vote(samples, 6) == []  # 3 of 6 is not


# --------------------------------------------------------------------------- LLM planner (local fake server)


def test_the_prompt_offers_compositions(fake_llm: FakeLLM) -> None:
    fake_llm.script = lambda req, n: reply()
    cfg = llm_plan(fake_llm)
    assert cfg.compositions == [] and cfg.schema_version == 1
    user = fake_llm.requests[0]["messages"][1]["content"]
    assert '"compositions"' in user and "up to 3" in user
    assert prompts.output_schema()["properties"]["compositions"]["maxItems"] == compositions.MAX_COMPOSITIONS


def test_llm_compositions_become_plan_cells(fake_llm: FakeLLM, tmp_path) -> None:
    night = comp("night rain", ("low_light", 3), ("rain", 2), ("motion_blur", 2), reason="night driving in rain")
    fake_llm.script = lambda req, n: reply(night)
    cfg = llm_plan(fake_llm, text="Greenhouse camera at night, watered by sprinklers.", samples=3)
    assert [(c.cell_name, c.pairs, c.reason) for c in cfg.compositions] == [
        ("compose:night rain", [("low_light", 3), ("rain", 2), ("motion_blur", 2)], "night driving in rain")]
    assert cfg.schema_version == 2 and cfg.planner.violations == []
    assert load_domain(save(cfg, tmp_path / "p.toml")) == cfg


def test_a_bad_step_is_repaired_once(fake_llm: FakeLLM) -> None:
    def script(req, n):
        steps = ("low_light", 3), ("rian", 2) if n == 0 else ("rain", 2)
        return reply(comp("night rain", *steps))

    fake_llm.script = script
    cfg = llm_plan(fake_llm)
    assert cfg.compositions[0].pairs == [("low_light", 3), ("rain", 2)] and len(fake_llm.requests) == 2
    repair = fake_llm.requests[1]["messages"][-1]["content"]
    assert "compositions[0].steps[1]: unknown corruption 'rian'" in repair and "'rain'" in repair


def test_a_forbidden_step_is_repaired_then_removed(fake_llm: FakeLLM) -> None:
    # an X-ray has no weather: the model keeps a rain step after the repair, so the step is removed
    # (the rest of the composition stays) and the provenance says so
    fake_llm.script = lambda req, n: reply(comp("ward", ("rain", 2), ("contrast", 2), ("gaussian_noise", 3)),
                                           comp("wet", ("rain", 1), ("fog", 2), ("contrast", 1)))
    cfg = llm_plan(fake_llm, text=MEDICAL)
    assert len(fake_llm.requests) == 2
    repair = fake_llm.requests[1]["messages"][-1]["content"]
    assert "composition 'ward': step 'rain' is implausible for" in repair
    assert [(c.name, c.pairs) for c in cfg.compositions] == [("ward", [("contrast", 2), ("gaussian_noise", 3)])]
    assert any("composition 'ward': step 'rain'" in v and "corrected" in v for v in cfg.planner.violations)
    assert all(s.corruption not in rules.requirements(MEDICAL, [s.corruption]).forbidden
               for c in cfg.compositions for s in c.steps)


def test_compositions_are_voted_over_samples(fake_llm: FakeLLM) -> None:
    def script(req, n):
        if n < 2:
            return reply(comp("night rain", ("low_light", 2 + n), ("rain", 2)))
        return reply(comp("fog", ("fog", 1), ("contrast", 1)))

    fake_llm.script = script
    cfg = llm_plan(fake_llm, samples=3)
    assert [(c.name, c.pairs) for c in cfg.compositions] == [("night rain", [("low_light", 2), ("rain", 2)])]

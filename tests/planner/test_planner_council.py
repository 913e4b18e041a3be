"""Several LLMs voting (issue 39, Deliver 4): --provider repeatable, per-LLM plans, a majority vote
across them, who chose what and their pairwise Jaccard in the plan's notes; tested against local fake
endpoints that answer differently, one of which fails."""

from __future__ import annotations

import pytest
from planner_fakes import FakeLLM, Reply, answer

from domainbench.errors import UserInputError
from domainbench.planner import PlannerError, plan
from domainbench.planner.council import jaccard, parse_member
from domainbench.planner.settings import LLMSettings
from tests.cli_runner import run_cli

TEXT = "Studio photos of shoes for an online catalogue."
BASE = ("brightness", [1, 2, 3]), ("contrast", [1, 2]), ("gaussian_noise", [1, 2, 3])
PICKS = {
    "a": [("motion_blur", [1, 2]), ("rotation", [1, 2])],
    "b": [("motion_blur", [1, 2]), ("jpeg_compression", [2, 3])],
    "c": [("motion_blur", [2, 3]), ("rotation", [1]), ("pixelate", [1])],
}


@pytest.fixture
def fakes():
    servers = {k: FakeLLM() for k in (*PICKS, "down")}
    for k, srv in servers.items():
        if k == "down":
            srv.script = lambda req, n: Reply(status=500, body={"error": {"message": "overloaded", "type": "server"}})
        else:
            srv.script = (lambda picks: lambda req, n: Reply(content=answer(*BASE, *picks)))(PICKS[k])
    yield servers
    for srv in servers.values():
        srv.close()


def settings() -> LLMSettings:
    return LLMSettings(api_key="sk-test-key-000", timeout=5.0, max_retries=0)


def test_three_llms_vote_and_the_failing_one_is_left_out(fakes: dict[str, FakeLLM]) -> None:
    specs = [f"openai:model-{k}@{fakes[k].base_url}" for k in ("a", "b", "c", "down")]
    cfg = plan(TEXT, provider=specs, samples=2, llm=settings())
    got = {c.name: c for c in cfg.corruptions}
    # motion blur 3/3 and rotation 2/3 are chosen; jpeg and pixelate (1/3 each) are not
    assert set(got) == {"brightness", "contrast", "gaussian_noise", "motion_blur", "rotation"}
    assert got["motion_blur"].severities == [1, 2]  # levels 1 and 2 have 2 of 3 votes, 3 has 1
    assert "chosen by 3/3 planners" in got["motion_blur"].reason and "chosen by 2/3 planners" in got["rotation"].reason
    p = cfg.planner
    assert p.provider == "council" and p.frequencies["rotation"] == round(2 / 3, 4)
    assert p.frequencies["jpeg_compression"] == round(1 / 3, 4) and p.samples == 6
    labels = {k: f"model-{k}@{fakes[k].base_url}" for k in fakes}
    assert all(labels[k] in p.model for k in PICKS) and labels["down"] not in p.model
    notes = p.violations
    sets = {k: {"brightness", "contrast", "gaussian_noise", *(n for n, _ in PICKS[k])} for k in PICKS}
    for a, b in (("a", "b"), ("a", "c"), ("b", "c")):
        assert f"agreement {labels[a]} vs {labels[b]}: Jaccard {jaccard(sets[a], sets[b]):.2f}" in notes
    assert f"agreement {labels['a']} vs {labels['b']}: Jaccard 0.67" in notes  # 4 shared of 6, by hand
    assert f"{labels['c']} chose: brightness, contrast, gaussian_noise, motion_blur, pixelate, rotation" in notes
    down = next(n for n in notes if n.startswith(labels["down"] + " left out of the vote"))
    assert "HTTP 500" in down and "sk-test-key-000" not in " ".join(notes)
    assert len(fakes["down"].requests) == 2 and len(fakes["a"].requests) == 2  # each sampled --samples times


def test_the_offline_planner_votes_with_an_llm_and_none_answering_fails(fakes: dict[str, FakeLLM]) -> None:
    cfg = plan(TEXT, provider=["offline", f"openai:model-a@{fakes['a'].base_url}"], samples=1, llm=settings())
    assert cfg.planner.provider == "council" and any(n.startswith("offline chose:") for n in cfg.planner.violations)
    with pytest.raises(PlannerError, match="no planner answered"):
        plan(TEXT, provider=[f"openai:m@{fakes['down'].base_url}"], samples=1, llm=settings())


def test_bad_provider_values() -> None:
    base = settings()
    for spec, says in (("openai:", "the model is missing"), ("offline:x", "only openai takes a model"),
                       ("openai:m@localhost:1/v1", "must start with http"), ("ofline", "did you mean")):
        with pytest.raises(UserInputError, match=says):
            parse_member(spec, base)
    with pytest.raises(UserInputError, match="the same planner twice"):
        plan(TEXT, provider=["offline", "offline"], samples=1, llm=base)


def test_repeated_provider_on_the_command_line(home, fakes: dict[str, FakeLLM], capsys, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    monkeypatch.setenv("DOMAINBENCH_LLM_API_KEY", "sk-test-key-000")
    monkeypatch.setenv("DOMAINBENCH_LLM_MAX_RETRIES", "0")
    args = ["plan", TEXT, "--samples", "1"]
    for k in ("a", "b", "down"):
        args += ["--provider", f"openai:model-{k}@{fakes[k].base_url}"]
    code, out, err = run_cli(args, capsys, monkeypatch)
    assert code == 0, err
    assert "agreement model-a@" in err and "Jaccard 0.67" in err and "left out of the vote" in err
    # two of two that answered: motion_blur (both) is in, rotation and jpeg (one each) are not
    assert 'name = "motion_blur"' in out and 'name = "rotation"' not in out and 'name = "jpeg_compression"' not in out


def test_an_endpoint_answering_invalid_plans_is_left_out(fakes: dict[str, FakeLLM]) -> None:
    fakes["down"].script = lambda req, n: Reply(content="I would rather not answer in JSON.")
    specs = [f"openai:model-a@{fakes['a'].base_url}", f"openai:model-b@{fakes['b'].base_url}",
             f"openai:bad@{fakes['down'].base_url}"]
    cfg = plan(TEXT, provider=specs, samples=1, llm=settings())
    notes = cfg.planner.violations
    bad = next(n for n in notes if n.startswith("bad@"))
    assert "left out of the vote" in bad and "usable plan in only 0 of 1 samples" in bad
    assert len(fakes["down"].requests) == 2  # the answer and its one repair
    # two planners left: a corruption needs both (more than half)
    assert {c.name for c in cfg.corruptions} == {"brightness", "contrast", "gaussian_noise", "motion_blur"}

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

from domainbench.config import DomainConfig
from domainbench.planner import acquisition, plan, rules
from domainbench.planner.catalogue import Catalogue
from domainbench.planner.rules import keyword_pattern

HERE = Path(__file__).parent
OURS: dict[str, dict] = tomllib.loads((HERE / "acquisition_domains.toml").read_text(encoding="utf-8"))
PAPER: dict[str, dict] = tomllib.loads((HERE / "paper_domains.toml").read_text(encoding="utf-8"))
EXPERT: dict[str, dict] = tomllib.loads((HERE / "expert_domains.toml").read_text(encoding="utf-8"))
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
    """Every keyword that fires in a paper domain's text also fires in one of our own or the expert domains."""
    others = [d["text"] for d in OURS.values()] + [d["text"] for d in EXPERT.values()]
    for name, factor in acquisition.factor_book().factors.items():
        for keyword in factor.keywords:
            pattern = keyword_pattern([keyword])
            if any(pattern.search(d["text"]) for d in PAPER.values()):
                assert any(pattern.search(t) for t in others), f"{name}: {keyword!r} fires only in the paper's domains"

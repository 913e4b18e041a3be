"""Tied groups: the compact letter display agrees with the pairwise Holm results, both ways."""

from __future__ import annotations

from itertools import combinations

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domainbench.metrics.comparison import compare_models
from domainbench.metrics.letters import compact_letters, letter_columns, tied_groups
from domainbench.metrics.outcomes import ImageOutcomes


def _shares(a: str, b: str) -> bool:
    return bool(set(a) & set(b))


@st.composite
def significance(draw: st.DrawFn) -> tuple[list[str], set[tuple[str, str]]]:
    n = draw(st.integers(1, 9))
    models = [f"m{k}" for k in range(n)]
    pairs = list(combinations(models, 2))
    flags = draw(st.lists(st.booleans(), min_size=len(pairs), max_size=len(pairs)))
    return models, {p for p, f in zip(pairs, flags, strict=True) if f}


@settings(max_examples=300, deadline=None)
@given(significance())
def test_letters_agree_with_every_pair_both_ways(case: tuple[list[str], set[tuple[str, str]]]) -> None:
    models, significant = case
    letters = compact_letters(models, sorted(significant))
    for a, b in combinations(models, 2):
        # a significant pair shares no letter; a pair sharing no letter is significant
        assert _shares(letters[a], letters[b]) == ((a, b) not in significant), (a, b, letters)
    assert all(letters[m] for m in models)
    # the letters are exactly the maximal sets of mutually not-different models (networkx's maximal cliques)
    graph = nx.Graph([(a, b) for a, b in combinations(models, 2) if (a, b) not in significant])
    graph.add_nodes_from(models)
    assert {frozenset(c) for c in nx.find_cliques(graph)} == set(letter_columns(models, sorted(significant)))


def test_piepho_s_worked_shape_and_letter_order() -> None:
    # A > C, A > D, B > D (the rest tie): groups {A, B}, {B, C}, {C, D}; the best model's group is "a"
    models = ["A", "B", "C", "D"]
    letters = compact_letters(models, [("A", "C"), ("A", "D"), ("B", "D")], {"A": 0.9, "B": 0.8, "C": 0.7, "D": 0.6})
    assert letters == {"A": "a", "B": "ab", "C": "bc", "D": "c"}
    assert compact_letters(models, []) == dict.fromkeys(models, "a")  # nothing told apart: one group
    everything = compact_letters(models, list(combinations(models, 2)), {"A": 0.1, "B": 0.2, "C": 0.3, "D": 0.4})
    assert everything == {"D": "a", "C": "b", "B": "c", "A": "d"}  # all apart: one letter each, best first
    with pytest.raises(ValueError, match="outside"):
        compact_letters(models, [("A", "Z")])


def test_groups_of_a_comparison_follow_its_holm_verdicts() -> None:
    rng = np.random.default_rng(3)
    n = 400
    labels = rng.integers(0, 4, n)
    # three models: "good" right 90 %, "also" 88 % (indistinguishable from it at this n), "bad" 50 %
    truth = {"good": 0.9, "also": 0.88, "bad": 0.5}
    preds = {}
    for m, p in truth.items():
        for cell in (("clean", 0), ("fog", 3)):
            right = rng.random(n) < p
            preds[(m, *cell)] = np.where(right, labels, (labels + 1) % 4)
    c = compare_models(ImageOutcomes(indices=np.arange(n), labels=labels, preds=preds))
    groups = tied_groups(c)
    for v in c.verdicts:
        assert _shares(groups.letters[v.model_a], groups.letters[v.model_b]) == (v.winner is None)
    assert groups.models[-1] == "bad" and groups.letters["bad"] == "b"
    assert groups.letters["good"] == groups.letters["also"] == "a"
    assert groups.sentence().startswith("tied groups: a: ")

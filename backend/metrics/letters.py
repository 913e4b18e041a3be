"""Tied groups: which models the data can tell apart, as a compact letter display.

Models that share a letter are not significantly different by the verdict's rule (``metrics.comparison``: the
paired test of balanced accuracy over the corrupted cells, Holm-adjusted over the model pairs); two models that
share no letter are. The letters are made by Piepho's insert-and-absorb algorithm (Piepho 2004, "An algorithm for
a letter-based representation of all-pairwise comparisons", J. Comput. Graph. Stat. 13(2)): start with one letter
for all models; for each significant pair, split every letter that holds both into two, one without each model
(insert), then drop every letter whose models are all within another letter (absorb). What remains are the
maximal sets of models no two of which differ significantly, so the display is exact both ways. Letters are
given in the order of each group's best model (by mean corrupted balanced accuracy), so the best model has "a".
"""

from __future__ import annotations

import string
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

#: the letters, in order; beyond 52 groups a letter gets a number (a1, b1, ...)
ALPHABET = string.ascii_lowercase + string.ascii_uppercase
GROUP_NOTE = "models sharing a letter are not significantly different: the verdicts' test, Holm-adjusted p ≥"


def _letter(k: int) -> str:
    return ALPHABET[k % len(ALPHABET)] + (str(k // len(ALPHABET)) if k >= len(ALPHABET) else "")


def letter_columns(models: Sequence[str], significant: Iterable[tuple[str, str]]) -> list[frozenset[str]]:
    """Piepho's insert-and-absorb: the letters as sets of models (unordered)."""
    names = list(dict.fromkeys(models))
    known = set(names)
    columns: list[frozenset[str]] = [frozenset(names)] if names else []
    for a, b in significant:
        if a not in known or b not in known:
            raise ValueError(f"significant pair ({a!r}, {b!r}) names a model outside {names}")
        if a == b:
            continue
        inserted: list[frozenset[str]] = []
        for col in columns:
            if a in col and b in col:
                inserted += [col - {a}, col - {b}]
            else:
                inserted.append(col)
        # absorb: a column inside another says nothing the larger one does not (duplicates kept once)
        unique = list(dict.fromkeys(inserted))
        columns = [c for c in unique if not any(c < other for other in unique)]
    return columns


def compact_letters(models: Sequence[str], significant: Iterable[tuple[str, str]],
                    score: Mapping[str, float] | None = None) -> dict[str, str]:
    """Model -> its letters (``"ab"``), from the significantly different pairs. ``score`` orders the letters:
    the group holding the best-scoring model gets ``a`` (default: the order of ``models``)."""
    names = list(dict.fromkeys(models))
    order = names if score is None else sorted(names, key=lambda m: (-score[m], names.index(m)))
    rank = {m: k for k, m in enumerate(order)}
    columns = letter_columns(names, significant)
    columns.sort(key=lambda c: sorted(rank[m] for m in c))
    return {m: "".join(_letter(k) for k, c in enumerate(columns) if m in c) for m in names}


class TiedGroups(BaseModel):
    """The compact letter display of one comparison: per model its letters, best model first."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: models, best first (by mean corrupted balanced accuracy over the pairs it is in)
    models: list[str]
    letters: dict[str, str]
    accuracy: dict[str, float]
    confidence: float

    def sentence(self) -> str:
        """``tied groups: a: A, B · b: B, C (models sharing a letter ...)`` in one line."""
        letters = sorted({ch for v in self.letters.values() for ch in _split(v)}, key=_order)
        parts = [f"{x}: {', '.join(m for m in self.models if x in _split(self.letters[m]))}" for x in letters]
        return f"tied groups: {' · '.join(parts)} ({GROUP_NOTE} {1 - self.confidence:.3g})"


def _split(letters: str) -> list[str]:
    """``"ab1c"`` -> ``["a", "b1", "c"]``: a letter and the number after it."""
    out: list[str] = []
    for ch in letters:
        if ch.isdigit() and out:
            out[-1] += ch
        else:
            out.append(ch)
    return out


def _order(letter: str) -> tuple[int, int]:
    return (int(letter[1:]) if len(letter) > 1 else 0, ALPHABET.index(letter[0]))


def tied_groups(comparison: Any) -> TiedGroups:
    """The groups of a ``metrics.comparison.Comparison``'s models (``Comparison.groups``): a pair is significantly
    different when its verdict has a winner."""
    acc: dict[str, list[float]] = {}
    significant = []
    for v in comparison.verdicts:
        acc.setdefault(v.model_a, []).append(v.accuracy_a)
        acc.setdefault(v.model_b, []).append(v.accuracy_b)
        if v.winner is not None:
            significant.append((v.model_a, v.model_b))
    mean = {m: sum(xs) / len(xs) for m, xs in acc.items()}
    models = sorted(mean, key=lambda m: (-mean[m], m))
    return TiedGroups(models=models, letters=compact_letters(models, significant, mean), accuracy=mean,
                      confidence=comparison.confidence)

"""Free-form answers to classes: exact match after normalisation, then the class named in the answer."""

from __future__ import annotations

import numpy as np
import pytest

from domainbench.engine.scoring import confusion
from domainbench.models.generative import UNPARSED, normalise, parse_answer

CLASSES = ["T-shirt/top", "Trouser", "Ankle boot", "Boot", "Bag", "Café"]


@pytest.mark.parametrize(("answer", "expected"), [
    ("Trouser", 1),
    ("trouser.", 1),  # case and punctuation
    ("  TROUSER!  ", 1),
    ("t shirt top", 0),  # punctuation inside a name becomes a space on both sides
    ("T-shirt/top", 0),
    ("It is an ankle boot.", 2),  # the longest class named wins over "boot"
    ("A boot, I think", 3),
    ("a bag, no, a boot", 3),  # the longer name
    ("cafe or boot?", 5),  # equal lengths: the earliest mention
    ("cafe", 5),  # accents folded
    ("baggage", UNPARSED),  # whole words only
    ("I cannot tell", UNPARSED),
    ("", UNPARSED),
])
def test_parse_answer(answer: str, expected: int) -> None:
    assert parse_answer(answer, CLASSES) == expected


def test_normalise() -> None:
    assert normalise("  Ankle-Boot!\n") == "ankle boot"
    assert normalise("Ça va") == "ca va"


def test_unparsed_answers_count_wrong_in_the_confusion() -> None:
    labels = np.array([0, 1, 2, 2])
    preds = np.array([0, UNPARSED, 2, UNPARSED])
    cm = confusion(labels, preds, 3)
    assert cm.correct().tolist() == [1, 0, 1]  # per class: the unparsed answers are not correct
    assert cm.support().tolist() == [1, 1, 2]  # and every image is counted in its true class
    np.testing.assert_array_equal(np.diag(cm.dense()), [1, 0, 1])

"""VQA scoring against hand-worked answers and a transcription of the official VQAv2 evaluation loop."""

from __future__ import annotations

import random
import re

import numpy as np
import pytest

from domainbench.metrics.vqa import (
    CONTRACTIONS,
    answer_flips,
    is_unanswered,
    normalize_answer,
    score_vqa,
    vqa_accuracy,
)


class OfficialVQAEval:
    """vqaEval.py's processPunctuation / processDigitArticle and its per-question accuracy, statement by
    statement (the official loop normalises only the answer; references here go through the same two steps,
    which is what the module does with the user's unnormalised references)."""

    manual_map = {"none": "0", "zero": "0", "one": "1", "two": "2", "three": "3", "four": "4", "five": "5",
                  "six": "6", "seven": "7", "eight": "8", "nine": "9", "ten": "10"}
    articles = ["a", "an", "the"]
    period_strip = re.compile(r"(?!<=\d)(\.)(?!\d)")
    comma_strip = re.compile(r"(\d)(\,)(\d)")
    punct = [";", r"/", "[", "]", '"', "{", "}", "(", ")", "=", "+", "\\", "_", "-", ">", "<", "@", "`", ",", "?", "!"]

    def process_punctuation(self, in_text: str) -> str:
        out_text = in_text
        for p in self.punct:
            if (p + " " in in_text or " " + p in in_text) or (re.search(self.comma_strip, in_text) is not None):
                out_text = out_text.replace(p, "")
            else:
                out_text = out_text.replace(p, " ")
        out_text = self.period_strip.sub("", out_text, re.UNICODE)
        return out_text

    def process_digit_article(self, in_text: str) -> str:
        out_text = []
        for word in in_text.lower().split():
            word = self.manual_map.setdefault(word, word)
            if word not in self.articles:
                out_text.append(word)
        for word_id, word in enumerate(out_text):
            if word in CONTRACTIONS:
                out_text[word_id] = CONTRACTIONS[word]
        return " ".join(out_text)

    def normalise(self, ans: str) -> str:
        ans = ans.replace("\n", " ").replace("\t", " ").strip()
        return self.process_digit_article(self.process_punctuation(ans))

    def accuracy(self, res: str, gts: list[str]) -> float:
        res_ans = self.normalise(res)
        answers = [{"answer": self.normalise(g), "id": i} for i, g in enumerate(gts)]
        gt_acc = []
        for datum in answers:
            other = [item for item in answers if item != datum]
            matching = [item for item in other if item["answer"] == res_ans]
            gt_acc.append(min(1, float(len(matching)) / 3))
        return float(sum(gt_acc)) / len(gt_acc)


OFFICIAL = OfficialVQAEval()

HAND_WORKED = [
    ("Yes", "yes"),
    ("  Two dogs.\n", "2 dogs"),
    ("The cat", "cat"),
    ("an apple, a pear", "apple pear"),  # ", " touches a space: the comma is deleted
    ("red,blue", "red blue"),  # a comma between letters becomes a space
    ("1,000", "1000"),  # a thousands comma: every listed mark is deleted
    ("3.5", "3.5"),  # a period before a digit stays
    ("a.m.", "am"),
    ("dont know", "don't know"),
    ("It's", "it's"),  # the apostrophe is not on the list
    ("T-shirt/top", "t shirt top"),
    ("none", "0"),
    ("...", ""),
    ("?!", ""),
    ("Ten", "10"),
    ("eleven", "eleven"),
]


@pytest.mark.parametrize(("answer", "expected"), HAND_WORKED)
def test_normalisation_by_hand(answer: str, expected: str) -> None:
    assert normalize_answer(answer) == expected == OFFICIAL.normalise(answer)


def test_normalisation_equals_the_official_steps_on_random_answers() -> None:
    rng = random.Random(0)
    pieces = ["a", "the", "an", "one", "Two", "ten", "dont", "Im", "youre", "3", "1,5", ".", ",", "-", "/", "!", "?",
              ":", "'", "(", ")", "cat", "Dog", "\n", "\t", " ", "  ", "2.5", "x.y", "[", "_", "@", "none", "whats"]
    for _ in range(3000):
        text = "".join(rng.choice(pieces) + rng.choice(["", " "]) for _ in range(rng.randint(0, 8)))
        assert normalize_answer(text) == OFFICIAL.normalise(text), repr(text)
    many = ". " * 40  # more than 32 periods: the script's count argument stops at 32
    assert normalize_answer("x" + many) == OFFICIAL.normalise("x" + many)


def test_vqa_accuracy_leave_one_out_with_ten_references() -> None:
    refs = ["2"] * 3 + ["two"] + ["3"] * 6  # four references say 2 once normalised
    # held out one of the four "2": 3 matches left -> 1; held out a "3": 4 -> 1; so 1.0
    assert vqa_accuracy("Two", refs) == 1.0
    refs = ["2"] * 3 + ["3"] * 7
    # held out a "2" (3 of 10): 2 matches -> 2/3; held out a "3": 3 -> 1; mean = (3 * 2/3 + 7) / 10
    assert vqa_accuracy("2", refs) == pytest.approx((3 * 2 / 3 + 7) / 10)
    refs = ["2"] + ["3"] * 9
    assert vqa_accuracy("2", refs) == pytest.approx((1 * 0 + 9 * (1 / 3)) / 10)
    assert vqa_accuracy("5", refs) == 0.0
    rng = random.Random(1)
    words = ["yes", "no", "Yes.", "2", "two", "a dog", "dog", "cat"]
    for _ in range(500):
        gts = [rng.choice(words) for _ in range(10)]
        res = rng.choice(words)
        assert vqa_accuracy(res, gts) == pytest.approx(OFFICIAL.accuracy(res, gts))


def test_exact_match_without_ten_references_and_unanswered() -> None:
    assert vqa_accuracy("A Shoe!", ["shoe", "boot"]) == 1.0
    assert vqa_accuracy("sandal", ["shoe", "boot"]) == 0.0
    assert vqa_accuracy("2", ["2"] * 3) == 1.0  # three references: exact match, not min(3/3, 1) by accident
    assert np.isnan(vqa_accuracy("x", []))
    for empty in ("", "   ", "...", "?!", ":", "'", None):
        assert is_unanswered(empty) and vqa_accuracy(empty, ["yes"]) == 0.0
    assert not is_unanswered("0") and not is_unanswered("none")


def test_rates_and_flips() -> None:
    answers = ["Yes", "no.", "", "Bag", "The coat"]
    clean = ["yes", "yes", "...", "bag", "shirt"]
    refs = [["yes"], ["yes"] * 10, ["no"], None, ["Coat", "jacket"]]
    s = score_vqa(answers, refs, yes_no=[True, True, True, False, False],
                  multiple_choice=[False, False, False, False, True], clean_answers=clean)
    np.testing.assert_array_equal(s.accuracy, [1.0, 0.0, 0.0, np.nan, 1.0])
    assert s.vqa_accuracy == pytest.approx(2 / 4) and s.yes_no_accuracy == pytest.approx(1 / 3)
    assert s.mc_accuracy == 1.0 and s.unanswered_rate == pytest.approx(1 / 5)
    # no.≠yes, ""≡"..." (both unanswered), coat≠shirt
    assert s.flipped.tolist() == [False, True, False, False, True] and s.answer_flip_rate == pytest.approx(2 / 5)  # type: ignore[union-attr]
    assert s.normalised == ["yes", "no", "", "bag", "coat"]
    only_flips = score_vqa(["a"], [None], [False], [False], clean_answers=["b"])
    assert only_flips.vqa_accuracy is None and only_flips.answer_flip_rate == 1.0
    assert score_vqa(["a"], [None], [False], [False]).answer_flip_rate is None
    assert answer_flips(["Two"], ["2"]).tolist() == [False]
    with pytest.raises(ValueError, match="one clean answer per answer"):
        answer_flips(["a"], [])

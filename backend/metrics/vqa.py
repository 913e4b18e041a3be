"""VQA scoring: the VQAv2 answer normalisation, VQA accuracy, and the label-free answer flip rate.

:func:`normalize_answer` follows the official VQAv2 evaluation script (``vqaEval.py``,
github.com/GT-Vision-Lab/VQA, ``processPunctuation`` then ``processDigitArticle``) rule for rule,
including its quirks, so a number here is the number that script gives:

- ``\\n`` and ``\\t`` become spaces and the answer is stripped;
- each punctuation mark of its list is deleted when it touches a space or when the answer holds a
  thousands comma (``1,000``), and replaced by a space otherwise; ``:`` and ``'`` are not on the list;
- a period is deleted unless a digit follows it (the script's look-behind is mistyped, ``(?!<=\\d)``, so only
  the look-ahead acts: ``3.5`` keeps its period, ``a.m.`` loses both);
- lower case; number words zero..ten (and ``none``) to digits; articles a, an, the dropped;
  contractions written without an apostrophe get it back (``dont`` -> ``don't``).

VQA accuracy of an answer against references: with 10 references (VQAv2), the mean over the 10
leave-one-out subsets of 9 of min(#matches / 3, 1); with any other number, 1 when the normalised answer
equals a normalised reference and 0 otherwise. Unlike the script, which assumes the annotation file's
answers are already normalised and only strips their punctuation, the user's references get the full
normalisation: "Two" and "2" are the same answer.

An answer that normalises to nothing with a letter or digit in it (empty, only punctuation, or a failed
generation given as ``None``) is *unanswered*: wrong against every reference, counted in
``unanswered_rate``, and compared as the empty answer for flips.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

# the tables of vqaEval.py (data, kept as the script spells them; the capitalised keys never match
# lower-cased words there either)
CONTRACTIONS = {
    "aint": "ain't", "arent": "aren't", "cant": "can't", "couldve": "could've", "couldnt": "couldn't",
    "couldn'tve": "couldn't've", "couldnt've": "couldn't've", "didnt": "didn't", "doesnt": "doesn't", "dont": "don't",
    "hadnt": "hadn't", "hadnt've": "hadn't've", "hadn'tve": "hadn't've", "hasnt": "hasn't", "havent": "haven't",
    "hed": "he'd", "hed've": "he'd've", "he'dve": "he'd've", "hes": "he's", "howd": "how'd", "howll": "how'll",
    "hows": "how's", "Id've": "I'd've", "I'dve": "I'd've", "Im": "I'm", "Ive": "I've", "isnt": "isn't", "itd": "it'd",
    "itd've": "it'd've", "it'dve": "it'd've", "itll": "it'll", "let's": "let's", "maam": "ma'am", "mightnt": "mightn't",
    "mightnt've": "mightn't've", "mightn'tve": "mightn't've", "mightve": "might've", "mustnt": "mustn't",
    "mustve": "must've", "neednt": "needn't", "notve": "not've", "oclock": "o'clock", "oughtnt": "oughtn't",
    "ow's'at": "'ow's'at", "'ows'at": "'ow's'at", "'ow'sat": "'ow's'at", "shant": "shan't", "shed've": "she'd've",
    "she'dve": "she'd've", "she's": "she's", "shouldve": "should've", "shouldnt": "shouldn't",
    "shouldnt've": "shouldn't've", "shouldn'tve": "shouldn't've", "somebody'd": "somebodyd",
    "somebodyd've": "somebody'd've", "somebody'dve": "somebody'd've", "somebodyll": "somebody'll",
    "somebodys": "somebody's", "someoned": "someone'd", "someoned've": "someone'd've", "someone'dve": "someone'd've",
    "someonell": "someone'll", "someones": "someone's", "somethingd": "something'd",
    "somethingd've": "something'd've", "something'dve": "something'd've", "somethingll": "something'll",
    "thats": "that's", "thered": "there'd", "thered've": "there'd've", "there'dve": "there'd've",
    "therere": "there're", "theres": "there's", "theyd": "they'd", "theyd've": "they'd've", "they'dve": "they'd've",
    "theyll": "they'll", "theyre": "they're", "theyve": "they've", "twas": "'twas", "wasnt": "wasn't",
    "wed've": "we'd've", "we'dve": "we'd've", "weve": "we've", "werent": "weren't", "whatll": "what'll",
    "whatre": "what're", "whats": "what's", "whatve": "what've", "whens": "when's", "whered": "where'd",
    "wheres": "where's", "whereve": "where've", "whod": "who'd", "whod've": "who'd've", "who'dve": "who'd've",
    "wholl": "who'll", "whos": "who's", "whove": "who've", "whyll": "why'll", "whyre": "why're", "whys": "why's",
    "wont": "won't", "wouldve": "would've", "wouldnt": "wouldn't", "wouldnt've": "wouldn't've",
    "wouldn'tve": "wouldn't've", "yall": "y'all", "yall'll": "y'all'll", "y'allll": "y'all'll",
    "yall'd've": "y'all'd've", "y'alld've": "y'all'd've", "y'all'dve": "y'all'd've", "youd": "you'd",
    "youd've": "you'd've", "you'dve": "you'd've", "youll": "you'll", "youre": "you're", "youve": "you've",
}
NUMBER_WORDS = {"none": "0", "zero": "0", "one": "1", "two": "2", "three": "3", "four": "4", "five": "5", "six": "6",
                "seven": "7", "eight": "8", "nine": "9", "ten": "10"}
ARTICLES = frozenset({"a", "an", "the"})
PUNCTUATION = (";", "/", "[", "]", '"', "{", "}", "(", ")", "=", "+", "\\", "_", "-", ">", "<", "@", "`", ",", "?", "!")
_PERIOD = re.compile(r"(?!<=\d)(\.)(?!\d)")
_THOUSANDS_COMMA = re.compile(r"(\d)(,)(\d)")
#: VQAv2's references per question; with this many, accuracy averages the leave-one-out subsets
VQA_REFERENCES = 10


def _punctuation(text: str) -> str:
    out = text
    comma = _THOUSANDS_COMMA.search(text) is not None
    for p in PUNCTUATION:
        # the script tests the input, not the text as it is being rewritten
        out = out.replace(p, "") if (p + " " in text or " " + p in text or comma) else out.replace(p, " ")
    # the script passes re.UNICODE (32) where sub() takes its count: at most 32 periods go
    return _PERIOD.sub("", out, count=32)


def _digits_articles(text: str) -> str:
    words = [NUMBER_WORDS.get(w, w) for w in text.lower().split()]
    return " ".join(CONTRACTIONS.get(w, w) for w in words if w not in ARTICLES)


def normalize_answer(answer: str | None) -> str:
    """The VQAv2 evaluation script's normal form of an answer ("" for ``None``)."""
    if answer is None:
        return ""
    text = answer.replace("\n", " ").replace("\t", " ").strip()
    return _digits_articles(_punctuation(text))


def is_unanswered(answer: str | None) -> bool:
    """True for a missing answer or one without a letter or digit once normalised (never scored right)."""
    return not any(ch.isalnum() for ch in normalize_answer(answer))


def vqa_accuracy(answer: str | None, references: Sequence[str]) -> float:
    """VQA accuracy of one answer (module docstring); nan without references."""
    if not references:
        return float("nan")
    if is_unanswered(answer):
        return 0.0
    a = normalize_answer(answer)
    match = np.array([normalize_answer(r) == a for r in references], dtype=np.int64)
    if match.size == VQA_REFERENCES:
        others = match.sum() - match  # matches among the 9 references left when each one is held out
        return float(np.minimum(others / 3.0, 1.0).mean())
    return float(match.any())


@dataclass(frozen=True)
class VQAScores:
    """Per-question outcomes of one model on one cell; rates are means over the questions they concern."""

    accuracy: np.ndarray  # float, nan where the question has no references
    yes_no: np.ndarray  # bool: a yes/no question
    multiple_choice: np.ndarray  # bool: a question with choices
    unanswered: np.ndarray  # bool
    flipped: np.ndarray | None  # bool against the model's clean answers; None on the clean cell itself
    normalised: list[str]

    def _mean(self, mask: np.ndarray) -> float | None:
        values = self.accuracy[mask & ~np.isnan(self.accuracy)]
        return float(values.mean()) if values.size else None

    @property
    def vqa_accuracy(self) -> float | None:
        return self._mean(np.ones(self.accuracy.size, bool))

    @property
    def yes_no_accuracy(self) -> float | None:
        return self._mean(self.yes_no)

    @property
    def mc_accuracy(self) -> float | None:
        return self._mean(self.multiple_choice)

    @property
    def unanswered_rate(self) -> float | None:
        return float(self.unanswered.mean()) if self.unanswered.size else None

    @property
    def answer_flip_rate(self) -> float | None:
        if self.flipped is None or not self.flipped.size:
            return None
        return float(self.flipped.mean())


def answer_flips(answers: Sequence[str | None], clean_answers: Sequence[str | None]) -> np.ndarray:
    """Per question: does the normalised answer differ from the same model's normalised clean answer?

    Label-free: no reference is read. Two unanswered answers are the same (empty) answer.
    """
    if len(answers) != len(clean_answers):
        raise ValueError(f"need one clean answer per answer, got {len(clean_answers)} for {len(answers)}")
    return np.array([_compared(a) != _compared(c) for a, c in zip(answers, clean_answers)], dtype=bool)


def _compared(answer: str | None) -> str:
    return "" if is_unanswered(answer) else normalize_answer(answer)


def score_vqa(answers: Sequence[str | None], references: Sequence[Sequence[str] | None], yes_no: Sequence[bool],
              multiple_choice: Sequence[bool], clean_answers: Sequence[str | None] | None = None) -> VQAScores:
    """Score one model's answers to a manifest's questions (``clean_answers``: its answers on the clean cell)."""
    n = len(answers)
    if not len(references) == len(yes_no) == len(multiple_choice) == n:
        raise ValueError("answers, references, yes_no and multiple_choice need one entry per question")
    return VQAScores(
        accuracy=np.array([vqa_accuracy(a, r or ()) for a, r in zip(answers, references)], dtype=float),
        yes_no=np.asarray(yes_no, dtype=bool).reshape(n),
        multiple_choice=np.asarray(multiple_choice, dtype=bool).reshape(n),
        unanswered=np.array([is_unanswered(a) for a in answers], dtype=bool),
        flipped=None if clean_answers is None else answer_flips(answers, clean_answers),
        normalised=[normalize_answer(a) for a in answers],
    )


__all__ = [
    "VQAScores",
    "answer_flips",
    "is_unanswered",
    "normalize_answer",
    "score_vqa",
    "vqa_accuracy",
]

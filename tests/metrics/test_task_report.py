"""VQA and retrieval export rows: values, the interval each number gets, and Holm-corrected paired tests."""

from __future__ import annotations

import numpy as np
import pytest
from tests.oracles.score_interval import wilson_cc_by_root

from domainbench.metrics.retrieval import score_retrieval
from domainbench.metrics.task_report import (
    RETRIEVAL_COLUMNS,
    VQA_COLUMNS,
    paired_tests,
    retrieval_outcomes,
    retrieval_row,
    vqa_outcomes,
    vqa_row,
)
from domainbench.metrics.vqa import score_vqa
from domainbench.stats.clustered import clustered_interval, paired_p_value
from domainbench.stats.paired import holm

IMAGES = np.array([0, 0, 1, 1, 2, 2, 3, 3])  # two questions per image
REFS = [["yes"], ["bag"], ["no"], ["coat"], ["yes"], ["shirt"], ["no"], None]
YES_NO = [True, False] * 4
MC = [False, True, False, False, False, True, False, False]


def _scores(answers: list[str], clean: list[str] | None = None):  # type: ignore[no-untyped-def]
    return score_vqa(answers, REFS, YES_NO, MC, clean_answers=clean)


def test_vqa_row_values_and_intervals() -> None:
    clean = ["yes", "bag", "no", "coat", "no", "shirt", "no", "dress"]
    s = _scores(["yes", "bag", "yes", "", "no", "shirt", "no", "dress"], clean)
    row = vqa_row("m", "gaussian_noise", 3, s, IMAGES, resamples=1000)
    assert tuple(row) == VQA_COLUMNS
    assert row["images"] == 4 and row["questions"] == 8
    assert row["vqa_accuracy"] == pytest.approx(4 / 7)  # 7 questions have references: right on 0, 1, 5, 6
    assert row["yes_no_accuracy"] == pytest.approx(2 / 4) and row["mc_accuracy"] == 1.0
    assert row["answer_flip_rate"] == pytest.approx(2 / 8) and row["unanswered_rate"] == pytest.approx(1 / 8)
    # several questions per image: the clustered bootstrap, with the questions without references left out
    keep = ~np.isnan(s.accuracy)
    expected = clustered_interval(s.accuracy[keep], IMAGES[keep], resamples=1000)
    assert (row["vqa_accuracy_ci_low"], row["vqa_accuracy_ci_high"]) == pytest.approx(expected)
    assert row["vqa_accuracy_ci_low"] <= row["vqa_accuracy"] <= row["vqa_accuracy_ci_high"]
    clean_row = vqa_row("m", "clean", 0, _scores(clean), IMAGES, resamples=1000)
    assert clean_row["answer_flip_rate"] is None and clean_row["answer_flip_rate_ci_low"] is None  # n/a, not 0
    no_refs = score_vqa(["a", "b"], [None, None], [False, False], [False, False], clean_answers=["a", "c"])
    r = vqa_row("m", "blur", 1, no_refs, np.array([0, 1]))
    assert r["vqa_accuracy"] is None and r["answer_flip_rate"] == 0.5
    # one binary outcome per image: the continuity-corrected Wilson of every proportion (issue 34)
    assert (r["answer_flip_rate_ci_low"], r["answer_flip_rate_ci_high"]) == pytest.approx(wilson_cc_by_root(1, 2), abs=1e-9)


def test_retrieval_row() -> None:
    rng = np.random.default_rng(0)
    images = rng.normal(size=(10, 8)).astype(np.float32)
    caption_image = np.repeat(np.arange(10), 2)
    captions = (images[caption_image] + 1.5 * rng.normal(size=(20, 8))).astype(np.float32)
    clean = score_retrieval(images, captions, caption_image)
    noisy = score_retrieval(images + rng.normal(size=images.shape).astype(np.float32), captions, caption_image)
    row = retrieval_row("m", "blur", 2, noisy, clean, resamples=1000)
    assert tuple(row) == RETRIEVAL_COLUMNS and row["images"] == 10 and row["captions"] == 20
    for name, value in noisy.recalls().items():
        assert row[name] == pytest.approx(value)
    k = int(round(row["text_retrieval_recall@1"] * 10))
    assert (row["text_retrieval_recall@1_ci_low"], row["text_retrieval_recall@1_ci_high"]) == pytest.approx(
        wilson_cc_by_root(k, 10), abs=1e-9)
    hits = (noisy.caption_ranks < 1).astype(float)
    assert (row["image_retrieval_recall@1_ci_low"], row["image_retrieval_recall@1_ci_high"]) == pytest.approx(
        clustered_interval(hits, caption_image, resamples=1000))
    assert row["top1_change_rate"] == pytest.approx(noisy.top1_change_rate(clean))
    assert retrieval_row("m", "clean", 0, clean, None)["top1_change_rate"] is None


def test_paired_tests_are_holm_corrected_over_cells_and_pairs() -> None:
    clean = ["yes", "bag", "no", "coat", "yes", "shirt", "no", "dress"]
    answers = {
        "a": [clean, ["yes", "bag", "no", "coat", "yes", "shirt", "no", "x"]],
        "b": [["no", "bag", "yes", "coat", "no", "shirt", "yes", "y"], ["no", "x", "yes", "y", "no", "z", "yes", "w"]],
        "c": [clean, ["yes", "bag", "yes", "coat", "no", "shirt", "no", "x"]],
    }
    outcomes = {(m, corr, sev): vqa_outcomes(_scores(ans[i], clean), IMAGES)
                for m, ans in answers.items() for i, (corr, sev) in enumerate([("blur", 1), ("blur", 2)])}
    rows = paired_tests(outcomes, "vqa_accuracy")
    assert len(rows) == 6 and {(r["a"], r["b"]) for r in rows} == {("a", "b"), ("a", "c"), ("b", "c")}
    raw = []
    for r in rows:
        va, ca = outcomes[(r["a"], r["corruption"], r["severity"])]["vqa_accuracy"]
        vb, _ = outcomes[(r["b"], r["corruption"], r["severity"])]["vqa_accuracy"]
        assert r["p"] == pytest.approx(paired_p_value(va, vb, ca)) and r["difference"] == pytest.approx(va.mean() - vb.mean())
        raw.append(r["p"])
    assert [r["p_holm"] for r in rows] == pytest.approx(holm(raw))
    flips = paired_tests(outcomes, "answer_flip_rate")
    assert len(flips) == 6 and all(0 <= r["p"] <= 1 for r in flips)


def test_retrieval_outcomes_pair_by_query() -> None:
    rng = np.random.default_rng(1)
    images = rng.normal(size=(6, 4)).astype(np.float32)
    ci = np.arange(6)
    s = score_retrieval(images, images + 0.1, ci)
    out = retrieval_outcomes(s, s)
    assert out["top1_change_rate"][0].sum() == 0 and out["top1_change_rate"][1].tolist() == list(ci) * 2

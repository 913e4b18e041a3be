"""domainbench.metrics.classification against scikit-learn, scipy, brute-force loops and a hand-worked example."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy.stats import pearsonr
from sklearn.metrics import balanced_accuracy_score, recall_score

from domainbench.errors import UserInputError
from domainbench.metrics.classification import (
    DEGRADATION_EPS,
    MetricInputError,
    balanced_accuracy,
    ce_per_corruption,
    fr_per_corruption,
    label_flip_probability,
    mce,
    mfr,
    pearson_acc_lfp,
    per_class_recall,
    rce,
    rce_per_corruption,
)


def labels_from_confusion(conf: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Expand a confusion matrix into the (y_true, y_pred) pairs it counts."""
    c = conf.shape[0]
    true = np.repeat(np.repeat(np.arange(c), c), conf.ravel())
    pred = np.repeat(np.tile(np.arange(c), c), conf.ravel())
    return true, pred


def random_confusion(rng: np.random.Generator) -> np.ndarray:
    c = int(rng.integers(1, 7))
    conf = rng.integers(0, 6, size=(c, c))
    # empty rows (class absent from y_true) and empty columns (class never predicted)
    if c > 1 and rng.random() < 0.5:
        conf[rng.integers(c), :] = 0
    if c > 1 and rng.random() < 0.5:
        conf[:, rng.integers(c)] = 0
    if conf.sum() == 0:
        conf[rng.integers(c), rng.integers(c)] = 1
    return conf


# --------------------------------------------------------------------------- balanced accuracy


def test_balanced_accuracy_matches_sklearn_on_random_confusions():
    rng = np.random.default_rng(0)
    n_with_empty = 0
    for _ in range(300):
        conf = random_confusion(rng)
        n_with_empty += int((conf.sum(axis=1) == 0).any() or (conf.sum(axis=0) == 0).any())
        y_true, y_pred = labels_from_confusion(conf)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # sklearn warns about classes absent from y_true
            expected = balanced_accuracy_score(y_true, y_pred)
        assert balanced_accuracy(conf) == pytest.approx(expected, abs=1e-12)
    assert n_with_empty > 50  # the empty-row/column cases were really exercised


def test_balanced_accuracy_hand_worked():
    # class 0: 3 of 4 right (0.75); class 1: 0 of 2 right (never predicted, recall 0);
    # class 2: absent from y_true -> left out of the mean. (0.75 + 0) / 2 = 0.375
    conf = np.array([[3, 0, 1], [2, 0, 0], [0, 0, 0]])
    assert balanced_accuracy(conf) == pytest.approx(0.375)
    # plain accuracy would be 3/6 = 0.5: balanced accuracy weights classes, not images
    assert balanced_accuracy(conf) != pytest.approx(np.trace(conf) / conf.sum())


def test_per_class_recall_matches_sklearn():
    rng = np.random.default_rng(1)
    for _ in range(100):
        conf = random_confusion(rng)
        y_true, y_pred = labels_from_confusion(conf)
        labels = np.arange(conf.shape[0])
        expected = recall_score(y_true, y_pred, labels=labels, average=None, zero_division=np.nan)
        np.testing.assert_allclose(per_class_recall(conf), expected, atol=1e-12, equal_nan=True)


@pytest.mark.parametrize(
    "bad, match",
    [
        (np.zeros((3, 3)), "no images"),
        (np.array([[1, 2, 3]]), "square"),
        (np.zeros((0, 0)), "square"),
        (np.array([[1, -1], [0, 2]]), "negative"),
        (np.array([[1, np.nan], [0, 2]]), "NaN"),
    ],
)
def test_balanced_accuracy_rejects_bad_confusion(bad, match):
    with pytest.raises(MetricInputError, match=match):
        balanced_accuracy(bad)


def test_metric_errors_are_user_input_errors():
    assert issubclass(MetricInputError, UserInputError)
    assert issubclass(MetricInputError, ValueError)


# --------------------------------------------------------------------------- label flips


def test_label_flip_probability_brute_force():
    rng = np.random.default_rng(2)
    for _ in range(50):
        n = int(rng.integers(1, 40))
        clean = rng.integers(0, 4, n)
        corrupted = np.where(rng.random(n) < 0.3, rng.integers(0, 4, n), clean)
        flips = sum(1 for a, b in zip(clean, corrupted) if a != b)
        assert label_flip_probability(int(np.sum(clean != corrupted)), n) == flips / n


@pytest.mark.parametrize("flips, n", [(1, 0), (5, 4), (-1, 3), (1.5, 3), (True, 3)])
def test_label_flip_probability_rejects_bad_counts(flips, n):
    with pytest.raises(MetricInputError):
        label_flip_probability(flips, n)


# --------------------------------------------------------------------------- mCE / rCE / mFR

ERR = np.array([[0.2, 0.4], [0.3, 0.5]])
BASE_ERR = np.array([[0.1, 0.3], [0.4, 0.4]])


def test_mce_hand_worked():
    # CE_0 = (0.2 + 0.4) / (0.1 + 0.3) = 0.6 / 0.4 = 1.5
    # CE_1 = (0.3 + 0.5) / (0.4 + 0.4) = 0.8 / 0.8 = 1.0
    # mCE  = (1.5 + 1.0) / 2 = 1.25
    assert ce_per_corruption(ERR, BASE_ERR) == pytest.approx([1.5, 1.0])
    assert mce(ERR, BASE_ERR) == pytest.approx(1.25)


def test_rce_hand_worked():
    # E^f_clean = 0.1, E^base_clean = 0.05
    # rCE_0 = ((0.2-0.1) + (0.4-0.1)) / ((0.1-0.05) + (0.3-0.05)) = 0.4 / 0.3 = 4/3
    # rCE_1 = ((0.3-0.1) + (0.5-0.1)) / ((0.4-0.05) + (0.4-0.05)) = 0.6 / 0.7 = 6/7
    # rCE   = (4/3 + 6/7) / 2 = (28/21 + 18/21) / 2 = 23/21
    assert rce_per_corruption(ERR, 0.1, BASE_ERR, 0.05) == pytest.approx([4 / 3, 6 / 7])
    assert rce(ERR, 0.1, BASE_ERR, 0.05) == pytest.approx(23 / 21)


def test_mfr_hand_worked():
    # FR_0 = (0.1 + 0.3) / (0.2 + 0.2) = 1.0 ; FR_1 = (0.2 + 0.2) / (0.1 + 0.1) = 2.0
    # mFR = (1.0 + 2.0) / 2 = 1.5
    lfp = np.array([[0.1, 0.3], [0.2, 0.2]])
    base = np.array([[0.2, 0.2], [0.1, 0.1]])
    assert fr_per_corruption(lfp, base) == pytest.approx([1.0, 2.0])
    assert mfr(lfp, base) == pytest.approx(1.5)


def _brute_ratio_mean(num_rows, den_rows):
    terms = []
    for num, den in zip(num_rows, den_rows):
        n_sum = 0.0
        d_sum = 0.0
        for a in num:
            n_sum += a
        for b in den:
            d_sum += b
        if d_sum > DEGRADATION_EPS:
            terms.append(n_sum / d_sum)
    return sum(terms) / len(terms) if terms else None


def test_relative_metrics_match_brute_force_loops():
    rng = np.random.default_rng(3)
    for _ in range(200):
        k, s = int(rng.integers(1, 6)), int(rng.integers(1, 6))
        err, base = rng.random((k, s)), rng.random((k, s))
        ec, bc = float(rng.random() * 0.3), float(rng.random() * 0.3)
        assert mce(err, base) == pytest.approx(_brute_ratio_mean(err, base), rel=1e-12)
        assert mfr(err, base) == pytest.approx(_brute_ratio_mean(err, base), rel=1e-12)
        num = [[e - ec for e in row] for row in err]
        den = [[b - bc for b in row] for row in base]
        expected = _brute_ratio_mean(num, den)
        got = rce(err, ec, base, bc)
        if expected is None:
            assert got is None
        else:
            assert got == pytest.approx(expected, rel=1e-9)


def test_baseline_against_itself_is_exactly_one():
    rng = np.random.default_rng(4)
    err = rng.random((4, 5)) * 0.5 + 0.2
    assert mce(err, err) == 1.0
    assert mfr(err, err) == 1.0
    assert rce(err, 0.1, err, 0.1) == 1.0


def test_undefined_denominators_are_none_not_inf():
    err = np.array([[0.2, 0.3], [0.4, 0.4]])
    base = np.array([[0.0, 0.0], [0.2, 0.2]])  # baseline never errs under corruption 0
    assert ce_per_corruption(err, base) == [None, pytest.approx(2.0)]
    assert mce(err, base) == pytest.approx(2.0)  # mean over the defined corruption only
    assert mce(err, np.zeros((2, 2))) is None
    assert mfr(err, np.zeros((2, 2))) is None
    # baseline does not degrade (corruption 0) or even improves (corruption 1) -> undefined
    base_clean = 0.2
    base = np.array([[0.2, 0.2], [0.1, 0.15]])
    assert rce_per_corruption(err, 0.1, base, base_clean) == [None, None]
    assert rce(err, 0.1, base, base_clean) is None
    # round-off-level degradation counts as none
    assert rce(err, 0.1, np.full((2, 2), 0.3 + 1e-15), 0.3) is None


@pytest.mark.parametrize(
    "err, base, match",
    [
        (np.ones(3) * 0.1, np.ones(3) * 0.1, "2-D"),
        (np.ones((2, 3)) * 0.1, np.ones((3, 2)) * 0.1, "same"),
        (np.array([[0.1, np.nan]]), np.array([[0.1, 0.2]]), "NaN"),
        (np.array([[0.1, 1.5]]), np.array([[0.1, 0.2]]), r"\[0, 1\]"),
        (np.array([[0.1, -0.1]]), np.array([[0.1, 0.2]]), r"\[0, 1\]"),
        (np.zeros((0, 2)), np.zeros((0, 2)), "at least"),
    ],
)
def test_relative_metrics_reject_bad_grids(err, base, match):
    with pytest.raises(MetricInputError, match=match):
        mce(err, base)
    with pytest.raises(MetricInputError, match=match):
        mfr(err, base)


def test_rce_rejects_bad_clean_error():
    with pytest.raises(MetricInputError, match="err_clean"):
        rce(ERR, float("nan"), BASE_ERR, 0.1)
    with pytest.raises(MetricInputError, match="base_err_clean"):
        rce(ERR, 0.1, BASE_ERR, 1.2)


# --------------------------------------------------------------------------- Pearson


def test_pearson_matches_scipy():
    rng = np.random.default_rng(5)
    for _ in range(100):
        k, s = int(rng.integers(1, 5)), int(rng.integers(3, 6))
        acc = rng.random((k, s))
        lfp = np.clip(1 - acc + rng.normal(0, 0.2, (k, s)), 0, 1)
        expected = pearsonr(acc.ravel(), lfp.ravel()).statistic
        assert pearson_acc_lfp(acc, lfp) == pytest.approx(expected, abs=1e-10)


def test_pearson_undefined_cases():
    assert pearson_acc_lfp([0.5, 0.4], [0.1, 0.2]) is None  # < 3 cells
    assert pearson_acc_lfp([0.5, 0.5, 0.5], [0.1, 0.2, 0.3]) is None  # constant accuracy
    assert pearson_acc_lfp([0.5, 0.4, 0.3], [0.0, 0.0, 0.0]) is None  # constant LFP
    r = pearson_acc_lfp([0.9, 0.7, 0.5], [0.1, 0.3, 0.5])
    assert r is not None and math.isclose(r, -1.0)
    with pytest.raises(MetricInputError, match="cells"):
        pearson_acc_lfp([0.1, 0.2, 0.3], [0.1, 0.2])

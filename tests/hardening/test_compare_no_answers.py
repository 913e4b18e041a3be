"""`compare` of a model with no image evaluated in a cell: one error line, not an AssertionError (issue 36,
item 16). A generative model that never named a class is compared: every answer of it is wrong."""

from __future__ import annotations

import numpy as np
import pytest

from domainbench.metrics.classification import MetricInputError
from domainbench.metrics.comparison import compare_models
from domainbench.metrics.outcomes import MISSING, ImageOutcomes
from domainbench.models.generative import UNPARSED


def test_a_model_without_any_parsed_answer_is_a_clear_error() -> None:
    labels = np.array([0, 1, 0, 1, 0, 1])
    outcomes = ImageOutcomes(indices=np.arange(6), labels=labels, preds={
        ("good", "clean", 0): labels.copy(), ("mute", "clean", 0): np.full(6, MISSING),
        ("good", "fog", 1): labels.copy(), ("mute", "fog", 1): np.full(6, MISSING)})
    with pytest.raises(MetricInputError, match=r"'good' and 'mute' have no image with a prediction from both in cell clean@0"):
        compare_models(outcomes, resamples=50)


def test_a_model_that_never_named_a_class_is_wrong_everywhere() -> None:
    labels = np.array([0, 1, 0, 1, 0, 1])
    outcomes = ImageOutcomes(indices=np.arange(6), labels=labels, preds={
        ("good", "clean", 0): labels.copy(), ("mute", "clean", 0): np.full(6, UNPARSED),
        ("good", "fog", 1): labels.copy(), ("mute", "fog", 1): np.full(6, UNPARSED)})
    v = compare_models(outcomes, resamples=50).verdicts[0]
    assert (v.accuracy_a, v.accuracy_b, v.n_images) == (pytest.approx(1.0), 0.0, 6)

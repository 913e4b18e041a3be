"""The requirement grammar of `domainbench check` (metrics.requirements), without a run."""

from __future__ import annotations

import pytest

from domainbench.metrics.registry import registry
from domainbench.metrics.requirements import OPERATORS, RequirementError, parse_requirement


@pytest.mark.parametrize(("text", "metric", "op", "threshold", "model", "corruption", "severity"), [
    ("mce <= 1.0", "mce", "<=", 1.0, None, None, None),
    ("mce<1", "mce", "<", 1.0, None, None, None),
    ("corrupted_accuracy >= 0.70", "mean_corrupted_accuracy", ">=", 0.7, None, None, None),
    ("label_flip_probability@motion_blur:3 <= 0.10", "label_flip_probability", "<=", 0.1, None, "motion_blur", 3),
    ("model=open_clip:ViT-B-32 clean_accuracy > 0.8", "clean_accuracy", ">", 0.8, "open_clip:ViT-B-32", None, None),
    ("model='local:/my models/v2' mfr <= 1.2", "mfr", "<=", 1.2, "local:/my models/v2", None, None),
    ("balanced_accuracy@clean >= 0.9", "balanced_accuracy", ">=", 0.9, None, "clean", 0),
    ("balanced_accuracy@shift:night >= 0.5", "balanced_accuracy", ">=", 0.5, None, "shift:night", None),
    ("balanced_accuracy@shift:night:1 >= 0.5", "balanced_accuracy", ">=", 0.5, None, "shift:night", 1),
    ("ce_per_corruption@contrast <= 1.1", "ce_per_corruption", "<=", 1.1, None, "contrast", None),
    ("divergence_radius@gaussian_noise <= 0.2", "divergence_radius", "<=", 0.2, None, "gaussian_noise", None),
])
def test_requirements_parse(text: str, metric: str, op: str, threshold: float, model: str | None,
                            corruption: str | None, severity: int | None) -> None:
    r = parse_requirement(text)
    assert (r.metric.name, r.op, r.threshold, r.model, r.corruption, r.severity) == (
        metric, op, threshold, model, corruption, severity)
    assert r.metric is registry().get(metric)


@pytest.mark.parametrize(("text", "message"), [
    ("accuracy >= 0.5", "is ambiguous"),
    ("mce == 1", "is not a requirement"),
    ("mce <= nan", "not NaN"),
    ("balanced_accuracy >= 0.5", "write balanced_accuracy@CORRUPTION:SEVERITY"),
    ("ce_per_corruption@contrast:3 <= 1", "one number per corruption; write ce_per_corruption@contrast"),
    ("pd_safe@contrast:3 >= 1", "is a flag"),
    ("label_flip_probability@contrast:3 <= 10", "a fraction from 0 to 1; write 0.1, not 10"),
])
def test_bad_requirements_say_what_to_write(text: str, message: str) -> None:
    with pytest.raises(RequirementError, match=None) as e:
        parse_requirement(text)
    assert message in str(e.value)


def test_operators_are_the_comparisons_they_read_as() -> None:
    assert [OPERATORS[o](1.0, 1.0) for o in ("<=", ">=", "<", ">")] == [True, True, False, False]

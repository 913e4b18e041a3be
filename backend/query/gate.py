"""A CI gate on a stored run (``domainbench check``): requirements on its numbers and, against a baseline run, no
significant regression. The verdict is ``passed``; the parts say which requirement or model failed and by how much.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from domainbench.query.confidence import OutcomesReader, load_intervals, read_outcomes
from domainbench.query.regression import RegressionCheck, check_regression
from domainbench.errors import UserInputError
from domainbench.metrics.requirements import (
    Outcome,
    RequirementError,
    check_requirements,
    parse_requirements,
    validate_requirements,
)
from domainbench.records.report import RunReport
from domainbench.stats.intervals import DEFAULT_CONFIDENCE, check_confidence
from domainbench.store import Store


@dataclass(frozen=True)
class CheckResult:
    run_id: str
    confidence: float
    #: True: requirements were checked on the intervals' worse ends
    confident: bool
    outcomes: list[Outcome]
    regression: RegressionCheck | None

    @property
    def failed(self) -> list[Outcome]:
        return [o for o in self.outcomes if not o.holds]

    @property
    def passed(self) -> bool:
        return not self.failed and (self.regression is None or not self.regression.regressed)


def run_check(store: Store, report: RunReport, requirements: Sequence[str] = (), *, against: str | None = None,
              models: Sequence[str] | None = None, confident: bool = False, confidence: float = DEFAULT_CONFIDENCE,
              read: OutcomesReader = read_outcomes) -> CheckResult:
    """Check ``requirements`` (``metrics.requirements``' grammar) on ``report``'s run and, with ``against``, that no
    model regressed significantly since that run. Bad input (a requirement that cannot be read, a model or cell the
    run lacks, runs that are not comparable) raises ``UserInputError``; a failed check is in the result."""
    confidence = check_confidence(confidence)
    if not requirements and against is None:
        raise UserInputError("check needs something to check: --require EXPR (e.g. --require 'mce <= 1.0') or "
                             "--against BASELINE_RUN")
    unknown = [m for m in models or [] if m not in report.model_names]
    if unknown:
        raise UserInputError(f"--model {', '.join(unknown)}: not in run {report.run_id}; its models are "
                             f"{', '.join(report.model_names)}")
    try:
        parsed = parse_requirements(requirements) if requirements else []
        # bad input is found before the intervals are drawn: `--confident` on a typo answers at once
        validate_requirements(parsed, report, confident=confident, models=models)
        intervals = load_intervals(store, report, confidence, read=read) if parsed and confident else None
        outcomes = check_requirements(parsed, report, intervals, confident=confident, models=models)
    except RequirementError as e:
        raise UserInputError(str(e)) from None
    regression = (check_regression(store, report.run_id, against, models, confidence, read)
                  if against is not None else None)
    return CheckResult(report.run_id, confidence, confident, outcomes, regression)

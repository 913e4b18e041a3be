"""The typed result of a run: what the engine stores and every reader (CLI, export, UI) consumes.

A :class:`RunReport` is derived from stored sufficient statistics only, so it can be rebuilt
at any time (for instance against another baseline) and is never the only copy of a number.
Readers walk its models and cells through the methods here instead of nested dicts.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from domainbench.records.results import CellSummary, ModelSummary, RunSummary

REPORT_SCHEMA_VERSION = 3  # 1 was the untyped summary dict, 2 called cells safe by the mean threat; both are rebuilt


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ThreatCell(_Frozen):
    """PD threat of one (corruption, severity), pooled over the run's shards (model-independent)."""

    corruption: str
    severity: int
    n: int
    mean_threat: float | None
    std_threat: float | None
    #: share of the cell's images whose threat is above the safe threshold (1)
    frac_unsafe_images: float | None
    max_threat: float
    #: ``metrics.threat.pd_safety``: the 95 % Clopper–Pearson interval of ``frac_unsafe_images`` wholly below
    #: the cut ("safe"), wholly above it ("unsafe"), or across it ("borderline")
    safety: Literal["safe", "borderline", "unsafe"]
    #: ``safety == "safe"``: the flag the safe-cell accuracy and the export's ``pd_safe`` read
    safe: bool
    frac_unsafe_ci_low: float | None = None
    frac_unsafe_ci_high: float | None = None

    @model_validator(mode="before")
    @classmethod
    def _safe_follows_safety(cls, data: Any) -> Any:
        # one verdict: the flag is derived from the three-way safety, never set against it
        if isinstance(data, dict) and "safety" in data:
            safe = data["safety"] == "safe"
            data = {"safe": safe, **data}
            if data["safe"] != safe:
                raise ValueError(f"safe={data['safe']!r} contradicts safety={data['safety']!r}")
        return data


class StabilityMean(_Frozen):
    """Mean per-image stability of one model under one corruption's parameter grid."""

    model: str
    corruption: str
    n_images: int
    divergence_radius: float | None
    cosine: float | None
    euclidean: float | None


class RadiusBinReport(_Frozen):
    bin_lo: float
    bin_hi: float
    mean_radius: float
    accuracy: float
    count: int


class RegressionReport(_Frozen):
    slope: float
    intercept: float
    mse: float
    n_test: int


class LinkEntry(_Frozen):
    """Accuracy versus DivergenceRadius for one (model, corruption)."""

    n_images: int
    mean_radius: float
    accuracy_clean: float
    accuracy_perturbed: float
    bins: list[RadiusBinReport] | None = None
    regression: RegressionReport | None = None
    #: why bins/regression are missing (too few distinct values, …)
    note: str | None = None


class DropCorrelationReport(_Frozen):
    r: float
    p_value: float
    n_corruptions: int


class StabilityLink(_Frozen):
    """Per model: does DivergenceRadius predict accuracy under perturbation?"""

    model: str
    per_corruption: dict[str, LinkEntry]
    drop_correlation: DropCorrelationReport | None


class SummaryRow(_Frozen):
    """One row of the product paper's table, plus the accuracy over PD-safe cells.

    The fields are the stored model metrics under their report names (the metric registry's ``field``s; its
    canonical names are ``clean_accuracy`` for ``acc`` and so on); a model metric the registry computes rides on
    the row as an extra under its registry name (``metrics.registry.summary_rows``)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    model: str
    baseline: bool
    acc: float | None
    mean_corrupted_acc: float | None
    safe_acc: float | None
    mce: float | None
    rce: float | None
    mfr: float | None
    corr: float | None
    cells: int


class FmrModelReport(_Frozen):
    """FMR of one tested model: SA, PA (fractions), FMR = PA / SA × 100 and how far the search got."""

    model: str
    n: int
    sa: float | None
    pa: float | None
    fmr: float | None
    #: share of images with at least one accepted perturbation step
    validation_rate: float | None
    mean_steps: float | None
    #: images whose clean version the oracle labels correctly (only these are perturbed)
    n_validated: int
    n_perturbed: int


class FmrOracleReport(_Frozen):
    members: list[str]
    #: the majority vote's agreement with the labels on clean images (ties count as disagreement)
    clean_agreement: float | None
    member_accuracy: dict[str, float | None]


class FmrReport(_Frozen):
    """Foundation-model-oriented robustness of the run's tested models (``domainbench fmr``)."""

    search: str
    budget: int
    candidates: int
    step_size: float
    oracle: FmrOracleReport
    models: list[FmrModelReport]


class Versions(_Frozen):
    domainbench: str
    report_schema: int = REPORT_SCHEMA_VERSION


class RunReport(_Frozen):
    schema_version: Literal[3] = REPORT_SCHEMA_VERSION
    run_id: str
    baseline: str
    seed: int
    classification: RunSummary
    threat: list[ThreatCell] = Field(default_factory=list)
    #: mean PD threat of moving an image onto an image of another class (the unsafe scale)
    different_class_threat: float | None = None
    #: balanced accuracy averaged over the PD-safe cells, per model (None: no safe cell)
    safe_accuracy: dict[str, float | None] = Field(default_factory=dict)
    stability: list[StabilityMean] = Field(default_factory=list)
    stability_link: list[StabilityLink] = Field(default_factory=list)
    #: present for runs made by ``domainbench fmr``
    fmr: FmrReport | None = None
    versions: Versions

    # -- the ways readers walk a report ---------------------------------------------------
    @property
    def models(self) -> list[ModelSummary]:
        return self.classification.models

    @property
    def model_names(self) -> list[str]:
        return [m.model for m in self.classification.models]

    def model(self, name: str) -> ModelSummary:
        return self.classification.model(name)

    def cells_of(self, model: str | ModelSummary) -> list[CellSummary]:
        """The clean pass (when stored) followed by the model's corrupted cells."""
        m = self.model(model) if isinstance(model, str) else model
        return ([m.clean] if m.clean is not None else []) + list(m.cells)

    def all_cells(self) -> Iterator[tuple[ModelSummary, CellSummary]]:
        for m in self.classification.models:
            for c in self.cells_of(m):
                yield m, c

    def cell(self, model: str, corruption: str, severity: int) -> CellSummary:
        for c in self.cells_of(model):
            if c.corruption == corruption and c.severity == severity:
                return c
        raise KeyError((model, corruption, severity))

    def threat_of(self, corruption: str, severity: int) -> ThreatCell | None:
        for t in self.threat:
            if t.corruption == corruption and t.severity == severity:
                return t
        return None

    def cells_by_safety(self, safety: str) -> list[ThreatCell]:
        """The threat cells of one verdict ("safe", "borderline", "unsafe"), in the report's order."""
        return [t for t in self.threat if t.safety == safety]

    def unsafe_cells(self) -> list[ThreatCell]:
        return self.cells_by_safety("unsafe")

    def corruption_names(self) -> list[str]:
        return sorted({c.corruption for m in self.models for c in m.cells})

    def table(self) -> list[SummaryRow]:
        return [
            SummaryRow(
                model=m.model,
                baseline=m.is_baseline,
                acc=m.clean_accuracy,
                mean_corrupted_acc=m.mean_corrupted_accuracy,
                safe_acc=self.safe_accuracy.get(m.model),
                mce=m.mce,
                rce=m.rce,
                mfr=m.mfr,
                corr=m.pearson_acc_lfp,
                cells=len(self.classification.common_cells),
            )
            for m in self.classification.models
        ]

"""Has robustness regressed since a baseline run? (``domainbench check --against BASELINE_RUN``)

A new run is compared with an earlier run of the same plan on the same images (the checks of ``compare``: the
same dataset, fingerprint, indices, labels and seed, so every corrupted image is the same pixels), and with every
cell made the same way. Each model of the new run is paired with itself in the baseline run (or, when the two
runs share no model and each has one, with the baseline's one model: "did switching models cost robustness?"),
and the pair gets the verdict's own test (``metrics.comparison``: the paired sign-flip test of balanced accuracy
averaged over the corrupted cells), Holm-adjusted over the models checked. A model *regressed* when its new
accuracy is lower and that adjusted p-value is below 1 - confidence.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from domainbench.query.compare import cell_identities, merged_outcomes
from domainbench.query.confidence import OutcomesReader, load_outcomes, read_outcomes
from domainbench.errors import UserInputError
from domainbench.metrics.classification import MetricInputError
from domainbench.metrics.comparison import compare_models
from domainbench.metrics.outcomes import ImageOutcomes
from domainbench.stats import holm
from domainbench.stats.intervals import DEFAULT_CONFIDENCE, check_confidence
from domainbench.store import Store


class ModelRegression(BaseModel):
    """One model of the new run against its counterpart in the baseline run."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str
    baseline_model: str
    #: balanced accuracy averaged over the corrupted cells, in the new run and in the baseline run
    accuracy: float
    baseline_accuracy: float
    #: new minus baseline, with the interval of the test (for this model alone)
    difference: float
    ci_low: float
    ci_high: float
    p_value: float
    #: Holm-adjusted over the models checked
    p_holm: float
    #: cells where the new run is significantly worse / better (Holm over the pair's cells)
    worse_cells: int
    better_cells: int
    cells: int
    n_images: int
    regressed: bool


class RegressionCheck(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    run_id: str
    baseline_run_id: str
    confidence: float
    models: list[ModelRegression]

    @property
    def regressed(self) -> list[ModelRegression]:
        return [m for m in self.models if m.regressed]


def _pairs(new_models: Sequence[str], old_models: Sequence[str], only: Sequence[str] | None,
           run_id: str, baseline_id: str) -> list[tuple[str, str]]:
    wanted = [m for m in new_models if only is None or m in only]
    pairs = [(m, m) for m in wanted if m in old_models]
    if not pairs and len(new_models) == 1 and len(old_models) == 1 and (only is None or new_models[0] in only):
        pairs = [(new_models[0], old_models[0])]
    if not pairs:
        raise UserInputError(f"runs {run_id} ({', '.join(new_models)}) and {baseline_id} ({', '.join(old_models)}) share "
                             "no model to check for a regression; check a run of the same models against it")
    return pairs


def check_regression(store: Store, run_id: str, baseline_run_id: str, models: Sequence[str] | None = None,
                     confidence: float = DEFAULT_CONFIDENCE, read: OutcomesReader = read_outcomes) -> RegressionCheck:
    """Each model of ``run_id`` (or of ``models``) against itself in ``baseline_run_id``; ``UserInputError`` when
    the runs are not comparable (other images, seed, plan or cells) or share no model."""
    confidence = check_confidence(confidence)
    if run_id == baseline_run_id:
        raise UserInputError(f"--against {baseline_run_id}: that is the run being checked; name an earlier run")
    runs = []
    for rid in (run_id, baseline_run_id):
        run = store.get_run(rid)
        if run is None:
            raise UserInputError(f"no run {rid!r} in {store.description}; see `domainbench ls`")
        if run.config.adaptive:
            raise UserInputError(f"run {rid} stopped its cells adaptively (--adaptive): --against compares fixed-size "
                                 "runs; check it against a run made without --adaptive")
        runs.append(run)
    new, old = runs
    differing: list[str] = []
    merged_outcomes(store, [baseline_run_id, run_id], read, differing)  # the same dataset, images, labels and seed
    a, b = cell_identities(new), cell_identities(old)
    if differing or a.keys() != b.keys():
        what = sorted(set(differing) | (a.keys() ^ b.keys()))
        raise UserInputError(f"runs {run_id} and {baseline_run_id} are not of the same plan (cells made differently or "
                             f"in one run only: {', '.join(what)}); check a run against a baseline run of the same plan")
    new_out, old_out = load_outcomes(store, run_id, read), load_outcomes(store, baseline_run_id, read)
    if new_out.labels is None:
        raise UserInputError(f"run {run_id} is on an unlabelled dataset: a regression of accuracy needs labels")
    pairs = _pairs(new.config.models, old.config.models, models, run_id, baseline_run_id)
    found = []
    for m_new, m_old in pairs:
        label_new, label_old = f"{m_new} (run {run_id})", f"{m_old} (run {baseline_run_id})"
        preds = {(label_new, c, s): v for (m, c, s), v in new_out.preds.items() if m == m_new}
        preds |= {(label_old, c, s): v for (m, c, s), v in old_out.preds.items() if m == m_old}
        cells_new = {(c, s) for (m, c, s) in preds if m == label_new}
        cells_old = {(c, s) for (m, c, s) in preds if m == label_old}
        if cells_new != cells_old:
            only = sorted(f"{c}@{s}" for c, s in cells_new ^ cells_old)
            raise UserInputError(f"runs {run_id} and {baseline_run_id} evaluated {m_new} on different cells "
                                 f"({', '.join(only)} in one run only); check against a finished run of the same plan")
        joint = ImageOutcomes(indices=new_out.indices, labels=new_out.labels, preds=preds)
        try:
            cmp = compare_models(joint, [label_new, label_old], confidence, seed=new.config.seed)
        except MetricInputError as e:
            raise UserInputError(f"--against {baseline_run_id}: {e}") from None
        found.append((m_new, m_old, cmp.verdicts[0]))
    adjusted = holm([v.p_value for _, _, v in found])
    alpha = 1 - confidence
    return RegressionCheck(run_id=run_id, baseline_run_id=baseline_run_id, confidence=confidence, models=[
        ModelRegression(model=m_new, baseline_model=m_old, accuracy=v.accuracy_a, baseline_accuracy=v.accuracy_b,
                        difference=v.difference, ci_low=v.ci_low, ci_high=v.ci_high, p_value=v.p_value, p_holm=p,
                        worse_cells=v.worse, better_cells=v.better, cells=v.cells, n_images=v.n_images,
                        regressed=bool(p < alpha and v.difference < 0))
        for (m_new, m_old, v), p in zip(found, adjusted, strict=True)])

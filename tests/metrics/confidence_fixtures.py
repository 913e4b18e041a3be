"""Hand-made stored units of a small labelled run: two or three models, clean + 2 corruptions x 2 severities."""

from __future__ import annotations

import numpy as np

from domainbench.metrics.aggregate import summarize
from domainbench.metrics.threat import safe_accuracy
from domainbench.records.report import RunReport, ThreatCell, Versions
from domainbench.store.records import UnitRecord

CLASSES = ["a", "b", "c"]
CELLS = [("clean", 0), ("blur", 1), ("blur", 3), ("noise", 2), ("noise", 4)]
#: the cells whose PD threat calls them label-preserving (the others are unsafe)
SAFE = {("blur", 1), ("blur", 3), ("noise", 2)}


def synthetic_units(n: int = 90, skill: dict[str, float] | None = None, seed: int = 0, shards: int = 2,
                    run_id: str = "r", indices: np.ndarray | None = None) -> list[UnitRecord]:
    """Each model is right with probability skill - 0.08 * severity, else predicts a random other class."""
    skill = skill or {"m1": 0.85, "m2": 0.7}
    rng = np.random.default_rng(seed)
    idx = np.arange(n) * 3 + 5 if indices is None else np.asarray(indices)
    labels = rng.integers(0, len(CLASSES), size=n)
    units = []
    for model, p in skill.items():
        clean_pred = None
        for corr, sev in CELLS:
            right = rng.random(n) < p - 0.08 * sev
            pred = np.where(right, labels, (labels + rng.integers(1, len(CLASSES), size=n)) % len(CLASSES))
            if corr == "clean":
                clean_pred = pred
            assert clean_pred is not None
            for s, part in enumerate(np.array_split(np.arange(n), shards)):
                cm = np.zeros((3, 3), dtype=int)
                np.add.at(cm, (labels[part], pred[part]), 1)
                units.append(UnitRecord(
                    run_id=run_id, model=model, corruption=corr, severity=sev, shard=s, n=part.size, confusion=cm.tolist(),
                    flips=0 if corr == "clean" else int((pred[part] != clean_pred[part]).sum()), seed=0,
                    classes=CLASSES, preds=pred[part].tolist(), indices=idx[part].tolist(),
                    labels=labels[part].tolist() if corr == "clean" else None))
    return units


def synthetic_report(units: list[UnitRecord], baseline: str = "m2", run_id: str = "r") -> RunReport:
    """The report of ``units``, with a PD threat that calls the ``SAFE`` cells safe (and its safe-cell accuracy)."""
    summary = summarize(units, baseline)
    threat = [ThreatCell(corruption=c, severity=s, n=1, mean_threat=0.5 if (c, s) in SAFE else 1.5, std_threat=0.0,
                         frac_unsafe_images=0.0, max_threat=1.5, safety="safe" if (c, s) in SAFE else "unsafe")
              for c, s in CELLS if c != "clean"]
    safety = {(t.corruption, t.severity): t.safe for t in threat}
    return RunReport(run_id=run_id, baseline=baseline, seed=0, classification=summary, threat=threat,
                     safe_accuracy={m.model: safe_accuracy({(c.corruption, c.severity): c.accuracy for c in m.cells}, safety)
                                    for m in summary.models},
                     versions=Versions(domainbench="test"))


def textbook_loadings(out, model: str, corruption: str, severity: int) -> np.ndarray:  # noqa: ANN001 - ImageOutcomes
    """:func:`textbook_loadings_of` one cell of ``out``."""
    return textbook_loadings_of(out.correct(model, corruption, severity), out.labels)


def textbook_loadings_of(correct: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Per image, how far its multiplier moves the balanced accuracy (``stats.smoothed``), written out with a
    loop over classes: the class's residuals x − p̃ (p̃ = (k + 2)/(n_c + 4)) scaled so that their squares sum to
    p̃(1 − p̃)/n_c, over the number of classes, then widened by the continuity correction (half a step of balanced
    accuracy, (1/C)·mean(1/n_c)/2, over z at 95 %)."""
    from scipy.stats import norm

    correct = np.asarray(correct, dtype=float)
    g = np.zeros(correct.size)
    variance = inverse = 0.0
    classes = np.unique(labels)
    for k in classes:
        idx = np.flatnonzero(labels == k)
        p = (correct[idx].sum() + 2) / (idx.size + 4)
        r = correct[idx] - p
        g[idx] = r * np.sqrt(p * (1 - p) / idx.size / np.sum(r * r)) / classes.size
        variance += p * (1 - p) / idx.size / classes.size**2
        inverse += 1 / idx.size / classes.size**2
    return g * (1 + 0.5 * inverse / (norm.ppf(0.975) * np.sqrt(variance)))

"""A run's summary, derived from stored sufficient statistics only (no images, no models).

Recomputing it with another baseline is cheap: ``build_summary(store, run_id, baseline=...)``.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from backend.errors import UserInputError
from backend.metrics.aggregate import summarize, summary_table
from backend.metrics.threat import safe_accuracy, severity_safety
from backend.store import Store

#: the PD threat is normalised so that moving all the way onto another class's anchor scores
#: 2 (β = 1/2); at or below 1 a perturbation stays within half-way: label-preserving ("safe")
SAFE_THREAT = 1.0


def threat_cells(store: Store, run_id: str) -> dict[tuple[str, int], dict[str, Any]]:
    acc: dict[tuple[str, int], dict[str, float]] = defaultdict(lambda: {"n": 0, "sum": 0.0, "sum_sq": 0.0, "n_above_1": 0, "max": 0.0})
    for d in store.find("threat", run_id=run_id):
        a = acc[(d["corruption"], d["severity"])]
        a["n"] += d["n"]
        a["sum"] += d["sum"]
        a["sum_sq"] += d["sum_sq"]
        a["n_above_1"] += d["n_above_1"]
        a["max"] = max(a["max"], d["max"])
    out = {}
    for key, a in sorted(acc.items()):
        mean = a["sum"] / a["n"] if a["n"] else None
        out[key] = {
            "corruption": key[0],
            "severity": key[1],
            "n": int(a["n"]),
            "mean_threat": mean,
            "std_threat": float(np.sqrt(max(a["sum_sq"] / a["n"] - mean**2, 0.0))) if a["n"] else None,
            "frac_unsafe_images": a["n_above_1"] / a["n"] if a["n"] else None,
            "max_threat": a["max"],
        }
    safety = severity_safety({k: v["mean_threat"] for k, v in out.items() if v["mean_threat"] is not None}, SAFE_THREAT)
    for key, cell in out.items():
        cell["safe"] = safety.get(key, False)
    return out


def stability_means(store: Store, run_id: str) -> list[dict[str, Any]]:
    """Mean DivergenceRadius / cosine / Euclidean robustness per model × corruption."""
    groups: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for d in store.find("stability", run_id=run_id):
        g = groups[(d["model"], d["corruption"])]
        for k in ("divergence_radius", "cosine", "euclidean"):
            g[k] += d.get(k, [])
    return [
        {"model": m, "corruption": c, "n_images": len(g["divergence_radius"]),
         **{k: float(np.mean(v)) if v else None for k, v in g.items()}}
        for (m, c), g in sorted(groups.items())
    ]


def stability_link(store: Store, run_id: str, units: list[dict[str, Any]], seed: int = 0) -> list[dict[str, Any]]:
    """Per model: does DivergenceRadius predict accuracy under perturbation? (stability paper §5)

    An image's ACC_p for a corruption is the fraction of its evaluated severities classified
    correctly; it is related to the image's radius by quantile bins and a half/half linear
    regression, and across corruptions the accuracy drop is correlated with the mean radius.
    """
    from backend.metrics.stability_link import (
        StabilityLinkInputError,
        accuracy_by_radius_quantile,
        drop_robustness_correlation,
        fit_accuracy_regression,
    )

    labels: dict[int, int] = {}
    correct: dict[tuple[str, str], dict[int, list[bool]]] = defaultdict(lambda: defaultdict(list))
    for u in units:
        if u["corruption"] == "clean" and u.get("labels") is not None:
            labels.update(zip(u["indices"], u["labels"]))
    if not labels:
        return []
    for u in units:
        for i, p in zip(u.get("indices", []), u.get("preds", [])):
            if i in labels:
                correct[(u["model"], u["corruption"])][i].append(p == labels[i])
    radius: dict[tuple[str, str], dict[int, float]] = defaultdict(dict)
    for d in store.find("stability", run_id=run_id):
        radius[(d["model"], d["corruption"])].update(zip(d["indices"], d["divergence_radius"]))
    out = []
    for model in sorted({m for m, _ in radius}):
        per: dict[str, Any] = {}
        drop, mean_r = {}, {}
        clean = correct.get((model, "clean"), {})
        for (m, corr), rad in sorted(radius.items()):
            if m != model:
                continue
            idx = [i for i in rad if i in correct.get((m, corr), {}) and i in clean]
            if len(idx) < 4:
                continue
            r = np.array([rad[i] for i in idx])
            acc_p = np.array([np.mean(correct[(m, corr)][i]) for i in idx])
            acc = np.array([float(clean[i][0]) for i in idx])
            entry: dict[str, Any] = {"n_images": len(idx), "mean_radius": float(r.mean()),
                                     "accuracy_clean": float(acc.mean()), "accuracy_perturbed": float(acc_p.mean())}
            try:
                entry["bins"] = [b._asdict() for b in accuracy_by_radius_quantile(r, acc_p, n_bins=5)]
                reg = fit_accuracy_regression(r, acc_p, seed=seed)
                entry["regression"] = {"slope": reg.slope, "intercept": reg.intercept, "mse": reg.mse, "n_test": reg.n_test}
            except StabilityLinkInputError as e:
                entry["note"] = str(e)
            per[corr] = entry
            drop[corr] = entry["accuracy_clean"] - entry["accuracy_perturbed"]
            mean_r[corr] = entry["mean_radius"]
        dc = drop_robustness_correlation(drop, mean_r) if drop else None
        out.append({"model": model, "per_corruption": per,
                    "drop_correlation": None if dc is None else {"r": dc.r, "p_value": dc.p_value, "n_corruptions": dc.n_corruptions}})
    return out


def build_summary(store: Store, run_id: str, baseline: str | None = None) -> dict[str, Any]:
    run = store.get_run(run_id)
    if run is None:
        raise UserInputError(f"no run {run_id!r} in {store.description}; see `domainbench ls`")
    models = run["config"]["models"]
    baseline = baseline or run["config"].get("baseline") or models[0]
    if baseline not in models:
        raise UserInputError(f"baseline {baseline!r} is not a model of run {run_id}; choose one of {models}")
    units = store.units(run_id)
    if not units:
        raise UserInputError(f"run {run_id} has no finished units yet; resume it with `domainbench run --resume {run_id}`")
    summary = summarize(units, baseline=baseline)
    threat = threat_cells(store, run_id)
    safety = {key: cell["safe"] for key, cell in threat.items()}
    safe_acc = {}
    for m in summary.models:
        accs = {(c.corruption, c.severity): c.accuracy for c in m.cells
                if c.accuracy is not None and (c.corruption, c.severity) in safety}
        safe_acc[m.model] = safe_accuracy(accs, safety)
    return {
        "run_id": run_id,
        "baseline": baseline,
        "classification": summary.model_dump(mode="json"),
        "table": summary_table(summary),
        "threat": list(threat.values()),
        "threat_reference": run.get("threat_reference"),
        "safe_accuracy": safe_acc,
        "stability": stability_means(store, run_id),
        "stability_link": stability_link(store, run_id, units, seed=run["config"].get("seed", 0)),
    }

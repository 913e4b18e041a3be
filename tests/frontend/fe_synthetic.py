"""A synthetic run written straight into a store as valid records (the store validates every write).

Confusion matrices are built so that a model's accuracy falls with severity at a known rate,
letting tests compare the UI's numbers with hand computations.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from domainbench.engine.reports import build_report
from domainbench.store import Store
from domainbench.store.records import RunRecord

#: images of the real run (conftest.real_run): enough (>= 36) that a PD cell with no image above threat 1 can be
#: shown safe (its 95 % Clopper–Pearson upper end below 10 %)
REAL_IMAGES = 40

CLASSES = ["cat", "dog", "fox"]
PER_CLASS = 10  # images per class and shard
MODELS = ["embedded:good", "embedded:weak"]
CORRUPTIONS = {"gaussian_noise": [1, 2, 3], "brightness": [1, 2]}
#: correct images per class (of PER_CLASS) of each model at severity s: clean - drop * s
CLEAN_CORRECT = {"embedded:good": 9, "embedded:weak": 8}
DROP = {"embedded:good": 1, "embedded:weak": 2}


def correct(model: str, severity: int) -> int:
    return max(0, CLEAN_CORRECT[model] - DROP[model] * severity)


def confusion(k: int) -> list[list[int]]:
    """k of PER_CLASS images of every class right, the rest predicted as the next class."""
    n = len(CLASSES)
    cm = np.zeros((n, n), dtype=int)
    for i in range(n):
        cm[i, i] = k
        cm[i, (i + 1) % n] = PER_CLASS - k
    return cm.tolist()


def domain_doc(text: str = "night-time dash-cam footage in the rain") -> dict[str, Any]:
    return {
        "schema_version": 1,
        "domain": text,
        "corruptions": [
            {"name": name, "severities": sevs, "params": {}, "reason": f"{name} happens in this domain"}
            for name, sevs in CORRUPTIONS.items()
        ],
        "planner": {"provider": "offline", "model": "test", "prompt_version": "t", "samples": 4, "temperature": 0.0,
                    "frequencies": {"gaussian_noise": 1.0, "brightness": 0.75, "motion_blur": 0.25},
                    "violations": [], "created_at": "2025-01-01T00:00:00+00:00"},
    }


def image_preds(shard: int, k: int, with_labels: bool) -> dict[str, list[int]]:
    """A shard's images (indices shard * 30 ...), class by class, and predictions with the first k of each class right
    (the others predicted as the next class): the per-image form of :func:`confusion`."""
    n = len(CLASSES)
    labels = [c for c in range(n) for _ in range(PER_CLASS)]
    preds = [c if j < k else (c + 1) % n for c in range(n) for j in range(PER_CLASS)]
    start = shard * PER_CLASS * n
    return {"indices": list(range(start, start + PER_CLASS * n)), "preds": preds,
            **({"labels": labels} if with_labels else {})}


def populate(
    store: Store, run_id: str = "20250101-000000-night-abcd", status: str = "done", shards: int = 2,
    models: list[str] | None = None, created_at: str = "2025-01-01T00:00:00+00:00",
    domain: str = "night-time dash-cam footage in the rain", skip_cells: int = 0, labelled: bool = True,
    error: str | None = None, per_image: bool = False, baseline: str | None = None,
    extra: dict[str, dict[str, int]] | None = None,
) -> RunRecord:
    """Write run, units, threat and stability records; ``skip_cells`` leaves the last cells out (a partial run).
    ``per_image``: the units also store per-image predictions (as the engine writes them), matching their
    confusion matrices: of each class's PER_CLASS images in a shard the first k are right (see :func:`image_preds`).

    ``extra``: cells beyond the plan at severity 1, named ``compose:NAME`` (a composition, added to the plan) or
    ``shift:NAME`` (a real shift), -> per model its correct images per class.

    A finished run also gets its stored report, as the engine writes it when a run finishes.
    """
    models = models or list(MODELS)
    dom = domain_doc(domain)
    extra = extra or {}
    dom["compositions"] = [{"name": c.split(":", 1)[1], "steps": [{"corruption": "brightness", "severity": 2}]}
                           for c in extra if c.startswith("compose:")]
    dom["shift"] = [{"name": c.split(":", 1)[1], "path": "/nonexistent"} for c in extra if c.startswith("shift:")]
    run = {
        "run_id": run_id, "domain_id": "d" + run_id[-4:], "domain": dom, "status": status, "created_at": created_at,
        "config": {"models": models, "dataset": "sample", "baseline": baseline, "limit": 60, "seed": 0},
        "dataset": {"name": "sample[:60]", "size": PER_CLASS * len(CLASSES) * shards, "classes": CLASSES,
                    "labelled": labelled},
        "environment": {"device": "cpu", "gpu": None},
        "different_class_threat": 2.4 if labelled else None,
    }
    if error:
        run["error"] = error
    store.put_run(run)
    store.put_domain({"domain_id": run["domain_id"], "created_at": created_at, **dom})
    cells = [("clean", 0)] + [(c, s) for c, sevs in CORRUPTIONS.items() for s in sevs]
    if skip_cells:
        cells = cells[:-skip_cells]
    n = PER_CLASS * len(CLASSES)
    units = []
    cells += [(c, 1) for c in extra]
    for m in models:
        for corr, sev in cells:
            k = extra[corr][m] if corr in extra else correct(m, sev)
            for shard in range(shards):
                units.append({
                    "run_id": run_id, "model": m, "corruption": corr, "severity": sev, "shard": shard, "n": n,
                    "confusion": confusion(k) if labelled else None, "flips": 0 if corr == "clean" else (CLEAN_CORRECT[m] - k) * len(CLASSES),
                    "n_unreadable": 0, "params": {}, "seed": 0, "classes": CLASSES,
                    **(image_preds(shard, k, labelled and (corr == "clean" or corr.startswith("shift:"))) if per_image else {}),
                })
    store.upsert_many("units", units)
    # threat: noise is safe up to severity 2, brightness always safe
    threat = []
    for corr, sev in cells:
        if corr == "clean" or corr in extra:
            continue
        mean = 0.5 * sev if corr == "gaussian_noise" else 0.2
        for shard in range(shards):
            threat.append({"run_id": run_id, "corruption": corr, "severity": sev, "shard": shard, "n": n,
                           "sum": mean * n, "sum_sq": mean**2 * n, "n_above_1": n if mean > 1 else 0, "max": mean})
    if labelled:  # the PD threat needs labels (anchors of other classes)
        store.upsert_many("threat", threat)
    rng = np.random.default_rng(0)
    stab = []
    for m in models:
        for i, corr in enumerate(CORRUPTIONS):
            for shard in range(shards):
                r = np.clip(rng.normal(0.1 * (i + 1) * DROP[m], 0.02, size=5), 0, 1)
                stab.append({"run_id": run_id, "model": m, "corruption": corr, "shard": shard,
                             "indices": list(range(shard * n, shard * n + 5)), "points": 5,
                             "divergence_radius": r.tolist(), "cosine": (r**2).tolist(), "euclidean": r.tolist()})
    store.upsert_many("stability", stab)
    if status == "done":
        store.put_report(build_report(store, run_id))
    stored = store.get_run(run_id)
    assert stored is not None
    return stored


def populate_fmr(store: Store, run_id: str = "20250104-000000-fmr-5678", oracle: list[str] | None = None,
                 domain: str = "night-time dash-cam footage in the rain", created_at: str = "2025-01-04T00:00:00+00:00",
                 flipped: bool = True) -> RunRecord:
    """A finished FMR run of ``embedded:good`` on 6 images: 5 clean-correct, 4 perturbed, 1 (or 0) flipped."""
    from domainbench.fmr.images import to_png_b64

    oracle = oracle or ["embedded:o1", "embedded:o2", "embedded:o3"]
    dom = domain_doc(domain)
    run = {
        "run_id": run_id, "domain_id": "d" + run_id[-4:], "domain": dom, "status": "done", "created_at": created_at,
        "config": {"models": ["embedded:good"], "dataset": "sample", "baseline": None, "limit": 6, "seed": 0},
        "dataset": {"name": "sample[:6]", "size": 6, "classes": CLASSES, "labelled": True},
        "environment": {"device": "cpu"}, "fmr": {"oracle": oracle, "search": "greedy", "budget": 3},
    }
    store.put_run(run)
    store.put_domain({"domain_id": run["domain_id"], "created_at": created_at, **dom})
    img = to_png_b64(np.full((8, 8, 3), 120, dtype=np.uint8))
    labels = [0, 1, 2, 0, 1, 2]
    final = [0, 1, 2, 1 if flipped else 0, 1, 0]
    store.upsert("fmr", {
        "run_id": run_id, "model": "embedded:good", "shard": 0, "search": "greedy", "seed": 0, "indices": list(range(6)),
        "labels": labels, "clean_preds": [0, 1, 2, 0, 1, 1], "final_preds": final,
        "validated": [True, True, True, True, True, False], "steps": [1, 2, 0, 3, 1, 0],
        "oracle_clean": [[v] * len(oracle) for v in labels], "oracle_final": [[v] * len(oracle) for v in labels],
        "ops": [[("brightness", 0.2)], [("brightness", 0.4)], [], [("contrast", 0.6)], [("brightness", 0.2)], []],
        "images": [img, img, None, img, img, None], "originals": [img, img, None, img, img, None],
    })
    store.upsert("units", {"run_id": run_id, "model": "embedded:good", "corruption": "clean", "severity": 0, "shard": 0,
                           "n": 6, "confusion": [[2, 0, 0], [0, 2, 0], [0, 1, 1]], "flips": 0, "n_unreadable": 0,
                           "params": {}, "seed": 0, "classes": CLASSES})
    store.put_report(build_report(store, run_id))
    stored = store.get_run(run_id)
    assert stored is not None
    return stored


#: the misleading-Compare store (:func:`populate_compare`): run ids
NIGHT, NIGHT_W, XRAY, SHOP = ("20250101-000000-night-abcd", "20241231-000000-night-weak", "20250102-000000-xray-ef01",
                              "20250103-000000-shop-5a5a")
NIGHT_UI, XRAY_UI, AUG = "20250106-000000-ui-0001", "20250106-000000-ui-0002", "20250107-000000-aug-0a0a"
NIGHT_TEXT, XRAY_TEXT, SHOP_TEXT = ("night-time dash-cam footage in the rain", "chest x-rays from portable scanners",
                                    "dim photos of clothes in a shop")


def populate_compare(store: Store) -> None:
    """A store where the old Compare misled: three domains of 60-image runs of both models (the shop run with a
    real-shift cell and a composition, with per-image outcomes), an older night run with another baseline, two newer
    30-image runs launched from the UI (night and x-ray), and the newest run, of a third domain, with one model."""
    populate(store, run_id=NIGHT)
    populate(store, run_id=NIGHT_W, baseline="embedded:weak", created_at="2024-12-31T00:00:00+00:00")
    populate(store, run_id=XRAY, domain=XRAY_TEXT, created_at="2025-01-02T00:00:00+00:00")
    populate(store, run_id=SHOP, domain=SHOP_TEXT, created_at="2025-01-03T00:00:00+00:00", per_image=True,
             extra={"shift:dimshop": {"embedded:good": 5, "embedded:weak": 2},
                    "compose:dark": {"embedded:good": 4, "embedded:weak": 3}})
    populate(store, run_id=NIGHT_UI, shards=1, created_at="2025-01-06T00:00:00+00:00")
    populate(store, run_id=XRAY_UI, shards=1, domain=XRAY_TEXT, created_at="2025-01-06T00:00:01+00:00")
    populate(store, run_id=AUG, models=["embedded:weak"], domain="fashion photos, augmented",
             created_at="2025-01-07T00:00:00+00:00")
    for rid, same in ((NIGHT_W, NIGHT), (NIGHT_UI, NIGHT), (XRAY_UI, XRAY)):  # one domain, several runs
        store.update_run(rid, domain_id="d" + same[-4:])

"""Issue 37, defect 11: the real-shift result in the verdict, through ``AppTest`` and against independent arithmetic.

A run of three models (two embedded ones and a near-chance fake, so one pair differs and Holm runs over three pairs)
with three real shifts (``tests/real_shift_run.py``): labelled and paired, unlabelled and paired, labelled and not
paired. Every number of ``query.real_shift`` is recomputed here from the stored per-image predictions with
scikit-learn, scipy and the formulas written out: balanced accuracy, its smoothed interval in closed form, the
flips' continuity-corrected Wilson interval, the sign-flip test and Holm's adjustment, the closest synthetic cell.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from itertools import combinations
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import norm
from sklearn.metrics import balanced_accuracy_score
from test_app import run_page, texts

from domainbench import query
from domainbench.frontend.shift_section import markdown_safe
from domainbench.store import open_store
from tests.real_shift_run import N, THREE, build

RUN = "realshift"
CELLS = [("brightness", 1), ("brightness", 4), ("gaussian_noise", 3), ("gaussian_noise", 5)]


@pytest.fixture(scope="module")
def shift_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("real-shift"), THREE, RUN)


@pytest.fixture
def results(shift_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict]:
    monkeypatch.setenv("DOMAINBENCH_HOME", str(shift_home))
    monkeypatch.delenv("DOMAINBENCH_MONGO_URI", raising=False)
    store = open_store()
    try:
        report = query.report(store, RUN)
        found = {r.name: r for r in query.real_shift(store, report)}
        units = {c: query.cell_units(store, RUN, c, 1) for c in ("shift:night", "shift:scan", "shift:shop")}
        clean = query.cell_units(store, RUN, "clean", 0)
        yield {"report": report, "results": found, "units": units, "clean": clean}
    finally:
        store.close()


def _per_image(units: list, model: str) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    mine = [u for u in units if u.model == model]
    idx = np.concatenate([np.asarray(u.indices) for u in mine])
    preds = np.concatenate([np.asarray(u.preds) for u in mine])
    labels = None if mine[0].labels is None else np.concatenate([np.asarray(u.labels) for u in mine])
    order = np.argsort(idx)
    return idx[order], preds[order], None if labels is None else labels[order]


def _smoothed_interval(correct: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
    """stats.smoothed's closed form: per class p~ = (k + 2) / (n + 4), se^2 = sum p~(1 - p~) / n_c / C^2, widened by
    half a step (1/C^2) sum 1/n_c at 95 %: ba -/+ (z se + step / 2), clipped to [0, 1]."""
    classes = np.unique(labels)
    k = np.array([correct[labels == c].sum() for c in classes], dtype=float)
    n = np.array([(labels == c).sum() for c in classes], dtype=float)
    c = len(classes)
    ba = float(np.mean(k / n))
    p = (k + 2) / (n + 4)
    se = math.sqrt(float(np.sum(p * (1 - p) / n)) / c**2)
    half = norm.ppf(0.975) * se + float(np.sum(1 / n)) / c**2 / 2
    return max(0.0, ba - half), min(1.0, ba + half)


def _wilson_cc(k: int, n: int, z: float = norm.ppf(0.975)) -> tuple[float, float]:
    """Newcombe's (1998) continuity-corrected Wilson interval, written out."""
    p = k / n
    low = 0.0 if k == 0 else (2 * n * p + z * z - 1 - z * math.sqrt(z * z - 2 - 1 / n + 4 * p * (n * (1 - p) + 1))) / (
        2 * (n + z * z))
    high = 1.0 if k == n else (2 * n * p + z * z + 1 + z * math.sqrt(z * z + 2 - 1 / n + 4 * p * (n * (1 - p) - 1))) / (
        2 * (n + z * z))
    return low, high


def _sign_flip_p(d: np.ndarray) -> float:
    d = d[d != 0]
    if d.size == 0:
        return 1.0
    z = max(0.0, abs(d.sum()) - np.abs(d).max()) / math.sqrt(np.sum(d * d))
    return float(2 * norm.sf(z))


def _holm(p: list[float]) -> list[float]:
    order = sorted(range(len(p)), key=lambda i: p[i])
    out, running = [0.0] * len(p), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p) - rank) * p[i]))
        out[i] = running
    return out


def test_every_number_of_a_labelled_paired_shift_against_an_independent_computation(results: dict) -> None:
    r = results["results"]["night"]
    units, report = results["units"]["shift:night"], results["report"]
    assert r.labelled and r.paired and r.n_images == N and [m.model for m in r.models] == sorted(THREE)
    correct = {}
    for m in r.models:
        idx, preds, labels = _per_image(units, m.model)
        assert len(idx) == N and labels is not None
        assert m.accuracy == pytest.approx(balanced_accuracy_score(labels, preds), abs=1e-12)
        correct[m.model] = (preds == labels, labels)
        # the same method as every cell's accuracy (a Monte Carlo draw of the closed form: 2,000 draws)
        assert m.accuracy_ci == pytest.approx(_smoothed_interval(preds == labels, labels), abs=0.012)
        # flips against the paired clean image (the unit's indices are the clean images' indices)
        cidx, cpreds, _ = _per_image(results["clean"], m.model)
        partner = cpreds[np.searchsorted(cidx, idx)]
        flips = int(np.sum(preds != partner))
        assert m.flip_rate == pytest.approx(flips / N) and m.flip_ci == pytest.approx(_wilson_cc(flips, N), abs=1e-12)
        assert m.ssim is not None and 0 < m.ssim < 1
        # the closest synthetic cell: the smallest |accuracy there - accuracy here|, first in order on a tie
        summary = next(x for x in report.models if x.model == m.model)
        acc = {(c.corruption, c.severity): c.accuracy for c in summary.cells if (c.corruption, c.severity) in CELLS}
        assert m.closest == min(CELLS, key=lambda k: round(abs(acc[k] - m.accuracy), 9))
        assert m.drop == pytest.approx(100 * (summary.clean_accuracy - m.accuracy))
    # the paired test: class-weighted per-image differences, sign-flip z, Holm over the three pairs
    raw = {}
    for a, b in combinations(sorted(THREE), 2):
        (ca, y), (cb, _) = correct[a], correct[b]
        _, counts = np.unique(y, return_inverse=True)
        sizes = np.bincount(counts)
        w = 1.0 / (len(sizes) * sizes[counts])
        raw[(a, b)] = _sign_flip_p(w * (ca.astype(float) - cb.astype(float)))
    adjusted = dict(zip(raw, _holm(list(raw.values())), strict=True))
    assert len(r.tests) == 3
    for t in r.tests:
        key = tuple(sorted((t.model_a, t.model_b)))
        assert t.p_value == pytest.approx(raw[key], abs=1e-12) and t.p_holm == pytest.approx(adjusted[key], abs=1e-12)
        assert t.pairs_compared == 3
        better = None if t.p_holm >= 0.05 else (t.model_a if t.difference > 0 else t.model_b)
        assert t.better == better
    # the near-chance fake loses to at least one embedded model: the sentence says who is better
    assert any(t.better is not None for t in r.tests)


def test_an_unlabelled_shift_says_so_and_is_compared_by_flips(results: dict) -> None:
    r = results["results"]["scan"]
    assert not r.labelled and r.paired
    assert r.sentence.startswith(f"Your {N} real `scan` images are unlabelled, so there is no accuracy on them: flips only")
    assert "balanced accuracy" not in r.sentence and all(m.accuracy is None for m in r.models)
    flips = {}
    for m in r.models:
        idx, preds, _ = _per_image(results["units"]["shift:scan"], m.model)
        cidx, cpreds, _ = _per_image(results["clean"], m.model)
        flips[m.model] = preds != cpreds[np.searchsorted(cidx, idx)]
        assert m.flip_rate == pytest.approx(flips[m.model].mean())
    raw = {(a, b): _sign_flip_p((flips[a].astype(float) - flips[b].astype(float)) / N)
           for a, b in combinations(sorted(THREE), 2)}
    adjusted = dict(zip(raw, _holm(list(raw.values())), strict=True))
    for t in r.tests:
        key = tuple(sorted((t.model_a, t.model_b)))
        assert t.measure == "flip rate" and t.p_holm == pytest.approx(adjusted[key], abs=1e-12)


def test_a_shift_not_named_like_the_dataset_has_accuracy_but_no_flips(results: dict) -> None:
    r = results["results"]["shop"]
    assert r.labelled and not r.paired
    assert all(m.flip_rate is None and m.ssim is None and m.accuracy_ci is not None for m in r.models)


def _walk(node, found: list) -> None:  # noqa: ANN001 - an AppTest block
    """The page's elements in the order they are drawn (depth first)."""
    for child in getattr(node, "children", {}).values():
        found.append(child)
        _walk(child, found)


def test_the_run_page_states_the_result_first_with_intervals_and_the_table_agrees(results: dict) -> None:
    at = run_page(RUN)
    assert not at.error, texts(at.error)
    order: list = []
    _walk(at.main, order)
    summary = next(i for i, e in enumerate(order) if e.type == "dataframe" and any(str(c).startswith("mCE") for c in e.value.columns))
    table = next(e.value for e in order if e.type == "dataframe" and "closest synthetic cell" in e.value.columns)
    in_expanders = {str(m.value) for x in at.expander for m in x.markdown}
    for name, r in results["results"].items():
        shown = markdown_safe(r.sentence)
        at_ = next(i for i, e in enumerate(order) if e.type == "markdown" and e.value == shown)
        assert at_ < summary, f"the {name} result is not above the summary"
        assert shown not in in_expanders  # in plain view, not in a collapsed box
        rows = table[table["cell"] == r.shift].set_index("model")
        assert sorted(rows.index) == sorted(THREE)
        for m in r.models:
            row = rows.loc[m.model]
            # the table names the cell the sentence names, for the same model
            assert f"`{row['closest synthetic cell']}`" in r.sentence
            assert row["closest synthetic cell"] == f"{m.closest[0]} s{m.closest[1]}"
            if r.labelled:
                assert re.search(r"\d+\.\d % \(\d+\.\d–\d+\.\d\)", row["accuracy (95 % CI)"])
                assert f"{m.model} {row['accuracy (95 % CI)']}" in r.sentence  # the same number and interval
                assert row["accuracy %"] == pytest.approx(100 * m.accuracy)
            else:
                assert f"{m.model} {row['flip probability (95 % CI)']}" in r.sentence
            if r.paired:
                assert row["flip probability %"] == pytest.approx(100 * m.flip_rate) and row["ssim"] == pytest.approx(m.ssim)
            else:
                assert row["flip probability %"] != row["flip probability %"] or row["flip probability %"] is None
    night = results["results"]["night"]
    assert "Holm-adjusted over 3 model pairs" in night.sentence
    assert "the synthetic cell that behaves most like them (closest accuracy): " in night.sentence

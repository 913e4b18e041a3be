"""domainbench.metrics.aggregate: unit documents -> summaries, checked against per-image brute force."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.metrics import balanced_accuracy_score

from domainbench.metrics.aggregate import (
    CellStats,
    UnitDocument,
    merge_units,
    summarize,
    summary_table,
)
from domainbench.metrics.classification import MetricInputError

CLASSES = ["cat", "dog", "owl", "fox"]
MODELS = ["A", "B", "C"]
SEVERITIES = {"blur": [1, 2, 3], "noise": [1, 2, 3], "fog": [1, 2]}


def simulate(rng: np.random.Generator, n: int = 60, models=MODELS, severities=SEVERITIES):
    """Per-image labels and predictions: {model: {(corruption, severity): preds}}."""
    y = rng.integers(0, len(CLASSES) - 1, n)  # the last class never occurs in y_true
    preds = {}
    for i, m in enumerate(models):
        skill = 0.9 - 0.15 * i
        clean = np.where(rng.random(n) < skill, y, rng.integers(0, len(CLASSES), n))
        per = {("clean", 0): clean}
        for j, (corr, sevs) in enumerate(severities.items()):
            for s in sevs:
                p_flip = min(0.95, 0.08 * s * (1 + 0.5 * i) + 0.05 * j)
                per[(corr, s)] = np.where(rng.random(n) < p_flip, rng.integers(0, len(CLASSES), n), clean)
        preds[m] = per
    return y, preds


def to_units(y, preds, rng, n_shards=3, labeled=True, run_id="run1"):
    """Split the images randomly into shards and write one unit document per shard."""
    n = len(y)
    shard_of = rng.integers(0, n_shards, n)
    units = []
    for m, per in preds.items():
        clean = per[("clean", 0)]
        for (corr, sev), p in per.items():
            for sh in range(n_shards):
                idx = np.flatnonzero(shard_of == sh)
                conf = np.zeros((len(CLASSES), len(CLASSES)), dtype=int)
                np.add.at(conf, (y[idx], p[idx]), 1)
                units.append(
                    {
                        "schema_version": 1,
                        "run_id": run_id,
                        "model": m,
                        "corruption": corr,
                        "severity": sev,
                        "shard": sh,
                        "n": int(idx.size),
                        "confusion": conf.tolist() if labeled else None,
                        "flips": int(np.sum(p[idx] != clean[idx])),
                        "n_unreadable": 0,
                        "params": {"sigma": sev},
                        "seed": 7,
                        "classes": CLASSES,
                        "_id": f"{m}/{corr}/{sev}/{sh}",  # the store's own key is ignored
                    }
                )
    return units


def bacc(y, p) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(balanced_accuracy_score(y, p))


def brute_force(y, preds, baseline, cells):
    """mCE, rCE, mFR, mean accuracy and Pearson from per-image predictions, with plain loops."""
    out = {}
    corrs = sorted({c for c, _ in cells})
    for m, per in preds.items():
        ce_terms, rce_terms, fr_terms = [], [], []
        e_clean = 1 - bacc(y, per[("clean", 0)])
        b_clean = 1 - bacc(y, preds[baseline][("clean", 0)])
        for c in corrs:
            sevs = [s for cc, s in cells if cc == c]
            e = [1 - bacc(y, per[(c, s)]) for s in sevs]
            b = [1 - bacc(y, preds[baseline][(c, s)]) for s in sevs]
            f = [np.mean(per[(c, s)] != per[("clean", 0)]) for s in sevs]
            fb = [np.mean(preds[baseline][(c, s)] != preds[baseline][("clean", 0)]) for s in sevs]
            ce_terms.append(sum(e) / sum(b))
            den = sum(x - b_clean for x in b)
            if den > 1e-12:
                rce_terms.append(sum(x - e_clean for x in e) / den)
            fr_terms.append(sum(f) / sum(fb))
        accs = [bacc(y, per[k]) for k in cells]
        lfps = [np.mean(per[k] != per[("clean", 0)]) for k in cells]
        out[m] = {
            "acc": 1 - e_clean,
            "mce": np.mean(ce_terms),
            "rce": np.mean(rce_terms) if rce_terms else None,
            "mfr": np.mean(fr_terms),
            "mean_acc": np.mean(accs),
            "corr": np.corrcoef(accs, lfps)[0, 1],
        }
    return out


ALL_CELLS = [(c, s) for c, sevs in SEVERITIES.items() for s in sevs]


# --------------------------------------------------------------------------- end to end


def test_summary_matches_per_image_brute_force():
    rng = np.random.default_rng(0)
    y, preds = simulate(rng)
    summary = summarize(to_units(y, preds, rng), baseline="B")
    expected = brute_force(y, preds, "B", ALL_CELLS)
    assert summary.common_cells == sorted(ALL_CELLS)
    assert [m.model for m in summary.models] == MODELS
    for m in MODELS:
        got, exp = summary.model(m), expected[m]
        assert got.clean_accuracy == pytest.approx(exp["acc"], abs=1e-12)
        assert got.mce == pytest.approx(exp["mce"], rel=1e-12)
        assert got.rce == pytest.approx(exp["rce"], rel=1e-9)
        assert got.mfr == pytest.approx(exp["mfr"], rel=1e-12)
        assert got.mean_corrupted_accuracy == pytest.approx(exp["mean_acc"], abs=1e-12)
        assert got.pearson_acc_lfp == pytest.approx(exp["corr"], abs=1e-10)
        for c, s in ALL_CELLS:
            cell = got.cell(c, s)
            assert cell.accuracy == pytest.approx(bacc(y, preds[m][(c, s)]), abs=1e-12)
            assert cell.lfp == np.mean(preds[m][(c, s)] != preds[m][("clean", 0)])
            assert cell.n == len(y) and cell.in_common
            conf = np.zeros((4, 4), dtype=int)
            np.add.at(conf, (y, preds[m][(c, s)]), 1)
            assert cell.confusion == conf.tolist()


def test_shards_merged_in_any_order_and_any_split_give_identical_metrics():
    rng = np.random.default_rng(1)
    y, preds = simulate(rng)
    reference = summarize(to_units(y, preds, rng, n_shards=1), baseline="A")
    for trial in range(8):
        units = to_units(y, preds, rng, n_shards=int(rng.integers(2, 7)))
        order = rng.permutation(len(units))
        summary = summarize([units[i] for i in order], baseline="A")
        # every metric is identical, bit for bit (integer sums, same float ops)
        assert summary_table(summary) == summary_table(reference)
        for m in MODELS:
            a, b = summary.model(m), reference.model(m)
            assert a.cells == b.cells and a.clean == b.clean
            assert (a.ce_per_corruption, a.rce_per_corruption, a.fr_per_corruption) == (
                b.ce_per_corruption,
                b.rce_per_corruption,
                b.fr_per_corruption,
            )


def test_merge_units_sums_shards():
    rng = np.random.default_rng(2)
    y, preds = simulate(rng, n=30)
    units = to_units(y, preds, rng, n_shards=4)
    cells = merge_units(units)
    assert len(cells) == len(MODELS) * (1 + len(ALL_CELLS))
    cell = cells[("C", "noise", 2)]
    assert isinstance(cell, CellStats)
    assert cell.n == 30 and cell.shards == [0, 1, 2, 3] and cell.run_ids == ["run1"]
    assert cell.flips == int(np.sum(preds["C"][("noise", 2)] != preds["C"][("clean", 0)]))
    conf = np.zeros((4, 4), dtype=int)
    np.add.at(conf, (y, preds["C"][("noise", 2)]), 1)
    assert cell.confusion == conf.tolist()
    # summarize also takes merge_units' output directly
    assert summarize(cells, "A") == summarize(units, "A")


# --------------------------------------------------------------------------- baseline choice


def test_changing_the_baseline_needs_no_recomputation():
    rng = np.random.default_rng(3)
    y, preds = simulate(rng)
    units = to_units(y, preds, rng)
    by_a, by_c = summarize(units, baseline="A"), summarize(units, baseline="C")
    assert by_a.baseline == "A" and by_c.baseline == "C"
    for s, base in ((by_a, "A"), (by_c, "C")):
        own = s.model(base)
        assert own.is_baseline
        assert own.mce == 1.0 and own.rce == 1.0 and own.mfr == 1.0
        exp = brute_force(y, preds, base, ALL_CELLS)
        for m in MODELS:
            assert s.model(m).mce == pytest.approx(exp[m]["mce"], rel=1e-12)
            assert s.model(m).mfr == pytest.approx(exp[m]["mfr"], rel=1e-12)
    # per-corruption ratios invert when the roles swap; baseline-free numbers do not move
    for c in SEVERITIES:
        assert by_a.model("C").ce_per_corruption[c] == pytest.approx(1 / by_c.model("A").ce_per_corruption[c])
        assert by_a.model("C").fr_per_corruption[c] == pytest.approx(1 / by_c.model("A").fr_per_corruption[c])
    assert by_a.model("B").mce != pytest.approx(by_c.model("B").mce)
    for m in MODELS:
        assert by_a.model(m).cells == by_c.model(m).cells
        assert by_a.model(m).pearson_acc_lfp == by_c.model(m).pearson_acc_lfp


def test_unknown_baseline_names_the_choices():
    rng = np.random.default_rng(4)
    y, preds = simulate(rng, n=20)
    with pytest.raises(MetricInputError, match=r"'open_clip:B'.*Did you mean 'B'"):
        summarize(to_units(y, preds, rng), baseline="open_clip:B")
    with pytest.raises(MetricInputError, match=r"Did you mean 'C'"):
        summarize(to_units(y, preds, rng), baseline="c")


# --------------------------------------------------------------------------- labels optional


def test_unlabeled_path_keeps_flip_metrics_and_reports_accuracy_as_none():
    rng = np.random.default_rng(5)
    y, preds = simulate(rng)
    shard_rng = np.random.default_rng(99)
    labeled = summarize(to_units(y, preds, shard_rng), baseline="A")
    shard_rng = np.random.default_rng(99)
    unlabeled = summarize(to_units(y, preds, shard_rng, labeled=False), baseline="A")
    for m in MODELS:
        u, lab = unlabeled.model(m), labeled.model(m)
        assert not u.labeled
        assert u.clean_accuracy is None and u.mean_corrupted_accuracy is None
        assert u.mce is None and u.rce is None and u.pearson_acc_lfp is None
        assert all(c.accuracy is None and c.confusion is None for c in u.cells)
        assert u.mfr == lab.mfr and u.fr_per_corruption == lab.fr_per_corruption
        assert [c.lfp for c in u.cells] == [c.lfp for c in lab.cells]
        assert any("unlabelled" in note for note in u.notes)
    row = summary_table(unlabeled)[1]
    assert row["acc"] is None and row["mce"] is None and row["mfr"] is not None


# --------------------------------------------------------------------------- common cells


def test_only_common_cells_enter_comparisons():
    rng = np.random.default_rng(6)
    y, preds = simulate(rng)
    del preds["C"][("noise", 3)]  # model C was not run at noise severity 3
    del preds["A"][("fog", 2)]  # model A not at fog severity 2
    summary = summarize(to_units(y, preds, rng), baseline="A")
    common = [k for k in ALL_CELLS if k not in {("noise", 3), ("fog", 2)}]
    assert summary.common_cells == sorted(common)
    assert summary.dropped_cells == {"B": [("fog", 2), ("noise", 3)], "C": [("fog", 2)], "A": [("noise", 3)]}
    exp = brute_force(y, preds, "A", common)
    for m in MODELS:
        got = summary.model(m)
        assert got.mce == pytest.approx(exp[m]["mce"], rel=1e-12)
        assert got.rce == pytest.approx(exp[m]["rce"], rel=1e-9)
        assert got.mfr == pytest.approx(exp[m]["mfr"], rel=1e-12)
        assert got.mean_corrupted_accuracy == pytest.approx(exp[m]["mean_acc"], abs=1e-12)
        assert got.pearson_acc_lfp == pytest.approx(exp[m]["corr"], abs=1e-10)
    # a dropped cell is still listed for its model, flagged as outside the aggregates
    assert summary.model("B").cell("noise", 3).in_common is False
    assert summary.model("B").cell("blur", 3).in_common is True


# --------------------------------------------------------------------------- undefined terms


def _unit(model, corr, sev, conf, flips, shard=0, classes=("a", "b")):
    return {
        "schema_version": 1,
        "run_id": "r",
        "model": model,
        "corruption": corr,
        "severity": sev,
        "shard": shard,
        "n": int(np.sum(conf)),
        "confusion": conf,
        "flips": flips,
        "n_unreadable": 0,
        "params": {},
        "seed": 0,
        "classes": list(classes),
    }


def test_baseline_that_does_not_degrade_gives_none_not_inf():
    perfect = [[5, 0], [0, 5]]
    units = [
        _unit("base", "clean", 0, perfect, 0),
        _unit("f", "clean", 0, perfect, 0),
        # the baseline stays perfect and never flips under "rotate": CE, rCE, FR undefined
        _unit("base", "rotate", 1, perfect, 0),
        _unit("f", "rotate", 1, [[4, 1], [1, 4]], 2),
        # under "blur" the baseline degrades: err 0.2, LFP 0.2; f: err 0.4, LFP 0.4
        _unit("base", "blur", 1, [[4, 1], [1, 4]], 2),
        _unit("f", "blur", 1, [[3, 2], [2, 3]], 4),
    ]
    f = summarize(units, baseline="base").model("f")
    assert f.ce_per_corruption == {"blur": pytest.approx(2.0), "rotate": None}
    assert f.rce_per_corruption == {"blur": pytest.approx(2.0), "rotate": None}
    assert f.fr_per_corruption == {"blur": pytest.approx(2.0), "rotate": None}
    assert f.mce == pytest.approx(2.0) and f.rce == pytest.approx(2.0) and f.mfr == pytest.approx(2.0)
    assert any("rotate" in note and "mCE" in note for note in f.notes)
    # with "rotate" alone every term is undefined: None, never inf
    only_rotate = [u for u in units if u["corruption"] != "blur"]
    g = summarize(only_rotate, baseline="base").model("f")
    assert g.mce is None and g.rce is None and g.mfr is None
    assert g.pearson_acc_lfp is None  # a single cell has no correlation
    # and the baseline itself has no defined ratio there either
    assert summarize(only_rotate, baseline="base").model("base").mce is None


def test_missing_clean_pass_makes_rce_undefined():
    units = [
        _unit("base", "blur", 1, [[4, 1], [1, 4]], 2),
        _unit("f", "blur", 1, [[3, 2], [2, 3]], 4),
        _unit("base", "clean", 0, [[5, 0], [0, 5]], 0),
    ]
    f = summarize(units, baseline="base").model("f")
    assert f.clean_accuracy is None and f.clean is None
    assert f.rce is None and f.mce == pytest.approx(2.0)
    assert any("no clean pass" in note for note in f.notes)


def test_labelled_model_against_unlabelled_baseline():
    units = [
        _unit("f", "clean", 0, [[5, 0], [0, 5]], 0),
        _unit("f", "blur", 1, [[3, 2], [2, 3]], 4),
        dict(_unit("base", "clean", 0, [[5, 0], [0, 5]], 0), confusion=None),
        dict(_unit("base", "blur", 1, [[4, 1], [1, 4]], 2), confusion=None),
    ]
    f = summarize(units, baseline="base").model("f")
    # f's own accuracy is known; the comparisons that need the baseline's errors are not
    assert f.clean_accuracy == 1.0 and f.cell("blur", 1).accuracy == pytest.approx(0.6)
    assert f.mce is None and f.rce is None
    assert f.mfr == pytest.approx((4 / 10) / (2 / 10))
    assert any("baseline 'base' is unlabelled" in note for note in f.notes)


# --------------------------------------------------------------------------- bad input


def test_identical_duplicate_units_are_idempotent_but_conflicts_raise():
    u = _unit("f", "blur", 1, [[3, 2], [2, 3]], 4)
    assert merge_units([u, dict(u)]) == merge_units([u])
    conflicting = dict(u, flips=1)
    with pytest.raises(MetricInputError, match="appears twice"):
        merge_units([u, conflicting])


@pytest.mark.parametrize(
    "change, match",
    [
        ({"n": 11}, "confusion counts 10 images but n=11"),
        ({"confusion": [[1, 2, 3], [1, 2, 1]]}, "2×2"),
        ({"confusion": [[-1, 1], [5, 5]]}, "negative"),
        ({"flips": 12}, "exceeds"),
        ({"corruption": "clean", "severity": 0}, "cannot flip"),
        ({"corruption": "clean"}, "severity 0"),
        ({"severity": 0}, ">= 1"),
        ({"schema_version": 3}, "schema_version"),
        ({"classes": ["a", "a"]}, "duplicates"),
    ],
)
def test_invalid_units_raise_naming_the_unit(change, match):
    u = dict(_unit("f", "blur", 1, [[3, 2], [2, 3]], 4), **change)
    with pytest.raises(MetricInputError, match=match) as info:
        merge_units([u])
    assert "model='f'" in str(info.value)


def test_shards_must_agree_on_classes_and_labelling():
    a = _unit("f", "blur", 1, [[3, 2], [2, 3]], 4, shard=0)
    b = _unit("f", "blur", 1, [[3, 2], [2, 3]], 4, shard=1, classes=("a", "c"))
    with pytest.raises(MetricInputError, match="class list"):
        merge_units([a, b])
    c = dict(_unit("f", "blur", 1, [[3, 2], [2, 3]], 4, shard=1), confusion=None)
    with pytest.raises(MetricInputError, match="labelled and unlabelled"):
        merge_units([a, c])
    # different class lists across models cannot be compared
    d = _unit("g", "blur", 1, [[3, 2], [2, 3]], 4, classes=("x", "y"))
    with pytest.raises(MetricInputError, match="different class lists"):
        summarize([a, d], baseline="f")


def test_empty_and_malformed_inputs():
    with pytest.raises(MetricInputError, match="no units"):
        summarize([], baseline="f")
    with pytest.raises(MetricInputError, match="single dict"):
        summarize(_unit("f", "blur", 1, [[3, 2], [2, 3]], 4), baseline="f")
    with pytest.raises(MetricInputError, match="must be a dict"):
        merge_units(["not a unit"])
    empty = dict(_unit("f", "blur", 1, [[0, 0], [0, 0]], 0))
    with pytest.raises(MetricInputError, match="no evaluated image"):
        summarize([empty], baseline="f")


def test_unit_document_model_accepts_store_documents():
    doc = dict(_unit("f", "blur", 1, [[3, 2], [2, 3]], 4), _id="abc")
    u = UnitDocument.model_validate(doc)
    assert u.cell == ("f", "blur", 1) and u.n == 10


def test_summary_table_rows():
    rng = np.random.default_rng(7)
    y, preds = simulate(rng, n=40)
    summary = summarize(to_units(y, preds, rng), baseline="A")
    rows = summary_table(summary)
    assert [r["model"] for r in rows] == MODELS
    assert [r["baseline"] for r in rows] == [True, False, False]
    for row, m in zip(rows, summary.models):
        assert row["acc"] == m.clean_accuracy and row["mce"] == m.mce and row["rce"] == m.rce
        assert row["mfr"] == m.mfr and row["corr"] == m.pearson_acc_lfp
        assert row["cells"] == len(ALL_CELLS)
    # round-trips through JSON (the store / frontend boundary)
    assert type(summary).model_validate_json(summary.model_dump_json()) == summary

"""Compare's read side (``frontend.data``, no Streamlit): the default selection, the baseline's choice, refused
mixed-baseline means, a domain counted once, families without real-shift cells. Hand-made frames, hand arithmetic."""

from __future__ import annotations

import fe_synthetic as syn
import numpy as np
import pandas as pd
import pytest
from fe_synthetic import AUG, NIGHT, NIGHT_UI, NIGHT_W, SHOP, XRAY, XRAY_UI

from domainbench.frontend import data
from domainbench.store import Store


@pytest.fixture
def records(store: Store) -> dict[str, object]:
    syn.populate_compare(store)
    return {r.run_id: r for r in store.list_runs()}


def test_default_takes_the_setup_most_domains_share_and_the_most_complete_run_of_each(records, store: Store) -> None:
    picked = data.default_selection(store.list_runs())
    assert picked.runs == [SHOP, XRAY, NIGHT]
    assert picked.setup == ("sample[:60]", 60, ("embedded:good", "embedded:weak"))
    assert list(picked.left_out) == ["fashion photos, augmented"]
    assert not data.comparability([records[r] for r in picked.runs])  # nothing it picks is then flagged
    # an adaptive run of the night domain, newer, is passed over for the run with every image in every cell
    store.update_run(NIGHT_W, created_at="2025-02-01T00:00:00+00:00",
                     config=records[NIGHT_W].config.model_copy(update={"adaptive": True}))
    assert data.default_selection(store.list_runs()).runs[-1] == NIGHT
    # a limit keeps the newest domains and names the others
    few = data.default_selection(store.list_runs(), limit=2)
    assert few.runs == [SHOP, XRAY]
    assert few.left_out["night-time dash-cam footage in the rain"].startswith("more than 2 domains")


def test_fewer_domains_lose_to_more_even_with_fewer_images(records, store: Store) -> None:
    # 30-image runs in three domains outnumber the 60-image runs' domains once two of those are gone
    for rid in (NIGHT, NIGHT_W, XRAY):
        store.update_run(rid, status="failed")
    syn.populate(store, run_id="20250108-000000-ui-5a5a", shards=1, domain=syn.SHOP_TEXT,
                 created_at="2025-01-08T00:00:00+00:00")
    store.update_run("20250108-000000-ui-5a5a", domain_id="d" + SHOP[-4:])
    picked = data.default_selection(store.list_runs())
    assert picked.setup[1] == 30 and sorted(picked.runs) == sorted(["20250108-000000-ui-5a5a", XRAY_UI, NIGHT_UI])


def test_the_baseline_comes_from_included_runs_and_is_their_own(records) -> None:
    chosen = [records[r] for r in (NIGHT, XRAY, AUG)]
    included, flagged = data.included_runs(chosen, include_flagged=False)
    assert set(flagged) == {AUG} and [r.run_id for r in included] == [NIGHT, XRAY]
    shared = data.shared_of(included)
    assert shared == ["embedded:good", "embedded:weak"]
    assert data.default_baseline(included, shared) == "embedded:good"
    # the run pages' baseline wins by majority: two of three name embedded:weak
    trio = [records[NIGHT_W], records[NIGHT_W].model_copy(update={"run_id": "x"}), records[NIGHT]]
    assert data.default_baseline(trio, shared) == "embedded:weak"
    # included anyway, the one-model run narrows the choice (it is then a compared run)
    with_aug, _ = data.included_runs(chosen, include_flagged=True)
    assert data.shared_of(with_aug) == ["embedded:weak"]


def frame(rows: list[tuple[str, str, str, str, float, float]]) -> pd.DataFrame:
    """(group, domain_id, baseline, model, mean corrupted accuracy, mce) rows of Compare's per run × model frame."""
    return pd.DataFrame([{"run": f"{g}-{b}", "group": g, "domain_id": d, "baseline": b, "model": m, "acc": a + 0.1,
                          "mean_corrupted_acc": a, "mce": c} for g, d, b, m, a, c in rows])


def test_a_column_with_mixed_baselines_is_refused_and_one_with_one_is_averaged() -> None:
    f = frame([("night", "n", "A", "A", 0.6, 1.0), ("night", "n", "B", "A", 0.7, 0.6),
               ("xray", "x", "A", "A", 0.5, 1.0), ("xray", "x", "A", "A", 0.3, 1.0)])
    assert data.mixed_baselines(f) == {"night": ["A", "B"]}
    mce = data.metric_matrix(f, "mce")
    assert np.isnan(mce.loc["A", "night"]) and mce.loc["A", "xray"] == 1.0  # never (1.0 + 0.6) / 2 = 0.8
    assert data.metric_matrix(f, "mean_corrupted_acc").loc["A", "night"] == pytest.approx(0.65)  # no ratio: averaged
    ranking = data.ranking_frame(f)
    assert np.isnan(ranking.loc[0, "mean mCE"]) and ranking.loc[0, "note"] == data.MIXED_MCE


def test_a_domain_counts_once_in_the_ranking() -> None:
    # model A: two columns of domain n (0.2, 0.4) and one of domain x (0.9); model B: domain x only
    f = frame([("n[60]", "n", "A", "A", 0.2, 1.0), ("n[30]", "n", "A", "A", 0.4, 1.0),
               ("x", "x", "A", "A", 0.9, 1.0), ("x", "x", "A", "B", 0.5, 1.2)])
    ranking = data.ranking_frame(f).set_index("model")
    assert ranking.loc["A", "domains"] == 2 and ranking.loc["B", "domains"] == 1
    assert ranking.loc["A", "corrupted acc %"] == pytest.approx(100 * (0.3 + 0.9) / 2)  # not (0.2 + 0.4 + 0.9) / 3
    assert ranking.loc["B", "note"] == "averaged over 1 of 2 domains" and ranking.loc["A", "note"] == ""
    # the interval's draws are averaged the same way: domain first
    draws = {f"{g}-A": data.RunDraws(f"{g}-A", g, 0, 2, models={
        "A": {"mean_corrupted_accuracy": np.array([v, v + 0.1])},
        **({"B": {"mean_corrupted_accuracy": np.array([0.5, 0.6])}} if g == "x" else {})})
        for g, v in (("n[60]", 0.2), ("n[30]", 0.4), ("x", 0.9))}
    over = data._over_groups(f, draws, "mean_corrupted_acc")
    np.testing.assert_allclose(over["A"], [(0.3 + 0.9) / 2, (0.4 + 1.0) / 2])


def test_families_leave_real_shift_cells_out_and_put_compositions_in_their_own_column() -> None:
    per = pd.DataFrame([
        {"run": "r", "group": "g", "baseline": "A", "model": "A", "corruption": c, "family": data.family_of(c),
         "ce": ce, "rce": None, "fr": None, "accuracy": a}
        for c, a, ce in (("gaussian_noise", 0.6, 1.0), ("shot_noise", 0.4, 1.0), ("compose:dark", 0.3, 1.0),
                         ("shift:dimshop", 0.9, None), ("my_plugin_blur", 0.5, 1.0))])
    fam = data.family_matrix(per, "accuracy")
    assert sorted(fam.columns) == ["composed", "my_plugin_blur", "noise"]  # no "unknown", no shift
    assert fam.loc["A", "noise"] == pytest.approx(0.5) and fam.loc["A", "composed"] == pytest.approx(0.3)
    assert data.shift_rows(per)["corruption"].tolist() == ["shift:dimshop"]
    # the same corruption under two baselines: its ratio is refused, its accuracy is not
    two = pd.concat([per, per.assign(run="s", baseline="B", ce=0.5)], ignore_index=True)
    assert np.isnan(data.family_matrix(two, "ce").loc["A", "noise"])
    assert data.family_matrix(two, "accuracy").loc["A", "noise"] == pytest.approx(0.5)

"""Compare cannot mislead (issue 37, defects 1-4 and 12), through ``AppTest`` on a store like the reviewer's: runs of
one domain with different baselines, a real-shift run with a composition, 30-image runs launched from the UI and a
one-model run. The numbers are checked against the runs' own reports (the run pages' numbers)."""

from __future__ import annotations

import re

import fe_synthetic as syn
import numpy as np
import pytest
from fe_synthetic import AUG, NIGHT, NIGHT_UI, NIGHT_W, SHOP, XRAY, XRAY_UI
from streamlit.testing.v1 import AppTest
from test_app import APP, texts

from domainbench import query
from domainbench.store import Store

OWN = "(each run's own)"


@pytest.fixture
def misleading(store: Store) -> Store:
    syn.populate_compare(store)
    return store


def page(runs: list[str] | None = None, **params: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=90)
    if runs is not None:
        at.query_params["runs"] = ",".join(runs)
    for k, v in params.items():
        at.query_params[k] = v
    at.run()
    at.switch_page("views/compare.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def table(at: AppTest, has: str):  # noqa: ANN201 - a DataFrame
    return next(d.value for d in at.dataframe if has in d.value.columns or d.value.index.name == has)


def heatmap(at: AppTest):  # noqa: ANN201 - the models × domains table of the heatmap's metric
    return next(d.value for d in at.dataframe if str(d.value.index.name).startswith("model ·")
                and "family" not in str(d.value.index.name))


def mce_of(store: Store, run: str, model: str, baseline: str | None = None) -> float:
    return next(r.mce for r in query.report(store, run, baseline).table() if r.model == model)


def test_1_default_is_the_most_complete_comparable_run_per_domain_and_the_run_pages_baseline(misleading: Store) -> None:
    at = page()
    # not the newest run of each domain (the 30-image UI runs, the one-model run): the 60-image runs of both models
    assert at.multiselect(key="compare-runs").value == [SHOP, XRAY, NIGHT]
    assert "Not comparable" not in texts(at.warning)  # nothing it picked is then excluded
    assert "fashion photos, augmented (no finished run on sample[:60] with 60 images" in texts(at.caption)
    # the baseline the three run pages use (the first model), not the one-model run's
    assert at.selectbox(key="compare-baseline").value == "embedded:good"
    heat = heatmap(at)
    # the value before its interval (the shop run stores per-image outcomes, so it has one)
    assert [t.split()[0] for t in heat.loc["embedded:good"]] == ["1.000"] * 3
    assert [t.split()[0] for t in heat.loc["embedded:weak"]] == [
        f"{mce_of(misleading, r, 'embedded:weak'):.3f}" for r in (SHOP, XRAY, NIGHT)]


def test_1_the_shared_baseline_comes_only_from_included_runs(misleading: Store) -> None:
    at = page([NIGHT, XRAY, AUG])  # the one-model run is flagged and left out...
    assert AUG in texts(at.warning) and "Not comparable" in texts(at.warning)
    # ...so it does not narrow the baseline's choice to its one model
    assert at.selectbox(key="compare-baseline").options == ["embedded:good", "embedded:weak", OWN]
    assert at.selectbox(key="compare-baseline").value == "embedded:good"


def test_2_a_column_with_mixed_baselines_is_refused_with_the_reason(misleading: Store) -> None:
    at = page([NIGHT, NIGHT_W], baseline=OWN)
    assert at.selectbox(key="compare-baseline").value == OWN
    warning = texts(at.warning)
    assert "Ratios refused" in warning and "baselines embedded:good, embedded:weak" in warning
    heat = heatmap(at)
    assert heat.shape == (2, 1) and heat.iloc[:, 0].tolist() == ["—", "—"]  # never the mean of 1.0 and another ratio
    ranking = table(at, "rank change")
    assert ranking["mean mCE"].isna().all()
    # with one shared baseline the same column is a ratio again: the two runs' values (identical here) averaged
    at.selectbox(key="compare-baseline").set_value("embedded:good").run()
    assert "Ratios refused" not in texts(at.warning)
    assert heatmap(at).loc["embedded:weak"].iloc[0] == f"{mce_of(misleading, NIGHT, 'embedded:weak'):.3f}"


def test_3_shift_cells_and_compositions_never_enter_corruption_families(misleading: Store) -> None:
    at = page([SHOP])
    at.radio(key="compare-family-metric").set_value("accuracy").run()
    family = next(d.value for d in at.dataframe if "family" not in d.value.columns and "composed" in d.value.columns)
    assert sorted(family.columns) == ["composed", "noise", "photometric"]  # no "unknown", no shift cell
    report = query.report(misleading, SHOP)
    for model in ("embedded:good", "embedded:weak"):
        cells = {(c.corruption, c.severity): c.accuracy for c in report.model(model).cells}
        noise = np.mean([cells[("gaussian_noise", s)] for s in (1, 2, 3)])
        assert family.loc[model, "noise"].startswith(f"{100 * noise:.1f} % (")
        assert family.loc[model, "composed"].startswith(f"{100 * cells[('compose:dark', 1)]:.1f} % (")
    assert "Real shift: your own images" in texts(at.subheader)
    shift = table(at, "shift")
    assert shift["shift"].tolist() == ["shift:dimshop"] * 2
    ci = shift[next(c for c in shift.columns if c.endswith("(95 % CI)"))].tolist()
    # each with the run page's interval of that cell
    ri = query.intervals(misleading, report)
    for text, model, value in zip(ci, ("embedded:good", "embedded:weak"), (50.0, 20.0), strict=True):
        low, high = ri.cell(model, "shift:dimshop", 1).balanced_accuracy
        assert text == f"{value:.1f} % ({100 * low:.1f}–{100 * high:.1f})"


def test_4_intervals_are_written_as_their_ends(misleading: Store) -> None:
    at = page([SHOP])
    heat = heatmap(at)
    for text in heat.to_numpy().ravel():
        low, high = map(float, re.fullmatch(r"\d\.\d{3} \((\d\.\d{3})–(\d\.\d{3})\)", text).groups())
        assert low <= float(text.split()[0]) <= high
    shown = "\n".join(str(d.value.to_csv()) for d in at.dataframe) + texts(at.markdown) + texts(at.caption)
    assert "±" not in shown


def test_12_a_domain_counts_once_and_fewer_domains_are_marked(misleading: Store) -> None:
    at = page([NIGHT, NIGHT_UI, XRAY, XRAY_UI, AUG], flagged="1")
    assert at.checkbox(key="compare-include-flagged").value
    assert heatmap(at).shape == (2, 5)  # five columns (setups kept apart)...
    ranking = table(at, "rank change").set_index("model")
    assert ranking.loc["embedded:weak", "domains"] == 3  # ...of three domains
    assert ranking.loc["embedded:good", "domains"] == 2
    assert ranking.loc["embedded:good", "note"] == "averaged over 2 of 3 domains"
    assert ranking.loc["embedded:weak", "note"] == ""
    assert "embedded:good: averaged over 2 of 3 domains" in texts(at.warning)

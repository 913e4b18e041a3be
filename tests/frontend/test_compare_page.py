"""Compare through ``AppTest``: the default picks corruption runs (never FMR) and says so, one shared
baseline by default, ratio colours centred on 1.0, the whole state in the URL, FMR runs apart."""

from __future__ import annotations

import fe_synthetic as syn
from test_app import DONE, texts
from test_run_pages import XRAY, compare_page, param

from domainbench.store import Store

FMR = "20250104-000000-fmr-5678"


def test_default_never_takes_an_fmr_run_and_says_what_it_picked(populated: Store) -> None:
    syn.populate_fmr(populated, run_id=FMR, domain="chest x-rays from portable scanners")  # newest, xray's domain...
    populated.update_run(FMR, domain_id="d" + XRAY[-4:])  # ...and the same domain id
    at = compare_page()
    assert at.multiselect(key="compare-runs").value == [XRAY, DONE]
    assert "most complete finished corruption run of each domain (2 runs" in texts(at.caption)
    assert "1 FMR run(s) are compared in their own section" in texts(at.caption)
    assert not at.error and "Not comparable" not in texts(at.warning)
    ranking = next(d.value for d in at.dataframe if "rank change" in d.value.columns)
    assert ranking["domains"].tolist() == [2, 2]


def test_fmr_runs_chosen_are_compared_in_their_own_section(populated: Store) -> None:
    syn.populate_fmr(populated, run_id=FMR, oracle=["embedded:good"])
    at = compare_page([DONE, FMR])
    assert "FMR runs" in texts(at.subheader)
    fmr = next(d.value for d in at.dataframe if "FMR" in d.value.columns)
    assert fmr["run"].tolist() == [FMR] and fmr["note"].iloc[0] == "oracle member: FMR by construction"
    assert "by construction" in texts(at.warning)
    heat = next(d.value for d in at.dataframe if "embedded:good" in d.value.index)
    assert heat.shape == (2, 1)  # the corruption run only


def test_one_shared_baseline_by_default_and_ratio_colours_centred_on_one(populated: Store) -> None:
    at = compare_page([DONE, XRAY])
    assert at.selectbox(key="compare-baseline").value == "embedded:good"  # not "each run's own"
    fig = at.get("plotly_chart")[0].proto.spec
    import json

    heat = json.loads(fig)["data"][0]
    assert heat["type"] == "heatmap" and heat["zmid"] == 1.0
    assert "1.0 = as robust as the baseline" in texts(at.caption)


def test_metric_baseline_and_runs_survive_a_reload(populated: Store) -> None:
    at = compare_page([DONE, XRAY])
    at.selectbox(key="compare-metric").set_value("acc").run()
    at.selectbox(key="compare-baseline").set_value("embedded:weak").run()
    assert (param(at, "metric"), param(at, "baseline"), param(at, "runs")) == ("acc", "embedded:weak", f"{DONE},{XRAY}")
    # a new session opened on the same link: the same state
    from streamlit.testing.v1 import AppTest
    from test_app import APP

    again = AppTest.from_file(APP, default_timeout=60)
    for k in ("runs", "metric", "baseline"):
        again.query_params[k] = param(at, k)
    again.run()
    again.switch_page("views/compare.py").run()
    assert again.selectbox(key="compare-metric").value == "acc"
    assert again.selectbox(key="compare-baseline").value == "embedded:weak"
    heat = next(d.value for d in again.dataframe if "embedded:good" in d.value.index)
    # clean accuracy in %; these runs store no per-image outcomes, so no interval
    assert heat.loc["embedded:good"].tolist() == ["90.0 %", "90.0 %"]

"""Issue 37's small run-page defects (16): an unlabelled run's Per corruption tab opens on a number it has, the
per-corruption ratios are named CE / rCE / FR as everywhere else, the severity axis has the run's severities and no
other, and the planner's internal prompt hash is not in the reader's line."""

from __future__ import annotations

import fe_synthetic as syn
from test_app import run_page

from domainbench.frontend import figures
from domainbench.store import Store


def test_16_an_unlabelled_runs_per_corruption_tab_opens_on_fr_not_the_undefined_ce(store: Store) -> None:
    syn.populate(store, run_id="r-unlabelled", labelled=False)
    at = run_page("r-unlabelled", "Per corruption")
    assert at.radio(key="percorr-r-unlabelled").value == "fr"
    # a labelled run still opens on CE
    syn.populate(store, run_id="r-labelled")
    assert run_page("r-labelled", "Per corruption").radio(key="percorr-r-labelled").value == "ce"


def test_16_per_corruption_ratios_are_named_as_everywhere_else(store: Store) -> None:
    syn.populate(store, run_id="r-labelled", per_image=True)
    at = run_page("r-labelled", "Per corruption")
    table = next(d for d in at.dataframe if "corruption" in d.value.columns and "accuracy %" in d.value.columns)
    order = list(table.proto.column_order)
    assert {"CE (95 % CI)", "rCE (95 % CI)", "FR (95 % CI)"} <= set(order)
    assert not {"ce", "rce", "fr", "ce (95 % CI)"} & set(table.value.columns)


def test_16_the_severity_axis_has_no_stray_severity(store: Store) -> None:
    syn.populate(store, run_id="r-labelled")  # noise is unsafe at severities 3-5: a band reaching 5.5
    fig = figures.severity_lines(store.get_report("r-labelled"))
    top = max(c.severity for m in store.get_report("r-labelled").models for c in m.cells)
    for axis in (k for k in fig.layout.to_plotly_json() if k.startswith("xaxis")):
        x = fig.layout[axis]
        assert list(x.tickvals) == list(range(top + 1)), axis
        assert x.range[1] < top + 1, axis  # no room for a tick past the run's last severity


def test_16_the_planners_prompt_hash_is_on_hover_not_in_the_caption(store: Store, monkeypatch) -> None:  # noqa: ANN001
    from test_new_domain import fake_plan, page

    def hashed(text: str, **kw):  # noqa: ANN003, ANN202 - a plan whose prompt version is a hash, as the LLM planner's is
        cfg = fake_plan(text)
        return cfg.model_copy(update={"planner": cfg.planner.model_copy(update={"prompt_version": "3f9a1c2e7b"})})

    from domainbench.frontend import data

    monkeypatch.setattr(data, "plan_domain", hashed)
    at = page()
    at.text_area(key="domain-text").set_value("dash-cam footage at night")
    next(b for b in at.button if b.label == "Plan").click().run()
    assert not at.exception
    line = next(c for c in at.caption if c.value.startswith("planner "))
    assert "3f9a1c2e7b" not in line.value and " prompt " not in line.value, line.value
    assert line.proto.help == "planner prompt version: 3f9a1c2e7b"

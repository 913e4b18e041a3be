"""The Runs list (issue 37, defect 15): a kind column (FMR, adaptive, real shift, composed), the run id first, pinned
and as wide as the longest id (never cut), and a progress bar that is not red when a run is done."""

from __future__ import annotations

import json

import fe_synthetic as syn
from fe_synthetic import AUG, NIGHT, SHOP
from test_app import app

from domainbench.frontend import data
from domainbench.store import Store

FMR = "20250104-000000-fmr-5678"


def test_runs_list_has_a_kind_column_and_never_cuts_an_id(store: Store) -> None:
    syn.populate_compare(store)
    syn.populate_fmr(store, run_id=FMR)
    store.update_run(NIGHT, config=store.get_run(NIGHT).config.model_copy(update={"adaptive": True}))
    at = app()
    table = next(d for d in at.dataframe if "progress %" in d.value.columns)
    kinds = table.value.set_index("run")["kind"]
    assert kinds[FMR] == "FMR" and kinds[NIGHT] == "corruption + adaptive"
    assert kinds[SHOP] == "corruption + real shift + composed" and kinds[AUG] == "corruption"
    config = json.loads(table.proto.columns)
    assert list(table.proto.column_order)[:3] == ["run", "status", "kind"]
    longest = max(map(len, table.value["run"]))
    assert config["run"]["pinned"] is True and config["run"]["width"] >= 7.5 * longest
    progress = config["progress %"]["type_config"]
    assert progress.get("color") not in (None, "red", "auto", "primary"), progress
    assert data.run_kind(store.get_run(FMR)) == "FMR"

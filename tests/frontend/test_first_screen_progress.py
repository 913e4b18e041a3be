"""The run page's first screen (issue 37, defect 5): "evaluated" counts what the run meant to evaluate (a finished
adaptive run's early-stopped cells, a real-shift cell's own images) and the run kind is shown beside it."""

from __future__ import annotations

import fe_synthetic as syn
from fe_synthetic import NIGHT, SHOP, XRAY
from test_app import run_page, texts

from domainbench import query
from domainbench.frontend import progress
from domainbench.store import Store


def _evaluated(at) -> str:  # noqa: ANN001 - an AppTest
    return next(m.value for m in at.metric if m.label == "evaluated")


def test_a_finished_adaptive_run_is_fully_evaluated_and_says_it_was_adaptive(store: Store) -> None:
    syn.populate_compare(store)
    run = store.get_run(NIGHT)
    # the dataset held 90 images; every cell stopped at 60 (decided early)
    store.update_run(NIGHT, config=run.config.model_copy(update={"adaptive": True}),
                     dataset=run.dataset.model_copy(update={"size": 90}))
    at = run_page(NIGHT)
    assert _evaluated(at) == "100 %"
    assert "Run kind: corruption + adaptive. Cells stop adaptively once decided: 60 images per cell of 90" in texts(at.caption)
    # a run like it, not adaptive: two thirds of its images evaluated
    store.update_run(XRAY, dataset=store.get_run(XRAY).dataset.model_copy(update={"size": 90}))
    assert _evaluated(run_page(XRAY)) == "67 %"


def test_a_shift_cell_plans_its_own_images(store: Store) -> None:
    syn.populate_compare(store)
    run = store.update_run(SHOP, dataset=store.get_run(SHOP).dataset.model_copy(update={"size": 90}))
    report = query.report(store, SHOP)
    cells = query.expected_cells(run)  # 2 models × (clean + 5 severities + the composition + the shift)
    done = progress.progress_of(run, report, 0, cells)
    # every cell has 60 images: the 14 synthetic cells plan 90, the 2 shift cells their own 60
    assert cells == 16 and done.images_planned == 14 * 90 + 2 * 60 and done.images_done == 16 * 60
    assert done.cells_complete == 2
    assert "real shift" in texts(run_page(SHOP).caption)

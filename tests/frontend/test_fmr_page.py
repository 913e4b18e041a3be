"""An FMR run's page through ``AppTest``: its own layout, columns defined, a gallery that opens on
something to see, and a prominent warning when the tested model is in the oracle zoo."""

from __future__ import annotations

import fe_synthetic as syn
import pytest
from test_app import run_page, texts

from domainbench.store import Store
from domainbench.frontend.views.runs import TABS

FMR = "20250104-000000-fmr-5678"


def test_fmr_run_has_its_own_layout_and_opens_on_a_flipped_image(store: Store) -> None:
    syn.populate_fmr(store, run_id=FMR)
    at = run_page(FMR)
    assert not at.error and not at.exception
    assert not at.tabs or not {t.label for t in at.tabs} & set(TABS)  # no empty evaluation tabs
    table = next(d.value for d in at.dataframe if "FMR" in d.value.columns)
    assert table["SA %"].iloc[0] == pytest.approx(100 * 5 / 6)
    assert "No perturbed images" not in texts(at.info)
    assert at.toggle[0].value is True and len(at.get("image")) >= 1  # the flipped image is shown
    assert "oracle member" not in texts(at.error)


def test_gallery_of_a_run_without_flips_opens_on_every_perturbed_image(store: Store) -> None:
    syn.populate_fmr(store, run_id=FMR, flipped=False)
    at = run_page(FMR)
    assert at.toggle[0].value is False and at.toggle[0].disabled
    assert len(at.get("image")) >= 1 and "No perturbed images" not in texts(at.info)


def test_tested_model_in_the_oracle_zoo_is_a_prominent_warning(store: Store) -> None:
    syn.populate_fmr(store, run_id=FMR, oracle=["embedded:good"])
    at = run_page(FMR)
    assert "embedded:good is one of the 1 oracle members" in texts(at.error)
    assert "by construction" in texts(at.error)
    table = next(d.value for d in at.dataframe if "FMR" in d.value.columns)
    assert table["note"].iloc[0] == "oracle member: FMR by construction"

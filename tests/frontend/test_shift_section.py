"""The run page's real-shift section: the sentence `show` prints, the shift cells marked real."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image
from test_app import run_page, texts

from domainbench import query
from domainbench.records.config import CorruptionChoice, DomainConfig, RealShift, RunConfig
from domainbench.data import open_dataset
from domainbench.engine.runner import Engine
from domainbench.frontend import figures, shift_section
from domainbench.frontend.views.runs import TABS
from domainbench.store import Store, open_store

N = 16


@pytest.fixture(scope="module")
def shift_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run with two real shifts, built once: dark photos in class folders (labelled, not paired) and the
    same photos named by sample index without folders (paired, unlabelled)."""
    tmp = tmp_path_factory.mktemp("shift-run")
    ds = open_dataset("sample").subset(N)
    for img, label, index, k in zip(ds.arrays, ds.labels, ds.origin, range(N), strict=True):
        folder = tmp / "night" / ds.classes[label].replace(" ", "_")
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray((img // 3).astype(np.uint8)).save(folder / f"photo{k}.png")  # not named like the sample
        (tmp / "scan").mkdir(exist_ok=True)
        Image.fromarray(255 - img).save(tmp / "scan" / f"{index}.png")
    domain = DomainConfig(domain="night", corruptions=[CorruptionChoice(name="brightness", severities=[1, 4])],
                          shift=[RealShift(name="night", path=str(tmp / "night")), RealShift(name="scan", path=str(tmp / "scan"))])
    cfg = RunConfig(dataset="sample", limit=N, workers=0, threat=False, stability_images=4, stability_points=2)
    store = open_store(None, tmp / "home")
    try:
        Engine(store).start(domain, cfg, run_id="shiftrun")
    finally:
        store.close()
    return tmp / "home"


@pytest.fixture
def shift_run(shift_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv("DOMAINBENCH_HOME", str(shift_home))
    monkeypatch.delenv("DOMAINBENCH_MONGO_URI", raising=False)
    yield "shiftrun"


def test_the_run_page_says_which_cell_behaves_like_the_shift_and_marks_it_real(shift_run: str) -> None:
    store = open_store()
    try:
        report = query.report(store, shift_run)
        night, scan = query.real_shift(store, report)
    finally:
        store.close()
    assert scan.measure == "flip rate" and "the synthetic cell that behaves most like them (closest flip rate)" in scan.sentence
    at = run_page(shift_run)
    assert not at.error
    shown = texts(at.markdown)
    assert f"On your {N} real `night` images, balanced accuracy" in night.sentence
    assert shift_section.markdown_safe(night.sentence) in shown and shift_section.markdown_safe(scan.sentence) in shown
    frame = next(d.value for d in at.dataframe if "drop (points)" in d.value.columns)
    assert set(frame["cell"]) == {"shift:night", "shift:scan"} and set(frame["kind"]) == {"real"}
    frame = frame[frame["cell"] == "shift:night"]
    # labelled, not paired (the files are not named like the sample's): accuracy and its drop, no flip rate
    for m in report.models:
        row = frame.set_index("model").loc[m.model]
        cell = next(c for c in m.cells if c.corruption == "shift:night")
        assert row["images"] == N and row["accuracy %"] == pytest.approx(100 * cell.accuracy)
        assert row["drop (points)"] == pytest.approx(100 * (m.clean_accuracy - cell.accuracy))
        assert pd.isna(row["flip probability %"])  # missing, never 0
    assert figures.cell_label("shift:night", 1) == "shift:night (real)"


@pytest.mark.parametrize("tab", list(TABS))
def test_every_tab_of_a_run_with_shifts_draws_without_error(shift_run: str, tab: str) -> None:
    at = run_page(shift_run, tab)
    assert not at.error, texts(at.error)


def test_a_run_without_shifts_shows_no_section(populated: Store) -> None:
    at = run_page("20250101-000000-night-abcd")
    assert "Your own shifted images" not in texts(at.subheader)

"""The run page's real-shift section: the sentence `show` prints, the shift cells marked real."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image
from test_app import run_page, texts

from domainbench import query
from domainbench.config import CorruptionChoice, DomainConfig, RealShift, RunConfig
from domainbench.data import open_dataset
from domainbench.engine.runner import Engine
from domainbench.frontend import figures, shift_section
from domainbench.store import Store

N = 16


@pytest.fixture
def shift_run(store: Store, tmp_path: Path) -> str:
    ds = open_dataset("sample").subset(N)
    for img, label, k in zip(ds.arrays, ds.labels, range(N), strict=True):
        folder = tmp_path / "night" / ds.classes[label].replace(" ", "_")
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray((img // 3).astype(np.uint8)).save(folder / f"photo{k}.png")  # dark, not named like the sample
    domain = DomainConfig(domain="night", corruptions=[CorruptionChoice(name="brightness", severities=[1, 4])],
                          shift=[RealShift(name="night", path=str(tmp_path / "night"))])
    cfg = RunConfig(dataset="sample", limit=N, workers=0, stability=False, threat=False)
    return Engine(store).start(domain, cfg, run_id="shiftrun")


def test_the_run_page_says_which_cell_behaves_like_the_shift_and_marks_it_real(shift_run: str, store: Store) -> None:
    report = query.report(store, shift_run)
    (match,) = query.shift_matches_of(report)
    at = run_page(shift_run)
    assert not at.error
    shown = texts(at.markdown)
    assert "Your `night` images behave most like `brightness` at severity" in shown
    assert shift_section._markdown_safe(match.sentence) in shown
    frame = next(d.value for d in at.dataframe if "drop (points)" in d.value.columns)
    assert set(frame["cell"]) == {"shift:night"} and set(frame["kind"]) == {"real"}
    # labelled, not paired (the files are not named like the sample's): accuracy and its drop, no flip rate
    for m in report.models:
        row = frame.set_index("model").loc[m.model]
        cell = next(c for c in m.cells if c.corruption == "shift:night")
        assert row["images"] == N and row["accuracy %"] == pytest.approx(100 * cell.accuracy)
        assert row["drop (points)"] == pytest.approx(100 * (m.clean_accuracy - cell.accuracy))
        assert pd.isna(row["flip rate %"])  # missing, never 0
    assert figures.cell_label("shift:night", 1) == "shift:night (real)"


def test_a_run_without_shifts_shows_no_section(populated: Store) -> None:
    at = run_page("20250101-000000-night-abcd")
    assert "Your own shifted images" not in texts(at.subheader)

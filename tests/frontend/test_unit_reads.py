"""A page's first open reads each run's unit documents once: the intervals, the bootstrap resamples of Compare's
averages and the paired verdicts all start from the run's per-image outcomes (``query.outcomes``), which the UI
keeps per run state (``cached.run_outcomes``) instead of reading them for each."""

from __future__ import annotations

import re

from collections import Counter
from collections.abc import Iterator

import pytest
from test_app import run_page, texts
from test_compare_intervals import NIGHT, XRAY, two_domains  # noqa: F401 - two finished runs, per-image predictions
from test_run_pages import compare_page

from domainbench import query
from domainbench.store import Store
from domainbench.store.base import Store as BaseStore
from domainbench.store.collections import Collection


@pytest.fixture
def unit_reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[str]]:
    """Run id -> how many times a run's whole set of unit documents was read (by any store the pages open)."""
    reads: Counter[str] = Counter()
    find = BaseStore.find

    def counting(self: BaseStore, collection: str, **where: object) -> list[object]:
        if collection == Collection.UNITS and set(where) == {"run_id"}:
            reads[str(where["run_id"])] += 1
        return find(self, collection, **where)

    # the statistics read a run's per-image arrays without validating each document (``Store.unit_predictions``):
    # a whole read of the run's units all the same
    predictions = BaseStore.unit_predictions

    def counting_predictions(self: BaseStore, run_id: str) -> list[dict[str, object]]:
        reads[run_id] += 1
        return predictions(self, run_id)

    monkeypatch.setattr(BaseStore, "find", counting)
    monkeypatch.setattr(BaseStore, "unit_predictions", counting_predictions)
    yield reads


def test_compare_first_open_reads_each_runs_units_once(two_domains: Store, unit_reads: Counter[str]) -> None:
    at = compare_page([NIGHT, XRAY])
    assert not at.error, texts(at.error)
    # what reads them: the verdict of each domain and the intervals of the averages
    assert sum(t.value.startswith(("night-time", "chest x-rays")) for t in at.text) >= 2
    assert any(re.search(r" \(\d+\.\d+–\d+\.\d+\)$", v) for d in at.dataframe for v in d.value.astype(str).to_numpy().ravel())
    assert unit_reads == {NIGHT: 1, XRAY: 1}
    compare_page([NIGHT, XRAY])  # another tab: everything from the caches
    assert unit_reads == {NIGHT: 1, XRAY: 1}


def test_run_page_first_open_reads_the_runs_units_once(two_domains: Store, unit_reads: Counter[str]) -> None:
    at = run_page(NIGHT)
    assert not at.error, texts(at.error)
    # what reads them: the verdict and the summary's intervals
    assert any(m.value.startswith("**Verdict**") for m in at.markdown)
    assert any("clean acc (95 % CI)" in d.value.columns for d in at.dataframe)
    assert unit_reads == {NIGHT: 1}


def test_a_command_reads_a_runs_units_once_for_its_intervals_and_verdicts(two_domains: Store,
                                                                           unit_reads: Counter[str]) -> None:
    read = query.outcomes_once()
    report = two_domains.get_report(NIGHT)
    query.intervals(two_domains, report, read=read)
    query.comparison(two_domains, [NIGHT], read=read)
    assert unit_reads == {NIGHT: 1}
    assert query.intervals(two_domains, report) == query.intervals(two_domains, report, read=read)
    assert unit_reads == {NIGHT: 2}  # without a shared reader, each call reads them again

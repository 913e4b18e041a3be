"""Issue 37, defect 11: `show` states the result on the user's own images (real-shift cells) with intervals, the paired
test and the synthetic cell that behaves most like them, as the run page's verdict and ``export --format json`` do."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from domainbench import query
from domainbench.store import open_store
from tests.cli_runner import run_cli
from tests.real_shift_run import N, TWO, build

RUN = "twomodels"


@pytest.fixture(scope="module")
def shift_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("cli-real-shift"), TWO, RUN)


@pytest.fixture
def home(shift_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DOMAINBENCH_HOME", str(shift_home))
    monkeypatch.delenv("DOMAINBENCH_MONGO_URI", raising=False)
    return shift_home


def test_show_states_the_real_shift_result_with_intervals_and_the_paired_test(home: Path, tmp_path: Path, capsys,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, err = run_cli(["show", RUN], capsys, monkeypatch)
    assert code == 0, err
    shown = " ".join(out.split())
    store = open_store()
    try:
        results = {r.name: r for r in query.real_shift(store, query.report(store, RUN))}
    finally:
        store.close()
    night = results["night"]
    # two models: one paired test, no Holm; each model's accuracy with its interval's two ends
    assert len(night.tests) == 1 and night.tests[0].p_holm == night.tests[0].p_value
    for m in night.models:
        assert re.search(re.escape(m.model) + r" \d+\.\d % \(\d+\.\d–\d+\.\d\)", night.sentence)
    assert "Holm" not in night.sentence and re.search(r"p [=<] [\d.]+", night.sentence)
    assert "the synthetic cell that behaves most like them (closest accuracy): `" in night.sentence
    for r in results.values():
        assert " ".join(r.sentence.split()) in shown  # the sentence the run page shows, whole
    assert shown.index(f"On your {N} real `night` images") < shown.index("time per stage")
    assert f"Your {N} real `scan` images are unlabelled" in shown
    # the JSON export carries the same result
    path = tmp_path / "run.json"
    code, _, err = run_cli(["export", RUN, "-f", "json", "-o", str(path)], capsys, monkeypatch)
    assert code == 0, err
    exported = {r["name"]: r for r in json.loads(path.read_text())["real_shift"]}
    assert exported.keys() == results.keys()
    for name, r in results.items():
        assert exported[name]["sentence"] == r.sentence and exported[name]["measure"] == r.measure
        for row, m in zip(exported[name]["models"], r.models, strict=True):
            assert row["model"] == m.model and row["accuracy"] == m.accuracy
            assert (row["accuracy_ci"] is None) == (m.accuracy_ci is None)
            if m.accuracy_ci is not None:
                assert tuple(row["accuracy_ci"]) == pytest.approx(m.accuracy_ci)
            assert row["closest"] == {"corruption": m.closest[0], "severity": m.closest[1]}

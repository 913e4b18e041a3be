"""The query module: what show/export/compare and the UI read results through, checked on a synthetic
run with hand-counted cells; and the UI reaching results only through it."""

from __future__ import annotations

import ast
from pathlib import Path

import fe_synthetic as synthetic
import pytest

from domainbench import query
from domainbench.errors import UserInputError
from domainbench.records.report import Versions
from domainbench.store import Store

ROOT = Path(__file__).resolve().parents[2]
#: the repositories and raw calls that read results: the frontend reaches them through domainbench.query
WRITES = {"save", "put", "put_many"}
RESULT_READS = {"units", "threat", "stability", "fmr", "reports", "domains", "find", "keys", "get_report"}


def test_the_frontend_reads_results_only_through_the_query_module() -> None:
    found = []
    for path in (ROOT / "frontend").rglob("*.py"):
        tree = ast.parse(path.read_text())
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("domainbench.engine"):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {node.module}")
            parent = parents.get(node)
            writes = isinstance(parent, ast.Attribute) and parent.attr in WRITES  # a plan saved from the New domain page
            if (isinstance(node, ast.Attribute) and node.attr in RESULT_READS and not writes
                    and "store" in ast.unparse(node.value).lower()):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} reads {ast.unparse(node)}")
    assert found == []


def test_cells_and_progress_are_counted_from_keys(store: Store) -> None:
    # 2 models × (clean + 3 noise + 2 brightness) cells, the last 2 left out
    run = synthetic.populate(store, run_id="partial", status="running", skip_cells=2)
    assert query.expected_cells(run) == 2 * 6
    assert query.done_cells(store, run) == 2 * 4
    assert query.run_progress(store, run) == pytest.approx(8 / 12)
    assert query.stored_units(store, "partial") == 2 * 4 * 2  # × 2 shards
    fmr_run = run.model_copy(update={"fmr": {"oracle": ["a", "b"]}})
    assert query.expected_cells(fmr_run) == 2 and query.done_cells(store, fmr_run) == 0


def test_only_a_finished_runs_stored_report_is_trusted(store: Store) -> None:
    synthetic.populate(store, run_id="r")
    marked = query.report(store, "r").model_copy(update={"versions": Versions(domainbench="stored")})
    store.put_report(marked)
    assert query.report(store, "r").versions.domainbench == "stored"
    other = query.report(store, "r", baseline="embedded:weak")
    assert other.baseline == "embedded:weak" and other.versions.domainbench == "stored"  # re-based, not rebuilt
    store.update_run("r", status="running")  # resumed: its old report may be outgrown
    assert query.report(store, "r").versions.domainbench != "stored"
    with pytest.raises(UserInputError, match="no run 'nope'"):
        query.report(store, "nope")
    with pytest.raises(UserInputError, match="no run 'nope'"):
        query.get_run(store, "nope")


def test_per_image_records_of_one_cell(store: Store) -> None:
    synthetic.populate(store, run_id="r")
    units = query.cell_units(store, "r", "gaussian_noise", 2)
    assert sorted((u.model, u.shard) for u in units) == [(m, s) for m in synthetic.MODELS for s in (0, 1)]
    assert {u.corruption for u in query.clean_units(store, "r", "embedded:good")} == {"clean"}
    assert len(query.clean_units(store, "r")) == 2 * 2
    assert len(query.stability_records(store, "r")) == 2 * 2 * 2
    assert [d.domain for d in query.stored_domains(store)] == ["night-time dash-cam footage in the rain"]
    assert query.fmr_records(store, "r") == []


def test_exports_are_the_clis(store: Store) -> None:
    synthetic.populate(store, run_id="r")
    report = query.report(store, "r")
    plain = query.export_csv(report)
    assert plain.splitlines()[0].startswith("run_id,model,corruption,severity")
    assert len(plain.splitlines()) == 1 + 2 * 6
    with_ci = query.export_csv(report, store)
    assert "_ci_low" in with_ci.splitlines()[0] and len(with_ci.splitlines()) == len(plain.splitlines())


def test_expected_cells_count_compositions(store: Store) -> None:
    from domainbench.records.config import Composition, CompositionStep

    run = synthetic.populate(store, run_id="composed", status="running")
    assert query.expected_cells(run) == 2 * 6
    comp = Composition(name="dark and noisy", steps=[CompositionStep(corruption="brightness", severity=2),
                                                     CompositionStep(corruption="gaussian_noise", severity=3)])
    composed = run.model_copy(update={"domain": run.domain.model_copy(update={"compositions": [comp]})})
    assert query.expected_cells(composed) == 2 * 7  # one composed cell per model, as the engine evaluates it

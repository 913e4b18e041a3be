"""`compare` pairs a cell across runs only when both runs made it the same way (issue 36, item 3): a cell's
identity is its name plus its corruption's parameters and ladder version, its composition's steps, its
shift folder's content; cells of one name made differently are named and left unpaired."""

from __future__ import annotations

from pathlib import Path

from domainbench.records.config import Composition, CompositionStep, CorruptionChoice, DomainConfig, RunConfig
from domainbench.query.compare import paired_comparison
from domainbench.engine.runner import Engine
from domainbench.store import open_store
from tests.cli_runner import run_cli

CFG = RunConfig(limit=24, shard_size=12, workers=0, stability=False, threat=False, seed=2)


def _domain(sigma: float | None, second_step: int) -> DomainConfig:
    return DomainConfig(domain="d", corruptions=[
        CorruptionChoice(name="gaussian_noise", severities=[3], params={"sigma": sigma} if sigma else {}),
        CorruptionChoice(name="brightness", severities=[2])],
        compositions=[Composition(name="dark noisy", steps=[CompositionStep(corruption="brightness", severity=3),
                                                           CompositionStep(corruption="gaussian_noise", severity=second_step)])])


def test_cells_made_differently_are_not_paired_and_are_named(home: Path, capsys, monkeypatch) -> None:
    store = open_store()
    Engine(store).start(_domain(None, 2), CFG.model_copy(update={"models": ["fake:a"]}), run_id="plain")
    Engine(store).start(_domain(0.9, 1), CFG.model_copy(update={"models": ["fake:b"]}), run_id="other")
    Engine(store).start(_domain(None, 2), CFG.model_copy(update={"models": ["fake:b"]}), run_id="same")
    cmp = paired_comparison(store, ["plain", "other"])
    assert cmp.differing_cells == ["compose:dark noisy", "gaussian_noise"]
    assert {(p.corruption, p.severity) for p in cmp.pairs} == {("clean", 0), ("brightness", 2)}
    assert cmp.verdicts[0].cells == 1  # the verdict rests on the one cell both runs made alike
    # the same plan in both runs: every cell is paired, and the numbers are those of one run holding both models
    same = paired_comparison(store, ["plain", "same"])
    assert same.differing_cells == []
    assert {(p.corruption, p.severity) for p in same.pairs} == {("clean", 0), ("brightness", 2), ("gaussian_noise", 3),
                                                                ("compose:dark noisy", 1)}
    code, out, err = run_cli(["compare", "plain", "other"], capsys, monkeypatch)
    assert code == 0, err
    assert "not paired across the runs" in out and "compose:dark noisy, gaussian_noise" in out
    code, out, _ = run_cli(["compare", "plain", "same", "--format", "json"], capsys, monkeypatch)
    assert code == 0 and "differing_cells" not in out  # the JSON of comparable runs is as before


def test_a_comparison_reads_each_runs_units_once(home: Path) -> None:
    """Issue 43: `compare` read every run's unit documents twice (the outcomes, then again for the adaptive look):
    most of its time on a run of 5,000 units."""
    from domainbench.query.confidence import read_outcomes

    store = open_store()
    for rid, model in (("a", "fake:a"), ("b", "fake:b")):
        Engine(store).start(_domain(None, 2), CFG.model_copy(update={"models": [model]}), run_id=rid)
    reads: list[str] = []

    def counted(s, run_id: str):  # noqa: ANN001, ANN202
        reads.append(run_id)
        return read_outcomes(s, run_id)

    cmp = paired_comparison(store, ["a", "b"], read=counted)
    assert sorted(reads) == ["a", "b"]
    assert cmp.pairs == paired_comparison(store, ["a", "b"]).pairs

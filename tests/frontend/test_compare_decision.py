"""Compare shows the decision across the chosen runs (issue 40): the tied groups of one paired comparison over every
run's cells, written beside the ranks of the rank chart, and cost beside robustness with the Pareto-efficient models
starred. Checked against the statistics computed here on the same stored runs: the pairwise verdicts turned into
letters by ``metrics.letters``, and the Pareto set of ``metrics.cost`` on images/s pooled by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_run_pages import compare_page

from domainbench import query
from domainbench.query.compare import pooled_comparison
from domainbench.frontend import data
from domainbench.frontend.cost_view import TITLE
from domainbench.metrics.cost import pareto_front
from domainbench.metrics.letters import compact_letters
from domainbench.store import Store, open_store

IMAGES = 24


@pytest.fixture(scope="session")
def two_domains(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """Two real runs of both embedded models on the same sample images and seed, with other corruptions (two
    domains): their outcomes merge into one comparison. Stability and PD threat at their smallest."""
    import domainbench
    from domainbench.records.config import CorruptionChoice, DomainConfig, RunConfig

    home = tmp_path_factory.mktemp("two-domains") / "home"
    cfg = RunConfig(dataset="sample", limit=IMAGES, workers=0, shard_size=12, stability_images=1, stability_points=2,
                    threat_anchors=1)
    plans = [DomainConfig(domain="grainy night photos", corruptions=[
                 CorruptionChoice(name="gaussian_noise", severities=[3, 5], reason="sensor noise")]),
             DomainConfig(domain="shop window with glare", corruptions=[
                 CorruptionChoice(name="brightness", severities=[4], reason="reflections")])]
    store = open_store(None, home)
    try:
        ids = [domainbench.run(p, run_config=cfg, store=store).id for p in plans]
    finally:
        store.close()
    return home, ids


@pytest.fixture
def two_store(two_domains: tuple[Path, list[str]], monkeypatch: pytest.MonkeyPatch) -> Store:
    home, _ = two_domains
    monkeypatch.setenv("DOMAINBENCH_HOME", str(home))
    monkeypatch.delenv("DOMAINBENCH_MONGO_URI", raising=False)
    s = open_store()
    yield s
    s.close()


def _chart(at, title: str) -> dict:  # noqa: ANN001 - an AppTest
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    return next(s for s in specs if s["layout"]["title"]["text"].startswith(title))


def test_compare_draws_the_joint_groups_and_the_pareto_front(two_store: Store,
                                                            two_domains: tuple[Path, list[str]]) -> None:
    runs = two_domains[1]
    at = compare_page(runs)
    assert not at.error, [e.value for e in at.error]

    # the groups: Piepho's letters over the joint comparison's significant pairs, ordered by its mean accuracy
    joint = pooled_comparison(two_store, runs)
    significant = [(v.model_a, v.model_b) for v in joint.verdicts if v.winner is not None]
    acc: dict[str, list[float]] = {}
    for v in joint.verdicts:
        acc.setdefault(v.model_a, []).append(v.accuracy_a)
        acc.setdefault(v.model_b, []).append(v.accuracy_b)
    mean = {m: sum(x) / len(x) for m, x in acc.items()}
    expected = compact_letters(sorted(mean), significant, mean)
    assert expected == joint.groups.letters and set(expected) == set(two_store.get_run(runs[0]).config.models)
    # pooled over both runs' corrupted cells: each model's mean is the mean of its cells' balanced accuracies in
    # the two stored reports (noise at 3 and 5, brightness at 4)
    cells = {m: [c.accuracy for r in runs for c in two_store.get_report(r).model(m).cells
                 if c.corruption != "clean"] for m in mean}
    assert all(len(v) == 3 for v in cells.values())
    assert mean == pytest.approx({m: sum(v) / 3 for m, v in cells.items()}, rel=1e-9)
    assert joint.groups.sentence() in [t.value for t in at.text]

    # the rank chart writes each model's letters beside its corrupted rank and its name
    rank = _chart(at, "rank by accuracy")
    assert "letters: tied groups" in rank["layout"]["title"]["text"]
    drawn = {t["name"].rsplit(" (", 1)[0]: t for t in rank["data"]}
    assert set(drawn) == set(expected)
    for model, trace in drawn.items():
        assert trace["name"] == f"{model} ({expected[model]})"
        assert trace["text"][1].split(" ", 1)[1] == expected[model]

    # cost beside robustness: images/s pooled over both runs by hand; accuracy the ranking's
    compared = data.compare_runs(two_store, runs)
    draws = query.draws(two_store, [compared.reports[r] for r in runs])
    ranking = data.ranking_frame(compared.frame).set_index("model").join(data.ranking_intervals(compared.frame, draws))
    timings = [two_store.get_run(r).timings for r in runs]
    speed = {m: sum(t[m]["images"] for t in timings) / sum(t[m]["preprocess"] + t[m]["forward"] for t in timings)
             for m in expected}
    assert all(sum(t[m]["images"] for t in timings) > 0 for m in expected)
    points = {m: (ranking.loc[m, "corrupted acc %"] / 100, speed[m]) for m in expected}
    front = pareto_front(points)
    cost = _chart(at, TITLE)
    shown = {t["name"]: t for t in cost["data"]}
    assert set(shown) == set(expected)
    for m, t in shown.items():
        assert t["x"][0] == pytest.approx(speed[m], rel=1e-9)
        assert t["y"][0] == pytest.approx(ranking.loc[m, "corrupted acc %"], rel=1e-9)
        assert (t["marker"]["symbol"] == "star") == (m in front)
        # the error bar is the ranking's interval of the average
        assert t["y"][0] + t["error_y"]["array"][0] == pytest.approx(ranking.loc[m, "corrupted acc high %"])
    # the chance line: both runs guess among the same classes
    (n_classes,) = {len(two_store.get_run(r).dataset.classes) for r in runs}
    assert [s["y0"] for s in cost["layout"]["shapes"]] == [pytest.approx(100.0 / n_classes)]
    table = next(d.value for d in at.dataframe if "Pareto-efficient" in d.value.columns).set_index("model")
    assert {m for m in table.index if table.loc[m, "Pareto-efficient"]} == front
    assert table["group"].to_dict() == expected
    assert any(t.value.startswith("The fastest model not significantly worse than the best on this domain is ")
               for t in at.text)


def test_runs_on_other_images_say_why_they_have_no_groups(populated: Store) -> None:
    from test_run_pages import XRAY
    from test_app import DONE

    at = compare_page([DONE, XRAY])
    assert not at.error
    # synthetic runs store no per-image outcomes: no joint comparison, said in a line; the chart has no letters
    assert any(c.value.startswith("No tied groups across the chosen runs: ") for c in at.caption)
    rank = _chart(at, "rank by accuracy")
    assert "letters" not in rank["layout"]["title"]["text"]
    assert all(" (" not in t["name"] for t in rank["data"])


def test_pooling_keeps_a_cell_two_runs_made_alike_once_and_renames_one_made_differently(
        two_domains: tuple[Path, list[str]], tmp_path: Path) -> None:
    """The first run copied under two more ids (units and all): once as it is (its cells the same images), once with
    its noise given other parameters (the same name, other images)."""
    import shutil

    import numpy as np

    from domainbench.query.compare import paired_comparison, pooled_outcomes
    from domainbench.query.confidence import load_outcomes, read_outcomes

    home = tmp_path / "home"
    shutil.copytree(two_domains[0], home)
    first = two_domains[1][0]
    store = open_store(None, home)
    try:
        run = store.get_run(first)
        for new, params in (("copy-same", {}), ("copy-other", {"sigma": 0.5})):
            noise = run.domain.corruptions[0].model_copy(update={"params": params})
            store.put_run(run.model_copy(update={"run_id": new,
                                                 "domain": run.domain.model_copy(update={"corruptions": [noise]})}))
            store.upsert_many("units", [u.model_copy(update={"run_id": new}) for u in store.find("units", run_id=first)])
        own = load_outcomes(store, first, read_outcomes).preds
        same = pooled_outcomes(store, [first, "copy-same"])
        assert same.preds.keys() == own.keys()
        alone, pooled = paired_comparison(store, [first]), pooled_comparison(store, [first, "copy-same"])
        assert [v.accuracy_a for v in pooled.verdicts] == [v.accuracy_a for v in alone.verdicts]
        assert pooled.groups.letters == alone.groups.letters
        other = pooled_outcomes(store, [first, "copy-other"])
        renamed = {(m, f"{c} [copy-other]", s) for m, c, s in own if c == "gaussian_noise"}
        assert renamed and other.preds.keys() == own.keys() | renamed
        assert all(np.array_equal(other.preds[(m, c.split(" [")[0], s)], other.preds[(m, c, s)]) for m, c, s in renamed)
    finally:
        store.close()


def test_the_cost_tab_and_the_report_show_each_models_parameters_and_peak_memory(
        two_store: Store, two_domains: tuple[Path, list[str]]) -> None:
    from test_app import run_page

    from domainbench.frontend.handout import write_report
    from domainbench.models.embedded import EmbeddedModel
    from domainbench.engine.resources import weights

    run_id = two_domains[1][0]
    timings = two_store.get_run(run_id).timings
    at = run_page(run_id, "Cost")
    assert not at.error
    table = next(d.value for d in at.dataframe if "peak memory" in d.value.columns).set_index("model")
    md = write_report(two_store, [run_id], fmt="md")
    for variant in ("fmnist-plain", "fmnist-augmented"):
        model = f"embedded:{variant}"
        n, size = weights(EmbeddedModel(variant))
        peak = timings[model]["peak_host_bytes"]
        assert peak >= size
        shown = table.loc[model]
        assert shown["parameters"] == (f"{n / 1e6:.3g} M" if n >= 1e6 else f"{n / 1e3:.3g} k")
        assert shown["peak memory"] == f"{peak / 2**20:,.1f} MiB (host)"
        row = next(line for line in md.splitlines() if line.startswith(f"| {model} |") and "MiB" in line)
        assert shown["parameters"] in row and shown["peak memory"] in row
    # where classes break first (its numbers are checked by hand in tests/cli/test_cli_check.py's classes.csv)
    from domainbench.metrics.class_breaks import breaks_first, class_cells

    ranks = breaks_first(class_cells(two_store.get_report(run_id), list(two_store.get_run(run_id).dataset.classes)))
    lines = md.splitlines()
    at_table = lines.index("### Where classes break first")
    first = lines[at_table + 4]  # after a blank line, the header and its rule
    assert first == f"| {ranks[0].label} | {ranks[0].mean_breaking_severity:.2f} | {ranks[0].broken} of {ranks[0].pairs} |"

"""A stored VQA/retrieval run (issue 38) in the UI: the runs list and the run page open without a traceback."""

from __future__ import annotations

from pathlib import Path

from test_app import app, run_page

from domainbench.records.config import CorruptionChoice, DomainConfig, RunConfig
from domainbench.data.task_samples import write_sample_manifests
from domainbench.engine.task_kind import start_task_run
from domainbench.store import Store


def test_a_retrieval_run_is_listed_and_its_page_says_where_to_read_it(store: Store, tmp_path: Path) -> None:
    _, retrieval = write_sample_manifests(tmp_path / "m", images=4, seed=0)
    domain = DomainConfig(domain="noisy", corruptions=[CorruptionChoice(name="gaussian_noise", severities=[5])])
    rid = start_task_run(store, domain, RunConfig(dataset=str(retrieval), task="retrieval", image_size=28, models=["embedded:fmnist-plain"]), "ret-ui")
    at = app()
    runs = next(d.value for d in at.dataframe if "progress %" in d.value.columns)
    assert rid in runs["run"].tolist()
    page = run_page(rid)
    assert not page.exception, [e.value for e in page.exception]
    assert not page.error and not page.info  # no "no results yet"
    rows = next(d.value for d in page.dataframe if "top1_change_rate" in d.value.columns)
    from domainbench.engine.task_kind import load_task_run

    stored = load_task_run(store, rid)
    assert rows["image_retrieval_recall@1"].tolist() == [r["image_retrieval_recall@1"] for r in stored.rows]
    queries = next(d.value for d in page.dataframe if "rank" in d.value.columns)
    assert len(queries) == len(stored.predictions) == 2 * (4 + 8)  # 2 cells x (4 images + 8 captions), one model

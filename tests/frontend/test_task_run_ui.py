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


def test_the_vqa_gallery_shows_each_image_clean_and_corrupted_with_every_answer(store: Store, tmp_path: Path) -> None:
    import numpy as np

    from domainbench.engine.task_eval import cell_pixels, prepare_task
    from domainbench.engine.task_kind import load_task_run
    from domainbench.frontend.task_section import gallery_rows

    vqa, _ = write_sample_manifests(tmp_path / "m", images=5, seed=0)
    closed = tmp_path / "m" / "closed.jsonl"  # the embedded models answer the yes/no and multiple-choice questions
    closed.write_text("".join(line + "\n" for line in vqa.read_text().splitlines() if "choices" in line or "shoe" in line))
    domain = DomainConfig(domain="noisy", corruptions=[CorruptionChoice(name="gaussian_noise", severities=[5])])
    models = ["embedded:fmnist-plain", "embedded:fmnist-augmented"]
    rid = start_task_run(store, domain, RunConfig(dataset=str(closed), task="vqa", image_size=28, models=models,
                                                  limit=4), "vqa-ui")
    result = load_task_run(store, rid)
    import pandas as pd

    preds = pd.DataFrame(result.predictions)
    images, rows = gallery_rows(preds, "gaussian_noise", 5, flipped_only=False)
    noisy = preds[preds["corruption"] == "gaussian_noise"]
    flips = {i: int(noisy[noisy["image"] == i]["flipped"].sum()) for i in set(noisy["image"])}
    assert sorted(images) == sorted(flips) and [flips[i] for i in images] == sorted(flips.values(), reverse=True)
    assert len(rows) == len(noisy)
    only, _ = gallery_rows(preds, "gaussian_noise", 5, flipped_only=True)
    assert only == [i for i in images if flips[i] > 0]
    # the gallery's pixels are the ones the run scored: re-created from the manifest and the run's seed
    from domainbench import query

    clean, corrupted = query.task_gallery_pixels(result, "gaussian_noise", 5, images[::-1])
    inputs = prepare_task(domain, "vqa", closed, models, limit=4, image_size=28)
    scored = cell_pixels(inputs, next(c for c in inputs.cells if c.corruption == "gaussian_noise"), 0)
    assert np.array_equal(corrupted, scored[images[::-1]]) and np.array_equal(clean, inputs.images[images[::-1]])

    page = run_page(rid)
    assert not page.exception, [e.value for e in page.exception]
    assert "Run kind: VQA." in [c.value for c in page.caption]
    assert next(m for m in page.metric if m.label == "evaluated").value == "100 %"
    answers = [d.value for d in page.dataframe if "corrupted answer" in d.value.columns]
    assert len(answers) == len(images) and len(page.get("image")) == 2 * len(images)
    captions = [c.caption for img in page.get("image") for c in img.proto.imgs]
    assert captions == ["clean", "gaussian_noise/5"] * len(images)
    first = answers[0]
    mine = noisy[noisy["image"] == images[0]]
    assert first["corrupted answer"].tolist() == mine["answer"].tolist()
    assert first[""].tolist() == ["⚠ flip" if f else "same" for f in mine["flipped"]]

"""The run pages of a VQA and a retrieval run (issue 38) in headless Chromium: the rows with intervals, the
paired verdicts, the VQA gallery (images, questions, clean and corrupted answers, flips marked) and the
queries table, with no error on the page; screenshots in ``test-artifacts/e2e/pages/``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.test_browser import FLAGS, chromium, ui_server, wait_idle  # noqa: F401 - chromium: the fixture
from tests.e2e.test_pages_browser import SHOTS, shot

pytestmark = pytest.mark.slow
MODELS = ["embedded:fmnist-plain", "embedded:fmnist-augmented"]


def _fill(home: Path, root: Path) -> None:
    from domainbench.records.config import CorruptionChoice, DomainConfig, RunConfig
    from domainbench.data.task_samples import write_sample_manifests
    from domainbench.engine.task_kind import start_task_run
    from domainbench.store import open_store

    vqa, retrieval = write_sample_manifests(root / "m", images=6, seed=0)
    closed = root / "m" / "closed.jsonl"  # the embedded models answer the yes/no and multiple-choice questions
    closed.write_text("".join(line + "\n" for line in vqa.read_text().splitlines() if "choices" in line or "shoe" in line))
    domain = DomainConfig(domain="grainy shop-window photos of clothing",
                          corruptions=[CorruptionChoice(name="gaussian_noise", severities=[5])])
    store = open_store(None, home)
    try:
        start_task_run(store, domain, RunConfig(dataset=str(closed), task="vqa", image_size=28, models=MODELS), "vqa-run")
        start_task_run(store, domain, RunConfig(dataset=str(retrieval), task="retrieval", image_size=28, models=MODELS),
                       "retrieval-run")
    finally:
        store.close()


@pytest.fixture
def server(chromium: str, tmp_path: Path) -> Iterator[str]:
    home = tmp_path / "home"
    _fill(home, tmp_path)
    with ui_server(tmp_path, home, "--no-worker") as port:
        yield f"http://127.0.0.1:{port}"


def test_the_task_run_pages_show_their_rows_gallery_and_answers(chromium: str, server: str) -> None:
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=120_000)
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=FLAGS, headless=True)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(120_000)
        try:
            page.goto(f"{server}/?run=vqa-run")
            expect(page.get_by_text("VQA: one row per model × cell").first).to_be_visible()
            wait_idle(page)
            expect(page.locator("[data-testid='stDataFrame']").filter(has_text="vqa_accuracy").first).to_be_visible()
            expect(page.get_by_text("Gallery", exact=False).first).to_be_visible()
            page.get_by_text("each image clean (left)", exact=False).first.scroll_into_view_if_needed()
            wait_idle(page)
            assert page.locator("[data-testid='stImage']").count() >= 2
            gallery = page.locator("[data-testid='stDataFrame']").filter(has_text="corrupted answer")
            expect(gallery.first).to_be_visible()
            assert gallery.count() >= 1
            assert page.locator("[data-testid='stException']").count() == 0
            shot(page, SHOTS / "task-vqa.png")

            page.goto(f"{server}/?run=retrieval-run")
            expect(page.get_by_text("Retrieval: one row per model × cell").first).to_be_visible()
            wait_idle(page)
            expect(page.locator("[data-testid='stDataFrame']").filter(has_text="image_retrieval_recall@1").first).to_be_visible()
            expect(page.get_by_text("Queries", exact=False).first).to_be_visible()
            assert page.locator("[data-testid='stException']").count() == 0
            shot(page, SHOTS / "task-retrieval.png")
        finally:
            browser.close()

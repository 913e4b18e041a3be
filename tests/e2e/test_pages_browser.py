"""The pages as a reviewer sees them, in headless Chromium: a product (no Deploy button or developer
menu, a title and an icon), nothing fetched from outside this machine, and screenshots of the run
page, Compare and New domain (``test-artifacts/e2e/pages/``, or ``$DOMAINBENCH_SHOTS``).

The store holds one real small run (both embedded models on 24 bundled images, with stability and
PD threat) and a synthetic run of another domain, so Compare has two columns.
"""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.test_browser import FLAGS, ROOT, chromium, ui_server, wait_idle  # noqa: F401 - chromium: the fixture

pytestmark = pytest.mark.slow
SHOTS = Path(os.environ.get("DOMAINBENCH_SHOTS") or ROOT / "test-artifacts" / "e2e" / "pages")


def _fill(home: Path) -> str:
    from domainbench.records.config import CorruptionChoice, DomainConfig, RunConfig
    from domainbench.engine.runner import Engine
    from domainbench.store import open_store

    store = open_store(None, home)
    try:
        domain = DomainConfig(domain="grainy night photos of clothing in a shop window, with **reflections** "
                                     "and $glare$ on the glass", corruptions=[
            CorruptionChoice(name="gaussian_noise", severities=[1, 3, 5], reason="sensor noise in dim light"),
            CorruptionChoice(name="brightness", severities=[2, 5], reason="reflections on the glass"),
            CorruptionChoice(name="saturate", severities=[1, 5], reason="washed-out shop lights"),
        ])
        cfg = RunConfig(dataset="sample", limit=24, workers=0, shard_size=12, stability_images=8, stability_points=3,
                        threat_anchors=4)
        run_id = Engine(store).start(domain, cfg)
        _copy_as_another_domain(store, run_id, "20250102-000000-xray-ef01", "chest x-rays from portable scanners")
        return run_id
    finally:
        store.close()


def _copy_as_another_domain(store, run_id: str, new_id: str, text: str) -> None:  # noqa: ANN001
    """The same records under another run id and domain text: a second, comparable column for Compare."""
    from domainbench.engine.reports import build_report

    run = store.get_run(run_id)
    store.put_run(run.model_copy(update={"run_id": new_id, "domain_id": "xray0001", "created_at": "2025-01-02T00:00:00+00:00",
                                         "domain": run.domain.model_copy(update={"domain": text})}))
    for coll in ("units", "threat", "stability"):
        store.upsert_many(coll, [r.model_copy(update={"run_id": new_id}) for r in store.find(coll, run_id=run_id)])
    store.put_report(build_report(store, new_id))


def shot(page, path: Path) -> None:  # noqa: ANN001 - a playwright Page
    """The whole page at 1,400 px wide: Streamlit scrolls inside its main section, so the window is made as tall
    as that section's content for the screenshot, then put back."""
    height = page.evaluate("() => Math.max(1000, ...[...document.querySelectorAll("
                           "'[data-testid=stMain], [data-testid=stAppViewContainer], section.main')].map(e => e.scrollHeight))")
    page.set_viewport_size({"width": 1400, "height": min(int(height) + 40, 12000)})
    page.wait_for_timeout(1000)
    page.screenshot(path=str(path), full_page=True)
    page.set_viewport_size({"width": 1400, "height": 1000})


def cut_metric_values(page) -> list[str]:  # noqa: ANN001 - a playwright Page
    """Metric cards whose value does not fit its card (shown cut, with an ellipsis)."""
    return page.evaluate("() => [...document.querySelectorAll('[data-testid=stMetricValue], [data-testid=stMetricValue] *')]"
                         ".filter(e => e.scrollWidth > e.clientWidth + 1).map(e => e.innerText)")


@pytest.fixture
def server(chromium: str, tmp_path: Path) -> Iterator[tuple[str, str]]:
    home = tmp_path / "home"
    run_id = _fill(home)
    with ui_server(tmp_path, home, "--no-worker") as port:
        yield f"http://127.0.0.1:{port}", run_id


def test_pages_are_a_product_and_stay_on_this_machine(chromium: str, server: tuple[str, str]) -> None:
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=120_000)
    url, run_id = server
    SHOTS.mkdir(parents=True, exist_ok=True)
    outside: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=FLAGS, headless=True)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(120_000)

        def watch(request) -> None:  # noqa: ANN001 - a playwright Request
            host = urllib.parse.urlsplit(request.url).hostname
            if request.url.split(":", 1)[0] in ("http", "https", "ws", "wss") and host not in ("127.0.0.1", "localhost"):
                outside.append(request.url)

        page.on("request", watch)
        try:
            # the run page: verdict first, no developer toolbar
            page.goto(f"{url}/?run={run_id}")
            expect(page.get_by_text("Verdict").first).to_be_visible()
            wait_idle(page)
            expect(page.locator("[data-testid='stDataFrame']").filter(has_text="mCE").first).to_be_visible()
            assert page.get_by_role("button", name="Deploy").count() == 0
            menu = page.locator("[data-testid='stMainMenu']")
            if menu.count():  # viewer mode keeps Print / Settings / About, never the developer entries
                menu.first.click()
                page.wait_for_timeout(500)
                for dev in ("Clear cache", "Rerun", "Record a screencast", "Deploy this app", "Developer options"):
                    assert page.get_by_text(dev, exact=True).count() == 0, dev
                page.keyboard.press("Escape")
            assert "domainbench" in page.title().lower() or "runs" in page.title().lower(), page.title()
            assert page.locator("link[rel*='icon']").count() >= 1
            # the domain text is literal: its ** and $ are shown, not rendered
            expect(page.get_by_text("with **reflections** and $glare$", exact=False).first).to_be_visible()
            # at 1,400 px no metric card is cut ("sample[:…" was)
            assert page.locator("[data-testid='stMetricValue']").count() >= 5
            assert cut_metric_values(page) == []
            # the first screen of a 1,400 x 900 window holds the verdict and the whole summary (its header and both
            # models' rows, about 35 px each): the page title and the baseline selector on rows of their own pushed it
            # below (issue 37)
            page.set_viewport_size({"width": 1400, "height": 900})
            page.wait_for_timeout(1000)
            summary = page.locator("[data-testid='stDataFrame']").filter(has_text="mCE").first.bounding_box()
            assert summary is not None and summary["y"] + 3 * 35 <= 900, summary
            page.set_viewport_size({"width": 1400, "height": 1000})
            shot(page, SHOTS / "run.png")
            page.get_by_role("tab", name="Gallery").dispatch_event("click")
            wait_idle(page)
            expect(page.get_by_text("clean (left) beside the corrupted").first).to_be_visible()
            wait_idle(page)  # the images are re-created from the run's seed: wait for them
            page.get_by_text("clean (left) beside the corrupted").first.scroll_into_view_if_needed()
            page.wait_for_timeout(1000)
            shot(page, SHOTS / "run-gallery.png")

            # the Runs list keeps its filters in the link: a reload keeps them
            page.goto(f"{url}/")
            wait_idle(page)
            search = page.get_by_label("search", exact=True)
            search.fill("x-rays")
            search.press("Enter")
            wait_idle(page)
            page.wait_for_function("() => location.search.includes('search=x-rays')")
            page.reload()
            wait_idle(page)
            expect(page.get_by_label("search", exact=True)).to_have_value("x-rays")

            page.goto(f"{url}/compare")
            expect(page.get_by_role("heading", name="Compare models across domains")).to_be_visible()
            wait_idle(page)
            expect(page.get_by_text("Chosen by default").first).to_be_visible()
            expect(page.get_by_text("keeps the most accuracy under corruption").first).to_be_visible()
            shot(page, SHOTS / "compare.png")

            page.goto(f"{url}/new_domain")
            expect(page.get_by_role("heading", name="New domain")).to_be_visible()
            wait_idle(page)
            page.get_by_role("button", name="Plan", exact=True).click()
            expect(page.get_by_role("heading", name="Preview on a sample image")).to_be_visible(timeout=240_000)
            wait_idle(page)
            expect(page.get_by_text("SSIM", exact=False).first).to_be_visible()
            shot(page, SHOTS / "new-domain.png")
            page.get_by_role("heading", name="Preview on a sample image").scroll_into_view_if_needed()
            page.wait_for_timeout(500)
            page.screenshot(path=str(SHOTS / "new-domain-preview.png"))
            # the plan lives in the link: a reload opens it again
            assert "plan=" in page.url, page.url
            page.reload()
            expect(page.get_by_role("heading", name="Preview on a sample image")).to_be_visible(timeout=240_000)
            expect(page.get_by_text("the plan of this link").first).to_be_visible()
        finally:
            browser.close()
    assert not outside, f"pages reached outside this machine: {outside[:5]}"
    print(f"\nscreenshots: {SHOTS}")

"""The decision views in headless Chromium (issue 40): Compare over two real runs of two domains on the same images
draws the tied groups' letters beside the rank chart's ranks and the cost chart with its Pareto-efficient models
starred; the run page's Cost tab draws its own. What the browser drew (plotly's SVG and the figure it was given) is
checked against the pooled comparison's letters and ``metrics.cost``'s Pareto set computed here. Screenshots go to
``test-artifacts/e2e/decision/`` (or ``$DOMAINBENCH_SHOTS``)."""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.test_browser import FLAGS, ROOT, chromium, ui_server, wait_idle  # noqa: F401 - chromium: the fixture

pytestmark = pytest.mark.slow
SHOTS = Path(os.environ.get("DOMAINBENCH_SHOTS") or ROOT / "test-artifacts" / "e2e" / "decision")

#: per drawn plotly figure: its title, and per trace its name, marker symbol, texts and the SVG points it drew
FIGURES = """() => [...document.querySelectorAll('.js-plotly-plot')].map(gd => ({
    title: ((gd._fullLayout.title || {}).text || '').replace(/<[^>]+>/g, ''),
    traces: gd._fullData.map((t, i) => ({name: t.name, symbol: (t.marker || {}).symbol || null, text: t.text || null})),
    points: gd.querySelectorAll('.scatterlayer .point').length,
    texts: [...gd.querySelectorAll('.scatterlayer .textpoint text')].map(e => e.textContent),
}))"""


def _fill(home: Path) -> list[str]:
    import domainbench
    from domainbench.records.config import CorruptionChoice, DomainConfig, RunConfig
    from domainbench.store import open_store

    cfg = RunConfig(dataset="sample", limit=24, workers=0, shard_size=12, stability_images=1, stability_points=2,
                    threat_anchors=1)
    plans = [DomainConfig(domain="grainy night photos", corruptions=[
                 CorruptionChoice(name="gaussian_noise", severities=[3, 5], reason="sensor noise")]),
             DomainConfig(domain="shop window with glare", corruptions=[
                 CorruptionChoice(name="brightness", severities=[4], reason="reflections")])]
    store = open_store(None, home)
    try:
        return [domainbench.run(p, run_config=cfg, store=store).id for p in plans]
    finally:
        store.close()


def _expected(home: Path, runs: list[str]) -> tuple[dict[str, str], set[str], set[str]]:
    """(the pooled comparison's letters, Compare's Pareto set, the first run's Pareto set), computed here."""
    from domainbench.query.compare import pooled_comparison
    from domainbench.frontend import data
    from domainbench.metrics.cost import pareto_front, throughput
    from domainbench.store import open_store

    store = open_store(None, home)
    try:
        letters = pooled_comparison(store, runs).groups.letters
        ranking = data.ranking_frame(data.compare_runs(store, runs).frame).set_index("model")
        timings = [store.get_run(r).timings for r in runs]
        speed = {m: sum(t[m]["images"] for t in timings) / sum(t[m]["preprocess"] + t[m]["forward"] for t in timings)
                 for m in letters}
        across = pareto_front({m: (ranking.loc[m, "corrupted acc %"] / 100, speed[m]) for m in letters})
        report = store.get_report(runs[0])
        own = pareto_front({m.model: (m.mean_corrupted_accuracy, throughput(timings[0], m.model)[2])
                            for m in report.models})
    finally:
        store.close()
    return letters, across, own


@pytest.fixture
def server(chromium: str, tmp_path: Path) -> Iterator[tuple[str, Path, list[str]]]:
    home = tmp_path / "home"
    runs = _fill(home)
    with ui_server(tmp_path, home, "--no-worker") as port:
        yield f"http://127.0.0.1:{port}", home, runs


def _figure(figures: list[dict], title: str) -> dict:
    found = [f for f in figures if f["title"].startswith(title)]
    assert found, [f["title"] for f in figures]
    return found[0]


def _stars(fig: dict) -> set[str]:
    return {t["name"] for t in fig["traces"] if t["symbol"] == "star"}


def test_compare_and_the_cost_tab_draw_groups_and_the_pareto_front(chromium: str,
                                                                    server: tuple[str, Path, list[str]]) -> None:
    from playwright.sync_api import expect, sync_playwright

    from domainbench.frontend.cost_view import TITLE

    url, home, runs = server
    letters, across, own = _expected(home, runs)
    SHOTS.mkdir(parents=True, exist_ok=True)
    expect.set_options(timeout=120_000)
    errors: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=FLAGS, headless=True)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(120_000)
        # Streamlit itself probes /compare/_stcore/health and host-config (404) when a page is opened by its path;
        # any other failed request or console error is the page's
        page.on("console", lambda m: errors.append(m.text) if m.type == "error"
                and not m.text.startswith("Failed to load resource") else None)
        page.on("response", lambda r: errors.append(f"{r.status} {r.url}") if r.status >= 400
                and "/_stcore/" not in r.url else None)
        try:
            page.goto(f"{url}/compare?runs={urllib.parse.quote(','.join(runs))}")
            expect(page.get_by_role("heading", name="Cost beside robustness")).to_be_visible()
            wait_idle(page)
            page.get_by_role("heading", name="Cost beside robustness").scroll_into_view_if_needed()
            page.wait_for_function("() => [...document.querySelectorAll('.js-plotly-plot')].some(gd => "
                                   "((gd._fullLayout || {}).title || {}).text?.includes('cost beside'))")
            figures = page.evaluate(FIGURES)
            # the rank chart: each model's letters beside its corrupted rank, as drawn text, and in its name
            rank = _figure(figures, "rank by accuracy")
            assert "letters: tied groups" in rank["title"]
            drawn = [t.split(" ", 1) for t in rank["texts"] if " " in t]
            assert sorted(x[1] for x in drawn) == sorted(letters.values()), rank["texts"]
            assert {t["name"] for t in rank["traces"]} == {f"{m} ({g})" for m, g in letters.items()}
            # the cost chart: one drawn point per model, the Pareto set starred
            cost = _figure(figures, TITLE)
            assert cost["points"] == len(letters) and _stars(cost) == across
            expect(page.get_by_text("tied groups: a: ", exact=False).first).to_be_visible()
            page.screenshot(path=str(SHOTS / "compare-decision.png"), full_page=True)

            # the run page's Cost tab: its own run's front
            page.goto(f"{url}/?run={runs[0]}&tab=Cost")
            wait_idle(page)
            page.wait_for_function("() => [...document.querySelectorAll('.js-plotly-plot')].some(gd => "
                                   "((gd._fullLayout || {}).title || {}).text?.includes('cost beside'))")
            cost = _figure(page.evaluate(FIGURES), TITLE)
            assert cost["points"] == len(letters) and _stars(cost) == own
            page.screenshot(path=str(SHOTS / "run-cost.png"), full_page=True)
        finally:
            browser.close()
    assert not errors, errors[:5]
    print(f"\nscreenshots: {SHOTS}")

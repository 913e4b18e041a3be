"""Screenshots of every page at 1,024 and 1,400 px, in headless Chromium (Debian's /usr/bin/chromium, or
``$DOMAINBENCH_CHROMIUM``) through playwright: the pictures committed under docs/screenshots/ (issue 37).

The store: the e2e pages test's real small run (both embedded models on 24 bundled images, with stability and PD
threat) and its copy as a second domain, a synthetic unlabelled run, a run with real-shift cells (the tests' night,
scan and shop folders made from the sample) and a clip run (both embedded models on four short generated clips). Each page is shot as its first screen (the
window's height: what a reader sees before scrolling); the run page's tabs too.

    .venv/bin/python scripts/screenshots.py [OUT_DIR]     # default: docs/screenshots
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "frontend")]
os.environ.setdefault("NO_ALBUMENTATIONS_UPDATE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from tests.e2e.test_browser import FLAGS, find_chromium, ui_server, wait_idle  # noqa: E402
from tests.e2e.test_pages_browser import _fill  # noqa: E402

WIDTHS = {1024: 768, 1400: 900}


def settled(page) -> None:  # noqa: ANN001 - a playwright Page
    """Wait until the script has run and every element is drawn: no "Stop" button, no placeholder skeleton, twice
    in a row (a page's first run may start a moment after it loads)."""
    for _ in range(2):
        page.wait_for_timeout(1000)
        wait_idle(page)
        page.wait_for_function("() => !document.querySelector('[data-testid=stSkeleton]')", timeout=240_000, polling=250)
    page.wait_for_timeout(1500)  # charts draw after the script ends
UNLABELLED = "20250103-000000-unlabelled-9a9a"
SHIFT = "20250104-000000-real-shift-5h1f"
CLIPS = "20250105-000000-clips-c11p"
TABS = ["PD threat", "Accuracy vs radius", "Per corruption", "Label flips", "Stability", "Damage & calibration"]


def fill(home: Path) -> str:
    import fe_synthetic as syn

    from tests.real_shift_run import TWO, build

    from domainbench.store import open_store

    run_id = _fill(home)
    store = open_store(None, home)
    try:
        syn.populate(store, run_id=UNLABELLED, labelled=False, per_image=True, domain="unlabelled shop-floor photos",
                     created_at="2025-01-03T00:00:00+00:00")
        from domainbench.data.clip_samples import write_sample_clips
        from domainbench.data.clips import Sampling
        from domainbench.engine.clip_kind import start_clip_run
        from domainbench.records.config import CorruptionChoice, DomainConfig, RunConfig

        clips = write_sample_clips(home.parent / "clips", per_class=2, frames=12, size=32, classes=2, seed=0)
        start_clip_run(store, DomainConfig(domain="dash-cam clips under flickering street lamps", corruptions=[
            CorruptionChoice(name="flicker", severities=[3, 5]), CorruptionChoice(name="impulse_noise", severities=[5])]),
            RunConfig(dataset=str(clips), image_size=32, workers=0, models=TWO), Sampling(frames=6), CLIPS)
    finally:
        store.close()
    build(home.parent, TWO, run_id=SHIFT)  # stores into home.parent / "home", this store
    return run_id


def main() -> None:
    from playwright.sync_api import sync_playwright

    out = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "screenshots"
    out.mkdir(parents=True, exist_ok=True)
    chromium, why = find_chromium()
    if chromium is None:
        raise SystemExit(f"error: {why}")
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        run_id = fill(home)
        with ui_server(Path(tmp), home, "--no-worker") as port, sync_playwright() as pw:
            url = f"http://127.0.0.1:{port}"
            browser = pw.chromium.launch(executable_path=chromium, args=FLAGS, headless=True)
            try:
                for width, height in WIDTHS.items():
                    page = browser.new_page(viewport={"width": width, "height": height})
                    page.set_default_timeout(240_000)

                    def shoot(path: str, name: str) -> None:
                        page.goto(f"{url}{path}")
                        settled(page)
                        page.screenshot(path=str(out / f"{name}-{width}.png"))
                        print(f"{name}-{width}.png")

                    shoot("/", "runs")
                    shoot(f"/?run={run_id}", "run")
                    for tab in TABS:
                        page.get_by_role("tab", name=tab).dispatch_event("click")
                        settled(page)
                        # the tab's row at the top of the window: what the tab draws fills the rest
                        page.get_by_role("tab", name=tab).evaluate("e => e.scrollIntoView({block: 'start'})")
                        page.wait_for_timeout(500)
                        page.screenshot(path=str(out / f"run-{tab.split()[0].lower()}-{width}.png"))
                        print(f"run-{tab.split()[0].lower()}-{width}.png")
                    shoot(f"/?run={UNLABELLED}", "run-unlabelled")
                    shoot(f"/?run={SHIFT}", "run-real-shift")
                    shoot(f"/?run={CLIPS}", "run-clips")
                    shoot("/compare", "compare")
                    shoot("/new_domain", "new-domain")
                    shoot("/glossary", "glossary")
                    page.close()
            finally:
                browser.close()


if __name__ == "__main__":
    main()

"""The run page of a clip run (issue 41) in headless Chromium: the clip strip shows each sampled frame clean above
its corrupted version, in frame order, each with its prediction under it and the flips marked, and the pictures
are the clip's frames; no error on the page; a screenshot in ``test-artifacts/e2e/pages/``."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from tests.e2e.test_browser import FLAGS, chromium, ui_server, wait_idle  # noqa: F401 - chromium: the fixture
from tests.e2e.test_pages_browser import SHOTS, shot

pytestmark = pytest.mark.slow
RUN = "clip-strip"
FRAMES = 6
CELL = ("impulse_noise", 5)  # a new draw per frame: on this clip the plain model flips 3 times

#: each strip image: its URL, its box on the page and the caption under it
_STRIP = """() => [...document.querySelectorAll("[data-testid='stImage']")].map(el => {
    const img = el.querySelector("img"); const box = img.getBoundingClientRect();
    const cap = el.querySelector("[data-testid='stImageCaption']") || el.parentElement.querySelector("[data-testid='stImageCaption']");
    return {src: img.src, x: box.x, y: box.y, caption: cap ? cap.innerText.trim() : null};
})"""


@pytest.fixture
def server(chromium: str, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    from domainbench.data.clip_samples import write_sample_clips
    from domainbench.data.clips import Sampling
    from domainbench.engine.clip_kind import start_clip_run
    from domainbench.records.config import CorruptionChoice, DomainConfig, RunConfig
    from domainbench.store import open_store

    home = tmp_path / "home"
    clips = write_sample_clips(tmp_path / "clips", per_class=1, frames=8, size=32, classes=2, seed=0)
    domain = DomainConfig(domain="grainy footage", corruptions=[CorruptionChoice(name=CELL[0], severities=[CELL[1]])])
    store = open_store(None, home)
    try:
        start_clip_run(store, domain, RunConfig(dataset=str(clips), image_size=32, workers=0,
                                                models=["embedded:fmnist-plain"]), Sampling(frames=FRAMES), RUN)
    finally:
        store.close()
    with ui_server(tmp_path, home, "--no-worker") as port:
        yield f"http://127.0.0.1:{port}", home


def _pixels(page: Any, src: str) -> np.ndarray:
    got = page.request.get(src)
    assert got.ok, src
    return np.asarray(Image.open(io.BytesIO(got.body())).convert("RGB")).astype(np.float64)


def _blocks(img: np.ndarray) -> np.ndarray:
    """Mean grey level of each 8 x 8 block."""
    grey = np.asarray(img, dtype=np.float64).mean(axis=-1)
    h, w = grey.shape
    return grey.reshape(h // 8, 8, w // 8, 8).mean(axis=(1, 3))


def _grey_gap(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(np.asarray(a, np.float64).mean(axis=-1) - np.asarray(b, np.float64).mean(axis=-1)).mean())


def test_the_clip_strip_shows_clean_above_corrupted_with_predictions_and_flips(
        chromium: str, server: tuple[str, Path]) -> None:
    from playwright.sync_api import expect, sync_playwright

    from domainbench.engine.clip_kind import load_clip_run, strip_frames
    from domainbench.engine.clip_output import prediction_rows
    from domainbench.store import open_store

    url, home = server
    store = open_store(None, home)
    try:
        stored = load_clip_run(store, RUN)
    finally:
        store.close()
    clip = stored.clips[0]["clip"]  # the page's first model, cell and clip
    preds = [p for p in prediction_rows(stored) if p["clip"] == clip]
    clean = sorted((p for p in preds if p["corruption"] == "clean"), key=lambda p: p["frame_index"])
    flick = sorted((p for p in preds if p["corruption"] == CELL[0]), key=lambda p: p["frame_index"])
    (row,) = [r for r in stored.rows if r["corruption"] == CELL[0]]
    clean_frames, flick_frames = strip_frames(stored.run, clip, *CELL, row.get("mode"))
    assert len(clean) == len(flick) == FRAMES
    # the strip has something to mark: flips, and corrupted frames whose prediction is not the clean one
    assert any(p["flipped"] == 1 for p in flick) and any(k["prediction"] != c["prediction"] for c, k in zip(clean, flick))

    expect.set_options(timeout=120_000)
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=FLAGS, headless=True)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(120_000)
        try:
            page.goto(f"{url}/?run={RUN}")
            expect(page.get_by_text("Clips: one row per model × cell").first).to_be_visible()
            wait_idle(page)
            page.get_by_text("Clip strip", exact=False).first.scroll_into_view_if_needed()
            wait_idle(page)
            strip = page.evaluate(_STRIP)
            assert page.locator("[data-testid='stException']").count() == 0
            shot(page, SHOTS / "clip-strip.png")

            assert len(strip) == 2 * FRAMES, strip
            tops, bottoms = strip[0::2], strip[1::2]  # column by column: the clean frame, then its corrupted one
            for t in range(FRAMES):
                top, bottom = tops[t], bottoms[t]
                assert abs(top["x"] - bottom["x"]) < 1 and top["y"] < bottom["y"]  # clean above corrupted
                assert t == 0 or top["x"] > tops[t - 1]["x"]  # frames left to right in clip order
                c, k = clean[t], flick[t]
                assert top["caption"] == f"#{c['frame_index']}: {c['prediction']}" + (" ↯ flip" if c["flipped"] == 1 else "")
                assert bottom["caption"] == (f"{k['prediction']}" + (" ↯ flip" if k["flipped"] == 1 else "")
                                             + (" ≠ clean" if k["prediction"] != c["prediction"] else ""))
                # the pictures are the frames: the page sends JPEG, which keeps each 8 x 8 block's mean grey level
                # (its DC term) though not coloured salt-and-pepper, so blocks are compared
                shown_clean, shown_flick = _pixels(page, top["src"]), _pixels(page, bottom["src"])
                assert shown_clean.shape == shown_flick.shape == clean_frames[t].shape
                assert np.abs(_blocks(shown_clean) - _blocks(clean_frames[t])).mean() < 2
                assert np.abs(_blocks(shown_flick) - _blocks(flick_frames[t])).mean() < 2
                # and the lower one is the corrupted frame: its grey pixels are nearer it than the clean frame
                assert _grey_gap(shown_flick, flick_frames[t]) < _grey_gap(shown_flick, clean_frames[t])
            marked = sum("↯ flip" in s["caption"] for s in strip)
            assert marked == sum(p["flipped"] == 1 for p in clean + flick)
        finally:
            browser.close()

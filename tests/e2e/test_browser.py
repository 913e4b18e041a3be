"""The real UI in headless Chromium: `domainbench ui` with its worker, driven as a user would.

Open the app, describe a domain, plan it, edit the plan, launch on the bundled sample with the
embedded models, wait for the worker to finish, open the run's page by URL, see the summary
table and a severity plot, export the CSV. Screenshots go to ``test-artifacts/e2e/`` (printed).

Chromium is Debian's (``/usr/bin/chromium``, installed by ``.ci/run``), ``$DOMAINBENCH_CHROMIUM`` or one
playwright installed; without any the test skips with a one-line reason before the UI starts.
"""

from __future__ import annotations

import contextlib
import csv
import io
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEBIAN_CHROMIUM = Path("/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
         "--no-first-run", "--disable-sync", "--disable-quic"]
ARTIFACTS = ROOT / "test-artifacts" / "e2e"
DOMAIN = ("Night-time dash-cam footage from delivery vans: rain drops on the windscreen, glare from oncoming "
          "headlights and sensor noise in the dark.")
KEEP = "brightness"  # the sanity rules put it in every plan
ADD = "jpeg_compression"

pytestmark = pytest.mark.slow


def find_chromium() -> tuple[str | None, str]:
    """The browser to drive, or None and the one-line reason the test is skipped.

    ``$DOMAINBENCH_CHROMIUM`` names it explicitly (and alone: a missing one is not replaced by another);
    otherwise Debian's ``/usr/bin/chromium``, then a Chromium playwright installed into its cache.
    """
    explicit = os.environ.get("DOMAINBENCH_CHROMIUM")
    if explicit:
        return (explicit, "") if Path(explicit).is_file() else (None, f"$DOMAINBENCH_CHROMIUM={explicit} does not exist")
    candidates = [DEBIAN_CHROMIUM]
    cache = Path(os.environ.get("PLAYWRIGHT_BROWSERS_PATH") or Path.home() / ".cache" / "ms-playwright")
    candidates += sorted(cache.glob("chromium*/chrome-linux*/chrome"), reverse=True)
    found = next((str(c) for c in candidates if c.is_file()), None)
    if found is None:
        return None, "Chromium not found (/usr/bin/chromium or playwright's): `.ci/run` installs it (apt-get install -y chromium)"
    return found, ""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listening_addresses(port: int) -> set[str]:
    """Local addresses with a socket listening on ``port`` (from /proc/net/tcp{,6})."""
    out = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            local, state = line.split()[1], line.split()[3]
            addr, hexport = local.rsplit(":", 1)
            if state == "0A" and int(hexport, 16) == port:  # 0A: LISTEN
                out.add(addr)
    return out


@pytest.fixture
def chromium() -> str:
    """Skips the test (before any server starts) where there is no browser or no playwright."""
    path, reason = find_chromium()
    if path is None:
        pytest.skip(reason)
    pytest.importorskip("playwright.sync_api", reason="playwright is not installed: pip install -e '.[test]'")
    return path


@contextlib.contextmanager
def ui_server(tmp_path: Path, home: Path, *flags: str) -> Iterator[int]:
    """``domainbench ui FLAGS`` on a free port over the store in ``home``, yielding the port once its health
    check answers; its whole process group is ended afterwards. Its output goes to ``tmp_path/ui.log``."""
    port = free_port()
    env = {**os.environ, "DOMAINBENCH_HOME": str(home), "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "NO_ALBUMENTATIONS_UPDATE": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    env.pop("DOMAINBENCH_MONGO_URI", None)
    log = open(tmp_path / "ui.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([sys.executable, "-m", "domainbench.app.cli", "ui", *flags, "--port", str(port)], cwd=tmp_path,
                            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.time() + 180
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as r:
                    if r.read() == b"ok":
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.time() > deadline:
                raise AssertionError(f"the UI did not start: {(tmp_path / 'ui.log').read_text()[-3000:]}")
            time.sleep(0.5)
        yield port
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()


@pytest.fixture
def server(chromium: str, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    home = tmp_path / "home"
    try:
        with ui_server(tmp_path, home) as port:
            yield f"http://127.0.0.1:{port}", home
            # the UI listens on the loopback address only (0100007F is 127.0.0.1 in /proc's byte order)
            assert listening_addresses(port) == {"0100007F"}, listening_addresses(port)
    finally:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)  # the test may have failed before making it
        shutil.copy(tmp_path / "ui.log", ARTIFACTS / "ui.log")


def set_pills(page, key: str, wanted: set[int]) -> None:  # noqa: ANN001 - a playwright Page
    """Click the severity pills of ``key`` until exactly ``wanted`` are selected."""
    for s in range(1, 6):
        button = page.locator(f".st-key-{key}").get_by_role("button", name=str(s), exact=True)
        active = button.get_attribute("aria-pressed") == "true"
        if active != (s in wanted):
            button.click()
            wait_idle(page)


def remove(page, name: str) -> None:  # noqa: ANN001
    """Click a row's Remove button until the row is gone (a click during a rerun can be lost)."""
    from playwright.sync_api import expect

    for _ in range(3):
        button = page.locator(f".st-key-rm-{name}").get_by_role("button", name="Remove")
        if button.count():
            button.first.click()
        wait_idle(page)
        try:
            expect(page.locator(f".st-key-row-{name}")).to_have_count(0, timeout=30_000)
            return
        except AssertionError:
            continue
    raise AssertionError(f"the row of {name} is still there after three clicks on Remove")


def wait_idle(page, timeout_ms: int = 180_000) -> None:  # noqa: ANN001
    """Wait until Streamlit has finished the rerun the last action started.

    While a script runs, Streamlit's header shows a "Stop" button; stale elements of the previous
    run stay in the page until then, so locators must not be resolved before it is gone.
    """
    page.wait_for_timeout(300)
    page.wait_for_function(
        "() => ![...document.querySelectorAll('header button')].some(b => b.innerText.trim() === 'Stop')",
        timeout=timeout_ms, polling=200)
    page.wait_for_timeout(200)


def test_plan_edit_launch_and_read_a_run_in_chromium(chromium: str, server: tuple[str, Path]) -> None:
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=120_000)  # a first render on two busy cores takes long
    url, home = server
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    print(f"\nscreenshots and the CSV: {ARTIFACTS}")
    t0 = time.perf_counter()
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=FLAGS, headless=True)
        page = browser.new_page(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
        page.set_default_timeout(120_000)
        try:
            _drive(page, url, home)
        except BaseException:
            page.screenshot(path=str(ARTIFACTS / "failure.png"), full_page=True)
            raise
        finally:
            browser.close()
    print(f"browser test: {time.perf_counter() - t0:.0f} s")


def _drive(page, url: str, home: Path) -> None:  # noqa: ANN001
    from playwright.sync_api import expect

    # 1. the app opens on Runs (empty store: the hint), then New domain
    page.goto(url)
    expect(page.get_by_text("No runs yet")).to_be_visible()
    page.get_by_role("link", name="New domain").click()
    expect(page.get_by_role("heading", name="New domain")).to_be_visible()
    wait_idle(page)

    # 2. describe a domain and plan it (offline planner)
    page.locator(".st-key-domain-text textarea").fill(DOMAIN)
    page.get_by_role("button", name="Plan", exact=True).click()
    expect(page.get_by_role("heading", name="Edit the plan")).to_be_visible(timeout=240_000)
    wait_idle(page)
    heading = page.get_by_role("heading", name=re.compile(r"Chosen corruptions \(\d+\)")).inner_text()
    n_planned = int(re.search(r"\((\d+)\)", heading).group(1))  # type: ignore[union-attr]
    expect(page.locator("[class*='st-key-row-']")).to_have_count(n_planned)  # the editor has rendered every row
    planned = [k.removeprefix("st-key-row-") for k in page.locator("[class*='st-key-row-']").evaluate_all(
        "els => els.map(e => [...e.classList].find(c => c.startsWith('st-key-row-')))")]
    assert KEEP in planned and len(planned) >= 2, planned
    page.screenshot(path=str(ARTIFACTS / "1-planned.png"), full_page=True)

    # 3. edit the plan: keep one planned corruption at severities 1 and 3, add another at 2 only
    for name in planned:
        if name != KEEP:
            remove(page, name)
    for _ in range(10):  # the planner's stacked cells, if any (a click during a rerun can be lost)
        if not page.locator("[class*='st-key-composition-']").count():
            break
        page.locator(".st-key-rm-composition-0").get_by_role("button", name="Remove").first.click()
        wait_idle(page)
    expect(page.locator("[class*='st-key-composition-']")).to_have_count(0)
    set_pills(page, f"sev-{KEEP}", {1, 3})
    page.locator(".st-key-add-corruption").click()
    page.keyboard.type(ADD)
    page.keyboard.press("Enter")
    wait_idle(page)
    page.get_by_role("button", name="Add corruption").click()
    wait_idle(page)
    expect(page.locator(f".st-key-row-{ADD}")).to_be_visible()
    set_pills(page, f"sev-{ADD}", {2})
    rows = page.locator("[class*='st-key-row-']")
    expect(rows).to_have_count(2)
    page.screenshot(path=str(ARTIFACTS / "2-edited.png"), full_page=True)

    # 4. launch on the bundled sample with the embedded models, 40 images, no stability
    page.locator(".st-key-limit input").fill("40")
    page.locator(".st-key-stability label").click()
    page.get_by_role("button", name="Launch run").click()
    queued = page.get_by_text(re.compile(r"Queued run \S+"))
    expect(queued).to_be_visible(timeout=120_000)
    run_id = re.search(r"Queued run (\S+?):", queued.inner_text()).group(1)  # type: ignore[union-attr]

    # 5. the worker started by `domainbench ui` takes it; the queue panel follows it to done
    from domainbench.store import open_store

    store = open_store(None, home)
    run = store.get_run(run_id)
    assert run is not None
    assert [(c.name, c.severities) for c in run.domain.corruptions] == [(KEEP, [1, 3]), (ADD, [2])]
    assert run.domain.compositions == []
    assert run.config.limit == 40 and not run.config.stability
    deadline = time.time() + 420
    while (run := store.get_run(run_id)).status not in ("done", "failed"):  # type: ignore[union-attr]
        assert time.time() < deadline, f"the worker did not finish {run_id}: {run}"
        time.sleep(2)
    assert run.status == "done", run.error
    assert run.worker and run.attempts == 1
    # elements of a rerun in progress stay in the page marked stale: read the fresh line only
    line = page.locator(f".st-key-queued-{run_id} [data-testid='stElementContainer'][data-stale='false']").filter(
        has_text=re.compile(r"all \d+ units"))  # progress in units (a finished run has all of them)
    expect(line.first).to_contain_text("done", timeout=60_000)
    wait_idle(page)
    page.screenshot(path=str(ARTIFACTS / "3-done.png"), full_page=True)

    # 6. the run's page by URL: summary table and a severity plot
    page.goto(f"{url}/?run={run_id}")
    expect(page.get_by_text(run_id).first).to_be_visible()
    wait_idle(page)
    expect(page.locator("[data-testid='stDataFrame']:visible").first).to_be_visible()  # some sit in closed expanders
    summary = page.locator("[data-testid='stDataFrame']").filter(has_text="mCE")
    expect(summary.first).to_be_visible()
    expect(summary.first.get_by_text("embedded:fmnist-plain").first).to_be_attached()
    plot = page.locator(".js-plotly-plot").filter(has=page.locator(".xtitle", has_text=re.compile("severity", re.I)))
    expect(plot.first).to_be_visible()
    assert plot.first.locator(".scatterlayer .trace").count() >= 2  # a line per model at least
    page.screenshot(path=str(ARTIFACTS / "4-run.png"))
    plot.first.scroll_into_view_if_needed()
    plot.first.screenshot(path=str(ARTIFACTS / "4-severity-plot.png"))

    # 7. export through the browser: the Export tab's CSV button downloads the file; its content is
    # what `domainbench export` writes (the button serves data.export_csv = query.export.to_csv).
    page.get_by_role("tab", name=re.compile("Export")).dispatch_event("click")
    button = page.get_by_role("button", name=re.compile("cells as CSV"))
    expect(button).to_be_visible()
    with page.expect_download(timeout=60_000) as download:
        button.click()
    assert download.value.suggested_filename.endswith(".csv"), download.value.suggested_filename
    print(f"downloaded {download.value.suggested_filename} from {download.value.url}")
    path = ARTIFACTS / f"{run_id}.csv"
    download.value.save_as(path)
    reference = ARTIFACTS / f"{run_id}-cli.csv"
    env = {**os.environ, "DOMAINBENCH_HOME": str(home), "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-m", "domainbench.app.cli", "--quiet", "export", run_id, "--format", "csv",
                    "-o", str(reference)], cwd=ROOT, env=env, check=True, timeout=300)
    assert list(csv.DictReader(io.StringIO(path.read_text()))) == list(csv.DictReader(io.StringIO(
        reference.read_text())))
    rows_ = list(csv.DictReader(io.StringIO(path.read_text())))
    assert {"model", "corruption", "severity", "balanced_accuracy", "top1_accuracy"} <= set(rows_[0])
    cells = {(r["model"], r["corruption"], int(r["severity"])) for r in rows_}
    assert cells == {(m, c, s) for m in ("embedded:fmnist-plain", "embedded:fmnist-augmented")
                     for c, s in (("clean", 0), (KEEP, 1), (KEEP, 3), (ADD, 2))}
    assert all(0.0 <= float(r[k]) <= 1.0 for r in rows_ for k in ("balanced_accuracy", "top1_accuracy"))
    page.screenshot(path=str(ARTIFACTS / "5-export.png"))

"""`domainbench report`: the HTML's numbers are the JSON export's; it renders offline in Chromium; --format md."""

from __future__ import annotations

import json
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import pytest

from domainbench.records.config import CorruptionChoice, DomainConfig, save
from domainbench.records.report import RunReport
from tests.cli_runner import run_cli as cli

PLAIN, AUG = "embedded:fmnist-plain", "embedded:fmnist-augmented"
DOMAIN = DomainConfig(domain="low contrast in a dim warehouse", corruptions=[
    CorruptionChoice(name="contrast", severities=[3, 5], reason="dim light flattens the tones"),
    CorruptionChoice(name="gaussian_noise", severities=[2], reason="sensor noise in the dark")])
CHROMIUM = Path("/usr/bin/chromium")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    import domainbench

    home = tmp_path_factory.mktemp("handout") / "home"
    plan = save(DOMAIN, home.parent / "plan.toml")
    domainbench.run(plan, [PLAIN, AUG], limit=40, stability=False, threat=False, workers=0, run_id="both", store=home)
    yield home


@pytest.fixture(scope="module")
def written(store: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path | str]:
    """The HTML and Markdown reports and the JSON export of the run, made through the CLI once."""
    out = tmp_path_factory.mktemp("files")
    mp = pytest.MonkeyPatch()
    mp.setenv("DOMAINBENCH_HOME", str(store))
    cap = _Capture()
    try:
        for args in (["report", "both", "-o", str(out / "r.html")], ["report", "both", "-f", "md", "-o", str(out / "r.md")],
                     ["export", "both", "-f", "json", "-o", str(out / "r.json")]):
            code, _, err = cli(args, cap, mp)
            assert code == 0, err
    finally:
        mp.undo()
    return {"html": out / "r.html", "md": out / "r.md", "json": out / "r.json"}


class _Capture:
    """capsys for a module fixture: run_cli only reads it back."""

    def readouterr(self):  # noqa: ANN201
        class Out:
            out = ""
            err = ""
        return Out()


class _Numbers(HTMLParser):
    """Every table cell carrying a number (``data-metric``) or a group (``data-group``), and the page's text."""

    def __init__(self) -> None:
        super().__init__()
        self.numbers: list[dict[str, str]] = []
        self.groups: dict[str, str] = {}
        self.text: list[str] = []
        self._group: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if "data-metric" in a:
            self.numbers.append(a)
        self._group = a.get("data-group")

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if self._group is not None:
            self.groups[self._group] = data
            self._group = None


def _value(text: str) -> float | None:
    return None if text in ("", "None") else float(text)


def test_the_html_numbers_are_the_json_export_s(written: dict[str, Path]) -> None:
    page = written["html"].read_text()
    doc = json.loads(written["json"].read_text())
    parsed = _Numbers()
    parsed.feed(page)
    report = RunReport.model_validate(doc["report"])
    rows = {r.model: r for r in report.table()}
    ivs = {m["model"]: m for m in doc["intervals"]["models"]}
    cells = {(c["model"], f"{c['corruption']}:{c['severity']}"): c for c in doc["cells"]}
    from domainbench.metrics.registry import metric

    seen = {"model": 0, "cell": 0}
    for n in parsed.numbers:
        m = metric(n["data-metric"])
        if m.level == "model":
            expected, interval = m.read(rows[n["data-model"]]), ivs[n["data-model"]].get(m.name)
        else:
            row = cells[(n["data-model"], n["data-cell"])]
            expected = row[m.name]
            interval = [row[f"{m.name}_ci_low"], row[f"{m.name}_ci_high"]] if f"{m.name}_ci_low" in row else None
        assert _value(n["data-value"]) == expected, n  # repr round-trips a float exactly
        if interval is not None and interval[0] is not None:
            assert [float(n["data-low"]), float(n["data-high"])] == interval, n
        seen[m.level] += 1
    assert seen == {"model": 2 * 7, "cell": 2 * 4 * 5}  # every summary and cell number of both models is there
    assert parsed.groups == doc["groups"]["letters"] == {AUG: "a", PLAIN: "b"}
    text = " ".join(" ".join(parsed.text).split())
    for v in doc["verdicts"]:
        assert " ".join(v["sentence"].split()) in text
    # the plan with each reason, the caveats and the data fingerprint and versions
    for c in DOMAIN.corruptions:
        assert c.reason in text
    assert "The PD threat was not computed" in text and "Embedding stability was not measured" in text
    assert f"the bundled sample version {doc['run']['dataset']['fingerprint']['version']}" in text
    assert "domainbench 0" in text and "numpy " in text
    # cost beside robustness: each model's images/s from the run's timings, the fastest-not-worse sentence
    timings = doc["run"]["timings"]
    for model in (PLAIN, AUG):
        rate = timings[model]["images"] / (timings[model]["preprocess"] + timings[model]["forward"])
        assert f'data-cost="{model}">{rate:,.0f}</td>' in page
    assert "The fastest model not significantly worse than the best on this domain is" in text
    # self-contained: no fetch from anywhere; thumbnails inline
    import re

    assert re.findall(r"<script[^>]*\bsrc=", page) == [] and re.findall(r'<img[^>]*src="(?!data:)', page) == []
    assert "<link" not in page and '<img alt="clean" src="data:image/png;base64,' in page


def test_markdown_is_the_same_content_as_tables(written: dict[str, Path]) -> None:
    md = written["md"].read_text()
    doc = json.loads(written["json"].read_text())
    assert md.startswith("# domainbench report: both\n")
    assert doc["verdicts"][0]["sentence"] in md
    report = RunReport.model_validate(doc["report"])
    aug = next(r for r in report.table() if r.model == AUG)
    lo, hi = next(m for m in doc["intervals"]["models"] if m["model"] == AUG)["mean_corrupted_accuracy"]
    row = next(line for line in md.splitlines() if line.startswith(f"| {AUG} | a |"))
    assert f"{100 * aug.mean_corrupted_acc:.1f} ({100 * lo:.1f}–{100 * hi:.1f})" in row
    assert "| contrast | 3, 5 | dim light flattens the tones |" in md and "<img" not in md


@pytest.mark.parametrize(("args", "expect"), [
    (["report", "nope", "-o", "x.html"], "no run 'nope'"),
    (["report", "both", "-f", "pdf", "-o", "x.html"], "--format 'pdf' is not supported; use html or md"),
])
def test_bad_input_is_one_line_exit_2(args: list[str], expect: str, store: Path, tmp_path: Path, capsys,
                                      monkeypatch) -> None:
    monkeypatch.setenv("DOMAINBENCH_HOME", str(store))
    monkeypatch.chdir(tmp_path)
    code, out, err = cli(args, capsys, monkeypatch)
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: ") and expect in lines[0], err
    assert not (tmp_path / "x.html").exists()


def test_the_html_renders_offline_in_chromium(written: dict[str, Path]) -> None:
    if not CHROMIUM.is_file():
        pytest.skip("Chromium not found at /usr/bin/chromium (apt-get install -y chromium)")
    from playwright.sync_api import sync_playwright

    page_text = written["html"].read_text()
    figures = page_text.count('<div class="figure">')
    assert figures == 3  # accuracy against severity, the flip heatmap, cost beside robustness
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                     args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        try:
            page = browser.new_page()
            requests: list[str] = []
            errors: list[str] = []

            def block(route) -> None:  # noqa: ANN001 - offline: anything but the file itself is refused
                requests.append(route.request.url)
                if route.request.url.startswith(("file://", "data:")):
                    route.continue_()
                else:
                    route.abort()

            page.route("**/*", block)
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(written["html"].as_uri())
            page.wait_for_function(f"document.querySelectorAll('.js-plotly-plot .main-svg').length >= {figures}",
                                   timeout=60_000)
            assert errors == []
            assert [u for u in requests if not u.startswith(("file://", "data:"))] == []
            # every figure drew its data, every thumbnail decoded
            assert page.evaluate("[...document.querySelectorAll('.js-plotly-plot')].map(p => p.data.length > 0)") \
                == [True] * figures
            assert page.evaluate("[...document.images].every(i => i.complete && i.naturalWidth > 0)")
            assert page.locator("table.summary tbody tr").count() == 2
            assert page.get_by_text("tied groups: a: " + AUG).count() == 1
        finally:
            browser.close()

"""The run page's "Damage & calibration" tab (accuracy against SSIM or severity, composed cells with their
steps, reliability diagrams of the clean pass beside the worst cell) and the New domain page's composed
preview: their frames equal independent computations, and the pages draw them."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest
from fe_synthetic import REAL_IMAGES
from test_app import APP, run_page, texts

from domainbench.records.config import Composition, CompositionStep, CorruptionChoice, DomainConfig, PlannerProvenance, RunConfig
from domainbench.engine.runner import Engine
from domainbench.frontend import damage_calibration as dc
from domainbench.frontend import data, ladder
from domainbench.query import report as report_of
from domainbench.store import Store

TAB = "Damage & calibration"
NIGHT = Composition(name="dark and noisy", reason="night", steps=[CompositionStep(corruption="brightness", severity=2),
                                                                  CompositionStep(corruption="gaussian_noise", severity=3)])
DOMAIN = DomainConfig(domain="night shots", corruptions=[
    CorruptionChoice(name="gaussian_noise", severities=[1, 4], reason="sensor noise"),
    CorruptionChoice(name="saturate", severities=[1], reason="colour: no effect on the grayscale sample")],
    compositions=[NIGHT])


@pytest.fixture
def composed_run(store: Store) -> str:
    cfg = RunConfig(dataset="sample", limit=16, workers=0, device="cpu", stability=False, threat=False)
    return Engine(store).start(DOMAIN, cfg)


def spec(chart) -> dict:  # noqa: ANN001 - an AppTest plotly element
    return json.loads(chart.proto.spec)


def values(array: list | dict) -> list[float]:
    """A figure's data array as plotly's JSON holds it: a list, or a typed array ({"dtype", "bdata": base64})."""
    if isinstance(array, dict):
        import base64

        return np.frombuffer(base64.b64decode(array["bdata"]), dtype=np.dtype(array["dtype"])).tolist()
    return list(array)


def _plain_bins(confidence: np.ndarray, correct: np.ndarray) -> list[tuple[int, float | None, float | None]]:
    out = []
    for b in range(15):
        members = [i for i, c in enumerate(confidence) if b / 15 <= c < (b + 1) / 15 or (b == 14 and c == 1.0)]
        out.append((len(members), np.mean(correct[members]) if members else None,
                    np.mean(confidence[members]) if members else None))
    return out


def test_reliability_frame_equals_a_plain_loop_over_the_stored_images(real_store: Store, real_run: tuple[Path, str]) -> None:
    run_id = real_run[1]
    report = report_of(real_store, run_id)
    for model in report.model_names:
        frame = dc.reliability_frame(report, model)
        worst = min((c for c in report.model(model).cells), key=lambda c: c.accuracy)
        assert list(dict.fromkeys(frame["cell"])) == ["clean", f"worst: {worst.corruption} s{worst.severity}"]
        for label, (corruption, severity) in (("clean", ("clean", 0)), (frame["cell"].iloc[-1], (worst.corruption, worst.severity))):
            units = [u for u in real_store.units(run_id) if (u.model, u.corruption, u.severity) == (model, corruption, severity)]
            conf = np.concatenate([np.asarray(u.confidence, dtype=np.float64) for u in units])
            hits = np.concatenate([np.asarray(u.hits, dtype=np.float64) for u in units])
            part = frame[frame["cell"] == label]
            assert part["images"].sum() == len(conf) == REAL_IMAGES
            for (n, acc, mean_conf), (_, row) in zip(_plain_bins(conf, hits), part.iterrows(), strict=True):
                assert row["images"] == n
                if n:
                    assert row["accuracy"] == pytest.approx(acc, abs=1e-12)
                    # stored confidences are float32; the bins sum them exactly in fixed point
                    assert row["confidence"] == pytest.approx(mean_conf, abs=1e-6)
                else:
                    assert row["accuracy"] is None or math.isnan(row["accuracy"])


def test_damage_and_composed_frames(composed_run: str, store: Store) -> None:
    report = report_of(store, composed_run)
    frame = dc.damage_frame(report)
    assert len(frame) == 2 * 4  # models x (2 noise severities, saturate, the composition)
    for _, row in frame.iterrows():
        cell = report.cell(row["model"], row["corruption"], row["severity"])
        assert row["ssim"] == cell.damage.ssim and row["accuracy"] == cell.accuracy and row["ece"] == cell.calibration.ece
    sat = frame[frame["corruption"] == "saturate"]
    assert (sat["ssim"] == 1.0).all() and sat["psnr_db"].map(math.isinf).all()
    assert dc.psnr_label(math.inf) == "∞" and dc.psnr_label(None) == "" and dc.psnr_label(20.04) == "20.0"
    composed = dc.composed_frame(report, DOMAIN)
    assert composed[["cell", "steps", "reason"]].values.tolist() == [
        ["compose:dark and noisy", "brightness s2 → gaussian_noise s3", "night"]]
    for model in report.model_names:
        assert composed[f"{model} acc %"].iloc[0] == pytest.approx(100 * report.cell(model, "compose:dark and noisy", 1).accuracy)
    # the chart's x axis: SSIM (ordered, more damage to the right) or the severity number
    fig = dc.accuracy_vs_damage(frame, "ssim")
    assert fig.layout.xaxis.range[0] > fig.layout.xaxis.range[1] and len(fig.data) == 2 * 3  # reversed: damage grows right
    noise = next(t for t in fig.data if t.meta == "gaussian_noise")
    assert list(noise.x) == sorted(noise.x, reverse=True) and len(noise.x) == 2  # along the damage
    assert list(next(t for t in dc.accuracy_vs_damage(frame, "severity").data if t.meta == "gaussian_noise").x) == [1, 4]
    with pytest.raises(ValueError, match="ssim"):
        dc.accuracy_vs_damage(frame, "psnr")


def test_the_tab_draws_damage_composed_cells_and_reliability(composed_run: str, store: Store) -> None:
    at = run_page(composed_run, TAB)
    assert not at.error, texts(at.error)
    report = report_of(store, composed_run)
    charts = at.get("plotly_chart")
    assert len(charts) == 2
    damage, reliability = spec(charts[0]), spec(charts[1])
    assert damage["layout"]["xaxis"]["title"]["text"].startswith("SSIM")
    model = report.model_names[0]
    assert reliability["layout"]["title"]["text"].startswith(f"reliability: {model}<br>")
    bars = [t for t in reliability["data"] if t["type"] == "bar"]
    clean = report.model(model).clean.calibration
    assert bars[0]["name"] == f"clean (ECE {clean.ece:.3f})"
    assert values(bars[0]["y"]) == pytest.approx([a for _, a, _, n in clean.bins() if n], abs=1e-12)
    tables = {tuple(d.value.columns[:2]): d.value for d in at.dataframe}
    composed = tables[("cell", "steps")]
    assert composed["steps"].tolist() == ["brightness s2 → gaussian_noise s3"]
    table = next(d.value for d in at.dataframe if "SSIM" in d.value.columns)
    assert table[table["corruption"] == "saturate"]["PSNR dB"].tolist() == ["∞", "∞"]
    assert table["SSIM"].tolist() == sorted(table["SSIM"].tolist())  # most damaged first
    # the toggle: severity numbers on the x axis; another model's diagram
    at.radio(key=f"damage-x-{composed_run}").set_value("severity").run()
    assert spec(at.get("plotly_chart")[0])["layout"]["xaxis"]["title"]["text"] == "severity"
    other = report.model_names[1]
    at.selectbox(key=f"reliability-model-{composed_run}").set_value(other).run()
    assert not at.exception and spec(at.get("plotly_chart")[1])["layout"]["title"]["text"].startswith(f"reliability: {other}<br>")


def test_new_domain_preview_shows_composed_steps_and_ssim(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    def plan_with_composition(text: str, provider: str = "offline", samples: int = 10) -> DomainConfig:
        return DOMAIN.model_copy(update={"planner": PlannerProvenance(provider=provider, model="fake", samples=samples,
                                                                      created_at="2025-02-01T00:00:00+00:00")})

    at = AppTest.from_file(APP, default_timeout=90).run()
    at.switch_page("views/new_domain.py").run()
    monkeypatch.setattr(data, "plan_domain", plan_with_composition)
    at.text_area(key="domain-text").set_value("night shots").run()
    next(b for b in at.button if b.label == "Plan").click().run()
    assert not at.exception and not at.error, texts(at.error)
    from domainbench.frontend.ui import md_escape

    steps = f"{md_escape('brightness')} s2 → {md_escape('gaussian_noise')} s3"
    assert any(md_escape("compose:dark and noisy") in m and steps in m for m in (str(x.value) for x in at.markdown)), \
        texts(at.markdown)
    assert "why: night" in texts(at.text)
    _, _, labels = data.sample_images()
    clean = data.preview_image(int(np.flatnonzero(labels == 0)[0]))
    expected = ladder.ladder_ssim(clean, [ladder.composed(clean, NIGHT.pairs)])[0]
    captions = [c.caption for img in at.get("image") for c in img.proto.imgs]
    assert f"SSIM {expected:.2f}" in captions


def test_9_the_damage_chart_reads_one_line_per_model_error_bars_and_chance(composed_run: str, store: Store) -> None:
    """Defect 9: it drew a line per model × corruption in two colours (22 on the night run), its legend cut, with
    no error bars and no chance line."""
    at = run_page(composed_run, TAB)
    report = report_of(store, composed_run)
    damage = spec(at.get("plotly_chart")[0])
    traces = damage["data"]
    # the legend names each model once, in its own colour
    shown = [t for t in traces if t.get("showlegend", True)]
    assert [t["name"] for t in shown] == report.model_names
    assert len({t["line"]["color"] for t in shown}) == len(report.model_names)
    # one panel per corruption (noise, saturate, the composition)
    panels = {t["meta"] for t in traces}
    assert panels == {"gaussian_noise", "saturate", "compose:dark and noisy"} and len(traces) == 2 * 3
    # the chance line at 1 / classes in every panel
    n = len(report.classification.classes)
    lines = [s for s in damage["layout"]["shapes"] if s["type"] == "line" and s["y0"] == s["y1"]]
    assert len(lines) == 3 and all(s["y0"] == pytest.approx(100 / n) for s in lines)
    # each point's error bar: the cell's 95 % interval, the same as the summary's (the run's intervals)
    from domainbench.query import intervals as run_intervals

    ri = run_intervals(store, report)
    bands = {(c.model, c.corruption, c.severity): c.balanced_accuracy for c in ri.cells}
    for t in traces:
        ys, plus, minus = values(t["y"]), values(t["error_y"]["array"]), values(t["error_y"]["arrayminus"])
        first = report.model(t["name"]).clean
        assert ys[0] == pytest.approx(100 * first.accuracy)  # each line starts from the clean pass
        assert values(t["x"])[0] == 1.0
        cells = [("clean", 0)] + [(t["meta"], int(c[0])) for c in t["customdata"][1:]]
        for y, p, m, cell in zip(ys, plus, minus, cells, strict=True):
            lo, hi = bands[(t["name"], *cell)]
            assert y + p == pytest.approx(100 * hi) and y - m == pytest.approx(100 * lo)


def test_reliability_bins_have_their_proportion_interval() -> None:
    from scipy.stats import norm

    frame = pd.DataFrame({"cell": ["clean"] * 2, "bin": [13, 14], "low": [13 / 15, 14 / 15], "high": [14 / 15, 1.0],
                          "images": [20, 0], "accuracy": [0.75, None], "confidence": [0.9, None], "ece": [0.1, 0.1]})
    bar = next(t for t in dc.reliability_diagram(frame, "m").data if t.type == "bar")
    # continuity-corrected Wilson for 15 of 20 (Newcombe 1998), by hand
    k, n, z = 15, 20, norm.ppf(0.975)
    p = k / n
    lo = (2 * n * p + z**2 - 1 - z * math.sqrt(z**2 - 2 - 1 / n + 4 * p * (n * (1 - p) + 1))) / (2 * (n + z**2))
    hi = (2 * n * p + z**2 + 1 + z * math.sqrt(z**2 + 2 - 1 / n + 4 * p * (n * (1 - p) - 1))) / (2 * (n + z**2))
    assert list(bar.y) == [0.75]
    assert 0.75 + bar.error_y.array[0] == pytest.approx(hi) and 0.75 - bar.error_y.arrayminus[0] == pytest.approx(lo)

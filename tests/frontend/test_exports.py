"""The files behind the download buttons: PNG through kaleido and Chromium, self-contained HTML, CSV."""

from __future__ import annotations

import io

import pandas as pd
import plotly.graph_objects as go
import pytest

from domainbench.frontend import exports


def bars() -> go.Figure:
    fig = go.Figure(go.Bar(x=["noise", "blur"], y=[1.5, 0.5], name="B"))
    fig.update_layout(title="CE per corruption", height=400)
    return fig


@pytest.mark.skipif(not exports.png_available(), reason="PNG export needs kaleido and a Chromium")
def test_figure_png_is_a_png_of_the_figure_size() -> None:
    from PIL import Image

    png = exports.figure_png(bars())
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert Image.open(io.BytesIO(png)).size == (1400, 400)


def test_figure_html_is_self_contained() -> None:
    html = exports.figure_html(bars())
    assert html.startswith("<html>") and "CE per corruption" in html
    assert "<script src=\"https://cdn.plot.ly" not in html and len(html) > 1_000_000  # plotly.js inlined: opens offline


def test_slug_makes_safe_file_names() -> None:
    assert exports.slug("run-1/embedded:fmnist plain") == "run-1_embedded_fmnist_plain"
    assert exports.slug("///") == "export"


def test_csv_keeps_a_meaningful_index_only() -> None:
    matrix = pd.DataFrame({"night": [1.0]}, index=pd.Index(["A"], name="model"))
    assert exports.csv_text(matrix).splitlines() == ["model,night", "A,1.0"]
    rows = pd.DataFrame({"model": ["A", "B"], "mce": [1.0, None]})
    assert exports.csv_text(rows).splitlines() == ["model,mce", "A,1.0", "B,"]

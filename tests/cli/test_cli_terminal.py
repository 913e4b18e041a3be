"""The terminal face (issue 37.6): ``show`` and ``run`` print the verdict first, then the summary, then details (the
damage list behind ``--details``); a model name is never broken at 80 or 120 columns; ``ls`` never cuts a run id."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from domainbench.records.config import CorruptionChoice, DomainConfig, save
from domainbench.store import open_store
from tests.cli_runner import run_cli as cli
from tests.run_records import records

MODELS = ("embedded:fmnist-plain", "embedded:fmnist-augmented")


@pytest.fixture
def sample_run(home: Path, tmp_path: Path, capsys, monkeypatch) -> str:  # noqa: ANN001
    domain = DomainConfig(domain="low contrast", corruptions=[CorruptionChoice(name="contrast", severities=[3, 5], reason="r")])
    cfg = save(domain, tmp_path / "contrast.toml")
    monkeypatch.setenv("COLUMNS", "80")  # read on every print; setting the console's width would pin it
    code, out, err = cli(["run", str(cfg), "--models", ",".join(MODELS), "--limit", "60", "--no-stability",
                          "--no-threat", "--workers", "0", "--run-id", "sample"], capsys, monkeypatch)
    assert code == 0, err
    verdict = out.find("embedded:fmnist-augmented beats embedded:fmnist-plain")
    assert 0 <= verdict < out.index(" model ")  # run: the answer before the summary as well
    return "sample"


def _table_rows(out: str) -> list[str]:
    return [ln for ln in out.splitlines() if ln.lstrip().startswith("embedded:")]


@pytest.mark.parametrize("width", [80, 120])
def test_show_prints_the_verdict_first_and_never_breaks_a_model_name(width: int, sample_run: str, capsys,
                                                                      monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setenv("COLUMNS", str(width))
    code, out, err = cli(["show", sample_run], capsys, monkeypatch)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("run sample — baseline embedded:fmnist-plain")
    assert lines[1].startswith("embedded:fmnist-augmented beats embedded:fmnist-plain")  # the answer, then the table
    assert out.index("beats") < out.index(" model ") < out.index("(low–high)")
    # each model's row starts with its whole name (never "embedded:fmnis" / "t-augmented")
    rows = _table_rows(out.split("(low–high)")[0].split(" model ", 1)[1])
    # (at 80 columns the metrics go on in a second table, the names repeated: test_show_keeps_every_interval_whole)
    assert sorted(set(r.split()[0] for r in rows)) == sorted(MODELS) and len(rows) % len(MODELS) == 0
    assert all(len(ln) <= width for ln in lines)
    # the damage of every cell is a detail: named, not printed, unless asked for
    assert "damage (mean SSIM" not in out and f"domainbench show {sample_run} --details" in out
    code, details, err = cli(["show", sample_run, "--details"], capsys, monkeypatch)
    assert code == 0 and "damage (mean SSIM/PSNR dB" in details
    assert details.index("(low–high)") < details.index("damage (mean SSIM")


@pytest.mark.parametrize("width", [80, 120])
def test_ls_never_cuts_a_run_id(width: int, home: Path, capsys, monkeypatch) -> None:  # noqa: ANN001
    ids = ["20261127-110512-night-time-dash-cam-ab12", "20261127-110513-chest-x-rays-portable-cd34"]
    for rid in ids:
        records(open_store(), rid)
    monkeypatch.setenv("COLUMNS", str(width))
    code, out, err = cli(["ls"], capsys, monkeypatch)
    assert code == 0, err
    for rid in ids:
        assert re.search(rf"(^|\s|│|┃){re.escape(rid)}(\s|│|┃|$)", out, re.M), out  # whole, on one line
    assert "…" not in out
    assert all(len(ln) <= width for ln in out.splitlines())


def test_compare_at_80_columns_keeps_names_and_p_values_whole(sample_run: str, capsys, monkeypatch) -> None:  # noqa: ANN001
    from domainbench import query

    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = cli(["compare", sample_run], capsys, monkeypatch)
    assert code == 0, err
    assert "…" not in out and all(len(ln) <= 80 for ln in out.splitlines())
    store = open_store()
    pairs = query.comparison(store, [sample_run]).pairs
    a, b = pairs[0].model_a, pairs[0].model_b
    assert f"A = {a}, B = {b}" in out
    for p in pairs:  # each cell's row holds its p-values and difference whole, as the JSON has them
        row = next(ln for ln in out.splitlines() if ln.lstrip().startswith(f"{p.corruption}@{p.severity} "))
        for text in (*(("<0.001" if v < 0.001 else f"{v:.3g}") for v in (p.p_value, p.p_holm, p.p_balanced_holm)),
                     f"{100 * p.difference:+.1f}"):
            assert f" {text} " in f" {row} ", (text, row)


@pytest.mark.parametrize("width", [80, 120])
def test_show_keeps_every_interval_whole(width: int, sample_run: str, capsys, monkeypatch) -> None:  # noqa: ANN001
    """At 80 columns the summary's intervals were folded mid-number ("(65.5–10" / "0.0)"): each is now whole on one
    line (the metric columns go on in a second table under the first, the model names repeated)."""
    monkeypatch.setenv("COLUMNS", str(width))
    code, out, err = cli(["show", sample_run], capsys, monkeypatch)
    assert code == 0, err
    table = out.split(" model ", 1)[1].split("(low–high)")[0]
    intervals = re.findall(r"\(([^()]*)\)", table)
    assert intervals and all(re.fullmatch(r"-?[\d.]+(–| to )-?[\d.]+", iv) for iv in intervals), intervals
    assert table.count("(") == table.count(")") and all(ln.count("(") == ln.count(")") for ln in table.splitlines())
    # every model's every interval is printed: two models x the metrics that have one
    from domainbench.metrics.registry import metrics_of

    shown = [m for m in metrics_of("model") if m.cli_header and m.interval]
    assert len(intervals) >= 2 * len([m for m in shown if m.name in ("clean_accuracy", "mean_corrupted_accuracy")])
    assert all(len(ln) <= width for ln in out.splitlines())

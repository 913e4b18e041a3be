"""`show` on a run stored without per-image predictions (issue 37): the summary, its intervals and the PD threat
are printed from the stored counts, and the missing paired verdict is said in one line instead of an `error:`."""

from __future__ import annotations

from pathlib import Path

import pytest

from domainbench.store import open_store
from tests.cli_runner import run_cli
from tests.frontend import fe_synthetic as synthetic

RUN = "20250101-000000-night-abcd"


def _store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, per_image: bool) -> None:
    monkeypatch.setenv("DOMAINBENCH_HOME", str(tmp_path))
    monkeypatch.delenv("DOMAINBENCH_MONGO_URI", raising=False)
    store = open_store(None, tmp_path)
    synthetic.populate(store, run_id=RUN, per_image=per_image)
    store.close()


def _row(out: str, model: str) -> list[str]:
    """The summary table's row of ``model`` (the verdict's lines also start with a model's name)."""
    return next(row for row in (line.split() for line in out.splitlines()) if row[:1] == [model] and row[1][0].isdigit())


def test_show_without_per_image_predictions_prints_the_summary_and_says_why_no_verdict(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    _store(tmp_path, monkeypatch, per_image=False)
    code, out, err = run_cli(["show", RUN], capsys, monkeypatch)
    assert code == 0, err
    assert "error:" not in out + err
    # where the verdict would be: under the run's line, above the summary
    assert out.splitlines()[0].startswith(f"run {RUN}")
    assert out.splitlines()[1].startswith("no paired verdict (it needs per-image predictions): this run's units store "
                                          "none, only counts")
    # the summary from the counts, by hand from the synthetic run: 9 and 8 of 10 images per class right clean;
    # corrupted: the mean over gaussian_noise 1-3 and brightness 1-2 of (clean - drop * severity) / 10
    corrupted = {m: 100 * sum(synthetic.correct(m, s) for c, sevs in synthetic.CORRUPTIONS.items() for s in sevs)
                 / (synthetic.PER_CLASS * 5) for m in synthetic.MODELS}
    assert corrupted == {"embedded:good": 72.0, "embedded:weak": 44.0}
    for model, clean in synthetic.CLEAN_CORRECT.items():
        row = _row(out, model)
        assert row[1:3] == [f"{10 * clean:.1f}", f"{corrupted[model]:.1f}"]
    assert "PD threat: 4 of 5 corruption cells safe" in out
    assert "beats" not in out


def test_show_with_per_image_predictions_still_gives_the_verdict(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    _store(tmp_path, monkeypatch, per_image=True)
    code, out, err = run_cli(["show", RUN], capsys, monkeypatch)
    assert code == 0, err
    assert "no paired verdict" not in out
    assert _row(out, "embedded:good")[1:3] == ["90.0", "72.0"]
    # the same run pairs: show prints a verdict between the two models first, under the run's line
    assert out.splitlines()[1].startswith("embedded:good beats embedded:weak")
